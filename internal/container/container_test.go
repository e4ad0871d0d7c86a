package container_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/testenv"
)

// testImage is the image the tests run: testdata/prog, a static binary,
// alone in an imported root file system (no registry, no base image). It is
// this test process's own (two runs may share an engine), removed at the
// end.
var testImage = fmt.Sprintf("localhost/stratus-container-test:%d", os.Getpid())

func TestMain(m *testing.M) {
	code := m.Run()
	if imported != nil {
		_ = imported.RemoveImage(context.Background(), testImage)
		imported.Close()
	}
	os.Exit(code)
}

// connect returns an engine, or skips the test naming what is missing
// (fails under STRATUS_REQUIRE_ALL=1).
func connect(t *testing.T) *container.Engine {
	t.Helper()
	ctx := context.Background()
	e, err := container.Connect(ctx)
	if errors.Is(err, container.ErrNoEngine) {
		testenv.Missing(t, "a container engine", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

var (
	imageOnce sync.Once
	imageErr  error
	imported  *container.Engine // the engine testImage was imported into
)

// setup connects and imports the test image once per test binary.
func setup(t *testing.T) *container.Engine {
	t.Helper()
	e := connect(t)
	goBin := testenv.MustHaveCommand(t, "go", "builds the test image's program")
	imageOnce.Do(func() {
		// An engine of its own, which TestMain closes after removing the image.
		ie, err := container.Connect(context.Background())
		if err == nil {
			err = importTestImage(ie, goBin)
			imported = ie
		}
		imageErr = err
	})
	if imageErr != nil {
		t.Fatal(imageErr)
	}
	return e
}

func importTestImage(e *container.Engine, goBin string) error {
	dir, err := os.MkdirTemp("", "stratus-container-test-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "prog")
	cmd := exec.Command(goBin, "build", "-o", bin, "./testdata/prog")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./testdata/prog: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"tmp/", "etc/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "prog", Mode: 0o755, Size: int64(len(b))}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return e.ImportImage(context.Background(), &rootfs, testImage)
}

// run runs prog to its end and returns the container's id, exit code and
// log.
func run(t *testing.T, e *container.Engine, spec container.RunSpec) (string, int, []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	spec.Image = testImage
	spec.Entrypoint = []string{"/prog"}
	if spec.NetworkMode == "" {
		spec.NetworkMode = "none"
	}
	id, err := e.Run(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Remove(context.Background(), id) })
	code, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := e.Logs(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return id, code, lines
}

// docs/runner-image.md § Running a runner image: the container gets
// exactly the environment given, runs as the user given, and its exit
// code is reported.
func TestRun_EnvUserAndExitCode(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, code, lines := run(t, e, container.RunSpec{
		Cmd:    []string{"env:GREETING", "env:STRATUS_SECRET", "uid", "stderr:to stderr", "exit:7"},
		Env:    []string{"GREETING=hello world"},
		User:   "10001:10001",
		Labels: map[string]string{"stratus.test": "1"},
	})
	if code != 7 {
		t.Errorf("exit code %d; want 7", code)
	}
	want := []string{"GREETING=hello world", "STRATUS_SECRET unset", "uid=10001", "to stderr"}
	if !slices.Equal(lines, want) {
		t.Errorf("log %q; want %q", lines, want)
	}
}

// A file bound read-only (a CA bundle, say) is readable and not writable
// in the container, and extra hosts reach its /etc/hosts.
func TestRun_MountsAndExtraHosts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, []byte("the bundle\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, code, lines := run(t, e, container.RunSpec{
		Cmd:         []string{"cat:/etc/stratus/ca.pem", "write:/etc/stratus/ca.pem", "cat:/etc/hosts"},
		Mounts:      []container.Mount{{Source: ca, Target: "/etc/stratus/ca.pem", ReadOnly: true}},
		ExtraHosts:  []string{"stratus-api.test:10.1.2.3"},
		NetworkMode: "bridge",
	})
	if code != 0 || len(lines) < 2 || lines[0] != "the bundle" || !strings.Contains(lines[1], "read-only") {
		t.Errorf("exit %d, log %q; want the bundle, then a read-only write error", code, lines)
	}
	if !slices.ContainsFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "10.1.2.3") && strings.Contains(l, "stratus-api.test")
	}) {
		t.Errorf("/etc/hosts has no line for stratus-api.test: %q", lines)
	}
}

// The last lines of a container's log are what a stopped task's reason
// quotes.
func TestLogs_LastLines(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id, code, all := run(t, e, container.RunSpec{Cmd: []string{"lines:50", "exit:0"}})
	if code != 0 || len(all) != 50 {
		t.Fatalf("exit code %d, %d lines; want 0, 50", code, len(all))
	}
	lines, err := e.Logs(context.Background(), id, 5)
	if want := []string{"line 46", "line 47", "line 48", "line 49", "line 50"}; err != nil || !slices.Equal(lines, want) {
		t.Errorf("Logs(5) = %q, %v; want %q", lines, err, want)
	}
}

// Stop sends SIGTERM first: a runner that handles it ends on its own
// within the grace period, with its own exit status.
func TestStop_TermThenExit(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := e.Run(ctx, container.RunSpec{Image: testImage, Entrypoint: []string{"/prog"}, Cmd: []string{"waitterm", "exit:3"}, NetworkMode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Remove(context.Background(), id) })
	waitForLine(t, e, id, "ready")
	if _, exited, err := e.ExitCode(ctx, id); err != nil || exited {
		t.Fatalf("ExitCode of a running container: exited %v, %v", exited, err)
	}
	start := time.Now()
	if err := e.Stop(ctx, id, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	code, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || time.Since(start) > 15*time.Second {
		t.Errorf("exit code %d after %s; want 3, well within the grace period", code, time.Since(start))
	}
	if c, exited, err := e.ExitCode(ctx, id); err != nil || !exited || c != 3 {
		t.Errorf("ExitCode = %d, %v, %v; want 3, true, nil", c, exited, err)
	}
	lines, err := e.Logs(ctx, id, 1)
	if err != nil || !slices.Equal(lines, []string{"terminated"}) {
		t.Errorf("last line %q, %v; want terminated", lines, err)
	}
	if err := e.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("stopping a stopped container: %v", err)
	}
}

// A runner that ignores SIGTERM is killed when the grace period ends
// (exit 137: SIGKILL).
func TestStop_KillAfterGrace(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := e.Run(ctx, container.RunSpec{Image: testImage, Entrypoint: []string{"/prog"}, Cmd: []string{"ignoreterm"}, NetworkMode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Remove(context.Background(), id) })
	waitForLine(t, e, id, "ready")
	if err := e.Stop(ctx, id, time.Second); err != nil {
		t.Fatal(err)
	}
	if code, err := e.Wait(ctx, id); err != nil || code != 137 {
		t.Errorf("exit code %d, %v; want 137 (killed)", code, err)
	}
}

// A missing image is an error naming `make image` (docs/runner-image.md
// § Building the images).
func TestRun_MissingImageNamesMakeImage(t *testing.T) {
	t.Parallel()
	e := connect(t)
	_, err := e.Run(context.Background(), container.RunSpec{Image: "localhost/stratus-no-such-image:never"})
	if !errors.Is(err, container.ErrNoImage) || !strings.Contains(err.Error(), "make image") {
		t.Errorf("Run of a missing image: %v; want ErrNoImage naming make image", err)
	}
}

// Remove of a removed container, and of one that never existed, is not an
// error; removing a running container kills it.
func TestRemove_RunningAndGone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	id, err := e.Run(ctx, container.RunSpec{Image: testImage, Entrypoint: []string{"/prog"}, Cmd: []string{"waitterm"}, NetworkMode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	waitForLine(t, e, id, "ready")
	for range 2 {
		if err := e.Remove(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.ExitCode(ctx, id); err == nil {
		t.Errorf("ExitCode of a removed container: no error")
	}
}

// waitForLine polls the container's log until a line equals want.
func waitForLine(t *testing.T, e *container.Engine, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lines, err := e.Logs(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(lines, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line %q in the container's log after 30 s: %q", want, lines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Connect with DOCKER_HOST naming nothing fails with ErrNoEngine, saying
// how to install an engine; it never falls back to another socket.
func TestConnect_DockerHostUnreachableIsNoEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	_, err := container.Connect(context.Background())
	if !errors.Is(err, container.ErrNoEngine) || !strings.Contains(err.Error(), "DOCKER_HOST=") || !strings.Contains(err.Error(), "apt-get install podman") {
		t.Errorf("Connect: %v; want ErrNoEngine naming DOCKER_HOST and how to install podman", err)
	}
}

// Without DOCKER_HOST, a socket or podman, Connect fails with ErrNoEngine
// naming the sockets it tried and how to install an engine.
func TestConnect_NothingFoundNamesHowToInstall(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	missing := filepath.Join(t.TempDir(), "docker.sock")
	noPodman := func(string) (string, error) { return "", exec.ErrNotFound }
	_, err := container.ConnectWith(context.Background(), []string{missing}, noPodman)
	if !errors.Is(err, container.ErrNoEngine) || !strings.Contains(err.Error(), missing+" (absent)") || !strings.Contains(err.Error(), container.InstallHint) {
		t.Errorf("Connect: %v; want ErrNoEngine naming %s and the install hint", err, missing)
	}
}

// With no socket answering but podman installed, Connect starts `podman
// system service` on a socket of its own, and Close stops it.
func TestConnect_StartsPodmanService(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	testenv.MustHaveCommand(t, "podman", "Connect starts podman system service when no socket answers")
	e, err := container.ConnectWith(context.Background(), nil, exec.LookPath)
	if err != nil {
		t.Fatal(err)
	}
	if !e.Started() || !strings.Contains(e.Host(), "stratus-podman-") {
		t.Errorf("Started %v, host %s; want a service of its own", e.Started(), e.Host())
	}
	name, err := e.Name(context.Background())
	if err != nil || !strings.Contains(strings.ToLower(name), "podman") {
		t.Errorf("Name = %q, %v; want podman's", name, err)
	}
	sock := strings.TrimPrefix(e.Host(), "unix://")
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); err == nil {
		t.Errorf("%s still there after Close", sock)
	}
}

// A build context is the directory less what .dockerignore names (at the
// root, as Docker matches it), plus the extra files given.
func TestTarDir_DockerignoreAndExtra(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		".dockerignore":       "# comment\nbin\n*.test\n/node_modules/\n!keep\n",
		"Dockerfile":          "FROM scratch\n",
		"bin/stratus":         "x",
		"node_modules/a/b.js": "x",
		"cmd/x.test":          "kept: the pattern is anchored at the root",
		"root.test":           "x",
		"cmd/main.go":         "package main",
		".image/stratus":      "replaced",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	extra := filepath.Join(t.TempDir(), "stratus")
	if err := os.WriteFile(extra, []byte("the binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	buf, err := container.TarDir(dir, map[string]string{".image/stratus": extra})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	tr := tar.NewReader(buf)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		if h.Typeflag == tar.TypeReg {
			var b bytes.Buffer
			b.ReadFrom(tr)
			got[h.Name] = b.String()
			if h.Name == ".image/stratus" && h.Mode&0o111 == 0 {
				t.Errorf(".image/stratus mode %o; want executable", h.Mode)
			}
		}
	}
	var names []string
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{".dockerignore", ".image/stratus", "Dockerfile", "cmd/main.go", "cmd/x.test"}
	if !slices.Equal(names, want) || got[".image/stratus"] != "the binary" {
		t.Errorf("files %q (.image/stratus %q); want %q with the extra file's content", names, got[".image/stratus"], want)
	}
}
