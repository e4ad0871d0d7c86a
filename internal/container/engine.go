package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"
)

// ErrNoEngine is returned (wrapped, with what was tried) by [Connect] when no
// Docker Engine API answers and none can be started.
var ErrNoEngine = errors.New("no container engine")

// InstallHint says how to get a container engine; [Connect]'s ErrNoEngine
// errors end with it.
const InstallHint = "install podman (Debian/Ubuntu: apt-get install podman runc) or Docker (https://docs.docker.com/engine/install/), or set DOCKER_HOST to a Docker Engine API socket"

// Engine is a connection to a container engine's Docker Engine API. Its
// methods are safe for concurrent use. Close it when done: it stops the
// podman service [Connect] started, if any.
type Engine struct {
	cli  *client.Client
	host string

	mu      sync.Mutex
	service *exec.Cmd // podman system service started by Connect, or nil
	sockDir string    // the temporary directory of its socket
}

// SocketCandidates are the Docker Engine API sockets [Connect] tries, in
// order, when DOCKER_HOST is unset: Docker's, then podman's as root, then
// podman's as the user.
func SocketCandidates() []string {
	socks := []string{"/var/run/docker.sock", "/run/podman/podman.sock"}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		socks = append(socks, filepath.Join(d, "podman", "podman.sock"))
	}
	return socks
}

// pingTimeout bounds one ping of a candidate socket: a socket file left by
// a stopped engine refuses at once, a hung one must not stall Connect.
const pingTimeout = 5 * time.Second

// Connect finds a container engine: DOCKER_HOST when set (and then only
// it), else the first of [SocketCandidates] that answers a ping, else a
// `podman system service` it starts on a socket of its own when podman is
// installed (stopped by [Engine.Close]). With none it returns an error
// wrapping [ErrNoEngine] that names what was tried and [InstallHint].
func Connect(ctx context.Context) (*Engine, error) {
	return connect(ctx, SocketCandidates(), exec.LookPath)
}

// connect is Connect with the sockets to try and the PATH lookup given.
func connect(ctx context.Context, socks []string, lookPath func(string) (string, error)) (*Engine, error) {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		e, err := dial(ctx, client.FromEnv)
		if err != nil {
			return nil, fmt.Errorf("%w: DOCKER_HOST=%s does not answer: %v; unset it to use a local socket, or %s", ErrNoEngine, h, err, InstallHint)
		}
		return e, nil
	}
	var tried []string
	for _, sock := range socks {
		if fi, err := os.Stat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 {
			tried = append(tried, sock+" (absent)")
			continue
		}
		e, err := dial(ctx, client.WithHost("unix://"+sock))
		if err == nil {
			return e, nil
		}
		tried = append(tried, fmt.Sprintf("%s (%v)", sock, err))
	}
	podman, err := lookPath("podman")
	if err != nil {
		return nil, fmt.Errorf("%w: no Docker Engine API socket answers (DOCKER_HOST unset; %s) and podman is not on the PATH: %s", ErrNoEngine, strings.Join(tried, ", "), InstallHint)
	}
	e, err := startPodman(ctx, podman)
	if err != nil {
		return nil, fmt.Errorf("%w: no Docker Engine API socket answers (DOCKER_HOST unset; %s) and podman system service did not start: %v; %s", ErrNoEngine, strings.Join(tried, ", "), err, InstallHint)
	}
	return e, nil
}

// dial makes a client with opt and pings it.
func dial(ctx context.Context, opt client.Opt) (*Engine, error) {
	cli, err := client.NewClientWithOpts(opt, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, err
	}
	return &Engine{cli: cli, host: cli.DaemonHost()}, nil
}

// podmanStartTimeout bounds how long a started podman service may take to
// answer.
const podmanStartTimeout = 30 * time.Second

// startPodman runs `podman system service` on a socket in a fresh
// temporary directory (so two processes never share one) and waits until
// it answers.
func startPodman(ctx context.Context, podman string) (*Engine, error) {
	dir, err := os.MkdirTemp("", "stratus-podman-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "podman.sock")
	cmd := exec.Command(podman, "system", "service", "--time=0", "unix://"+sock)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4 << 10}
	cmd.SysProcAttr = serviceProcAttr()
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fail := func(err error) (*Engine, error) {
		_ = cmd.Process.Kill()
		<-exited
		os.RemoveAll(dir)
		if s := strings.TrimSpace(stderr.String()); s != "" {
			err = fmt.Errorf("%w (podman said: %s)", err, s)
		}
		return nil, err
	}
	deadline := time.Now().Add(podmanStartTimeout)
	for {
		select {
		case err := <-exited:
			exited <- err // for fail's receive
			return fail(fmt.Errorf("podman system service exited: %v", err))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := os.Stat(sock); err != nil {
			if time.Now().After(deadline) {
				return fail(fmt.Errorf("no socket at %s after %s", sock, podmanStartTimeout))
			}
			continue
		}
		e, err := dial(ctx, client.WithHost("unix://"+sock))
		if err == nil {
			// The goroutine above reaps it whenever it ends.
			e.service, e.sockDir = cmd, dir
			return e, nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("%s does not answer after %s: %v", sock, podmanStartTimeout, err))
		}
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
	n  int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Host is the engine's address, e.g. unix:///run/podman/podman.sock.
func (e *Engine) Host() string { return e.host }

// Started reports whether Connect started the podman service this Engine
// talks to (and Close stops).
func (e *Engine) Started() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.service != nil
}

// Name names the engine and its version as its API reports them, e.g.
// "Podman Engine 4.3.1" or "Docker Engine 28.2.2".
func (e *Engine) Name(ctx context.Context) (string, error) {
	v, err := e.cli.ServerVersion(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range v.Components {
		if strings.Contains(c.Name, "Podman") {
			return c.Name + " " + c.Version, nil // podman's Platform.Name is its OS
		}
	}
	if v.Platform.Name != "" {
		return v.Platform.Name + " " + v.Version, nil
	}
	return "engine " + v.Version, nil
}

// Close closes the connection and stops the podman service Connect
// started, if any.
func (e *Engine) Close() error {
	err := e.cli.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.service != nil {
		_ = e.service.Process.Signal(os.Interrupt)
		e.service = nil
		os.RemoveAll(e.sockDir)
	}
	return err
}

// Arch is the engine's machine architecture in Go's terms (amd64, arm64):
// what a binary copied into its images must be built for.
func (e *Engine) Arch(ctx context.Context) (string, error) {
	v, err := e.cli.ServerVersion(ctx)
	if err != nil {
		return "", fmt.Errorf("engine version: %w", err)
	}
	switch v.Arch {
	case "x86_64":
		return "amd64", nil
	case "aarch64":
		return "arm64", nil
	}
	return v.Arch, nil
}
