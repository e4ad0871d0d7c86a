package host

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// nobody is the uid (and gid) the processes of "another user" run as.
const nobody = 65534

// roleEnv makes the test binary play a role instead of running tests:
// "squat SOCKET RECORD" listens on SOCKET as a fake host, appending every
// request it gets to RECORD; "call SOCKET" sends GET /v1/runs and POST
// /v1/runs to SOCKET and prints each status and body.
const roleEnv = "STRATUS_HOST_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "squat":
		squat(os.Args[1], os.Args[2])
		return
	case "call":
		call(os.Args[1])
		return
	}
	os.Exit(m.Run())
}

// squat is the attacker's fake host: it says "ready" once it listens and
// answers every request as a host would, so that a client that trusted it
// would report success.
func squat(socket, record string) {
	ln, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	os.Chmod(socket, 0o777)
	fmt.Println("ready")
	http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if f, err := os.OpenFile(record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o666); err == nil {
			fmt.Fprintf(f, "%s %s %s\n", r.Method, r.URL.Path, b)
			f.Close()
		}
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"run_id": "r-20260101T000000-000000", "pid": 1})
	}))
}

// call is another user's client of a host.
func call(socket string) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	for _, req := range []struct{ method, body string }{{"GET", ""}, {"POST", `{"task": "/etc/passwd", "run_id": "r-20260101T000000-000000"}`}} {
		r, _ := http.NewRequest(req.method, "http://host/v1/runs", strings.NewReader(req.body))
		resp, err := hc.Do(r)
		if err != nil {
			fmt.Println(req.method, "error", err)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(req.method, resp.StatusCode, strings.TrimSpace(string(b)))
	}
}

// asNobody starts this test binary as uid nobody in role (roleEnv) with
// args. The binary is copied where that user may run it.
func asNobody(t *testing.T, role string, args ...string) *exec.Cmd {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a process as another uid needs root")
	}
	dir := testenv.SharedDir(t)
	bin := filepath.Join(dir, "host.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+role)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// startSquatter starts the fake host as uid nobody on a socket in an open
// directory and returns the socket and the file recording its requests.
func startSquatter(t *testing.T) (socket, record string) {
	t.Helper()
	dir := testenv.SharedDir(t)
	socket, record = filepath.Join(dir, "s.sock"), filepath.Join(dir, "record")
	cmd := asNobody(t, "squat", socket, record)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "ready\n" {
		t.Fatalf("the squatter did not start: %q", line)
	}
	return socket, record
}

// A host socket that another user listens on is refused by the client
// even when it sits in a directory that passes every check (it was moved
// there: the kernel still knows who listens): SO_PEERCRED names uid 65534,
// Dial refuses it, and no request, so no task path, ever reaches it.
// docs/security.md § The host socket.
func TestDial_RefusesAHostOfAnotherUser(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	dir := t.TempDir()
	squatted, record := startSquatter(t)
	path := SocketPath(dir)
	if err := makeSocketDir(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(squatted, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, os.Geteuid(), os.Getegid()); err != nil { // the file looks ours
		t.Fatal(err)
	}
	c, err := Dial(dir)
	if err == nil {
		c.Start(context.Background(), StartRequest{Task: "/home/someone/secret-task.md", RunID: "r-20260101T000000-abcdef"})
		t.Error("Dial reached a host of uid 65534")
	} else if !strings.Contains(err.Error(), "uid 65534") || !strings.Contains(err.Error(), path) {
		t.Errorf("Dial: %v; want the refusal naming the socket and the uid", err)
	}
	if b, err := os.ReadFile(record); err == nil {
		t.Errorf("the squatter received:\n%s", b)
	}
}

// A client of another uid that reaches the host's socket (its directory
// opened up here, as a mistake or a root process might) is answered 403:
// it can neither list nor start runs. docs/security.md § The host socket.
func TestHost_RefusesAClientOfAnotherUser(t *testing.T) {
	s := serve(t)
	path := SocketPath(s.dir)
	for p := filepath.Dir(path); p != filepath.Dir(s.dir); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	out, err := asNobody(t, "call", path).CombinedOutput()
	if err != nil {
		t.Fatalf("the client of uid 65534: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("the client of uid 65534 printed:\n%s", out)
	}
	for _, l := range lines {
		if !strings.Contains(l, " 403 ") || !strings.Contains(l, `"code":"forbidden"`) || !strings.Contains(l, "uid 65534") {
			t.Errorf("a client of uid 65534 got %s; want 403 EFORBIDDEN naming its uid", l)
		}
	}
	if _, err := os.Lstat(filepath.Join(s.dir, ".stratus", "runs", "r-20260101T000000-000000")); err == nil {
		t.Error("the client of uid 65534 started a run")
	}
	// The host's own user is served as before.
	if _, _, err := s.client.Runs(context.Background()); err != nil {
		t.Errorf("the host's own user: %v", err)
	}
}
