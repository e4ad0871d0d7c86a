// Package awstest starts the moto server that AWS-side tests run against
// (DESIGN.md § Testing stand-ins): one process on a loopback port serving
// DynamoDB, S3, SQS, Step Functions (really executing), ECS, IAM and Secrets
// Manager, started through moto_server.py, which works around moto 5.2.1's
// StartExecution bug. No test needs AWS credentials or the internet: the SDK
// gets static test credentials and the server's endpoint.
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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
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
	once   sync.Once
	shared *Server
	err0   error
)

// Moto returns the package-wide moto server, starting it on first use; it
// lives until the test binary exits. A test that needs moto fails (never
// skips) when python3 cannot import moto: CI's machine image has it, and
// .ci/run checks it first. Tests should use unique resource names
// (t.Name()-derived) since they share the server.
func Moto(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, err0 = start() })
	if err0 != nil {
		t.Fatalf("moto server: %v", err0)
	}
	return shared
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
