package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus/internal/host"
)

// okEngine answers every step "ok".
const okEngine = "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n"

// treeOf returns every file under root with its bytes.
func treeOf(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// A new run given an existing run's id (run --run-id, as the host is
// given one by run --detach) is refused before it writes anything under
// that id or archives the task's ctx dir: the earlier run's bundle,
// definition and logs stay as they were, and status still reads it.
func TestRun_AnExistingRunsIDIsRefusedBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", okEngine, "", "t-taken")
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	id := decodeRun(t, r.stdout).RunID
	before := treeOf(t, filepath.Join(dir, ".stratus"))
	again := runCLI(t, "run", task, "--dir", dir, "--run-id", id)
	if again.code == ExitOK || !strings.Contains(again.stderr, "run "+id+" already exists") {
		t.Errorf("run --run-id of an existing run: exit %d\n%s", again.code, again.stderr)
	}
	after := treeOf(t, filepath.Join(dir, ".stratus"))
	for p, body := range before {
		if filepath.Base(p) == "stratus.db" || strings.HasPrefix(filepath.Base(p), "stratus.db-") {
			continue // the store is opened
		}
		if after[p] != body {
			t.Errorf("%s changed by the refused run", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok && !strings.HasPrefix(filepath.Base(p), "stratus.db") && !strings.HasSuffix(p, ".lock") {
			t.Errorf("the refused run wrote %s", p)
		}
	}
	if s := statusOf(t, dir, id); s.Status != "done" {
		t.Errorf("status of the earlier run: %s", s.Status)
	}
}

// The finding, reproduced: a work dir whose path is too long for a Unix
// socket has its host socket in a directory of a predictable name in the
// temporary directory. Another uid made that directory first and listens
// in it, answering as a host would. run --detach refuses that directory,
// exits non-zero naming it, and sends the squatter nothing: the task path
// never reaches it. docs/security.md § The host socket.
func TestDetach_RefusesAHostSocketDirectoryOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a directory of another uid needs root")
	}
	dir := filepath.Join(t.TempDir(), strings.Repeat("a-long-directory-name/", 4), "project")
	dir, task := tinyRun(t, dir, okEngine, "", "t-squat")
	tmp, err := os.MkdirTemp("", "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	t.Setenv("TMPDIR", tmp)
	t.Setenv("XDG_RUNTIME_DIR", "")
	sock := host.SocketPath(dir)
	if !strings.HasPrefix(sock, tmp) {
		t.Fatalf("the socket of %s is %s, not in the temporary directory %s", dir, sock, tmp)
	}
	// The squatter: the directory is uid 65534's, the socket answers 201.
	os.MkdirAll(filepath.Dir(sock), 0o777)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, p := range []string{filepath.Dir(sock), sock} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []string
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(b))
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{"run_id": "r-20260101T000000-000000", "pid": 1})
	}))
	r := runCLI(t, "run", task, "--dir", dir, "--detach")
	if r.code == ExitOK || !strings.Contains(r.stderr, filepath.Dir(sock)) || !strings.Contains(r.stderr, "belongs to uid 65534") {
		t.Errorf("run --detach beside a squatted socket directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) > 0 {
		t.Errorf("the squatter received:\n%s", strings.Join(got, "\n"))
	}
}
