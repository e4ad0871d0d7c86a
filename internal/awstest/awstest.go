// Package awstest starts the moto server that AWS-side tests run against
// (DESIGN.md § Testing stand-ins): one process on a loopback port serving
// DynamoDB, S3, SQS, Step Functions (really executing), ECS, IAM and Secrets
// Manager, started through moto_server.py, which works around moto 5.2.1's
// StartExecution bug. No test needs AWS credentials or the internet: the SDK
// gets static test credentials and the server's endpoint. Without moto a
// test that needs it is skipped, naming it (internal/testenv).
package awstest

import (
	"context"
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/stratusflow/stratus/internal/testenv"
)

//go:embed moto_server.py
var launcher []byte

// Region is the region every test client uses.
const Region = "us-east-1"

// Server is a running moto server.
type Server struct {
	URL string // http://127.0.0.1:PORT
	cmd *exec.Cmd
}

var (
	once    sync.Once
	shared  *Server
	missing string // why moto cannot run here; "" when it can
	err0    error
)

// Moto returns the package-wide moto server, starting it on first use; it
// lives until the test binary exits. When python3 cannot import moto and
// flask_cors, the test is skipped naming what is missing (a failure under
// STRATUS_REQUIRE_ALL=1, as in CI: internal/testenv); a server that is
// installed but does not start fails the test. Tests should use unique
// resource names (t.Name()-derived) since they share the server.
func Moto(t testing.TB) *Server {
	t.Helper()
	once.Do(func() {
		if missing = probe(); missing == "" {
			shared, err0 = start()
		}
	})
	if missing != "" {
		testenv.Missing(t, "moto", missing)
	}
	if err0 != nil {
		t.Fatalf("moto server: %v", err0)
	}
	return shared
}

// probe says why the moto server cannot run here, or "" when python3
// imports what it needs.
func probe() string {
	if _, err := exec.LookPath("python3"); err != nil {
		return "python3 is not on PATH (the AWS-side tests run a moto 5.2.1 server: pip install 'moto[server]==5.2.1')"
	}
	out, err := exec.Command("python3", "-c", "import moto, flask_cors").CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Sprintf("python3 cannot import moto and flask_cors (%s); pip install 'moto[server]==5.2.1'", msg)
	}
	return ""
}

func start() (*Server, error) {
	dir, err := os.MkdirTemp("", "stratus-moto-")
	if err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "moto_server.py")
	if err := os.WriteFile(script, launcher, 0o644); err != nil {
		return nil, err
	}
	// moto binds port 0 itself and logs the port it got: choosing a free
	// port here and handing it over would race with every other test
	// binary doing the same (and could reach another process's server).
	cmd := exec.Command("python3", script, "-H", "127.0.0.1", "-p", "0")
	log, err := os.Create(filepath.Join(dir, "moto.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+Region)
	// The server dies with the test binary: Pdeathsig fires when the thread
	// that started it exits, so it is started from a goroutine that keeps its
	// OS thread locked for the life of the process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		select {}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start python3 %s: %w (moto 5.2.1 ships on the machine image)", script, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	running := regexp.MustCompile(`Running on http://127\.0\.0\.1:(\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(log.Name())
			return nil, fmt.Errorf("moto exited before it served; its log:\n%s", b)
		default:
		}
		b, _ := os.ReadFile(log.Name())
		if m := running.FindSubmatch(b); m != nil {
			s := &Server{URL: "http://127.0.0.1:" + string(m[1]), cmd: cmd}
			resp, err := http.Get(s.URL + "/moto-api/")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return s, nil
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	cmd.Process.Kill()
	b, _ := os.ReadFile(log.Name())
	return nil, fmt.Errorf("moto did not serve within 30 s; its log:\n%s", b)
}

// Config is an SDK config pointed at the server: static test credentials,
// Region, and the server as the base endpoint of every service.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(s.URL),
	}
}

// Reset clears every backend of the server (POST /moto-api/reset). Tests
// sharing the server should prefer unique names over resets.
func (s *Server) Reset(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/reset", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}
