// Package moto starts a moto server, the AWS stand-in of this project's tests
// and of stratus dev aws (docs/architecture.md § Testing stand-ins), through
// moto_server.py, which turns on real Step Functions execution and works around
// moto 5.2.1's bugs; and it mends moto's ECS answers for the Go SDK
// (ECSClient). It imports nothing of Stratus, so that every test of an AWS
// adapter can use it.
package moto

import (
	_ "embed"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

//go:embed moto_server.py
var launcher []byte

// Region is the region the stand-in answers in and every client here uses.
const Region = "us-east-1"

// Server is a moto server started by Start.
type Server struct {
	URL string // http://127.0.0.1:PORT
	Log string // its log file
	cmd *exec.Cmd
}

// Missing says why the moto server cannot run on this machine ("" when
// python3 imports moto and flask_cors): what to install.
func Missing() string {
	if _, err := exec.LookPath("python3"); err != nil {
		return "python3 is not on PATH (the AWS stand-in is a moto 5.2.1 server: pip install 'moto[server]==5.2.1')"
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

// Start starts moto's server on 127.0.0.1 through the project's
// launcher (moto_server.py: real Step Functions execution, the 5.2.1
// StartExecution fix, DynamoDB served one request at a time) on port (0:
// the one moto binds), logging to dir/moto.log. The server dies with this
// process (Pdeathsig, from a thread locked for the process's life) or with
// Stop. Errors: moto missing (Missing's words), or not serving within
// 30 s (its log).
func Start(port int, dir string) (*Server, error) {
	return StartOn("127.0.0.1", port, dir)
}

// StartOn is Start on the address host (an IPv4 address of this machine:
// the stand-in's containers reach moto at the host's address on their
// network, as a task reaches S3's endpoint).
func StartOn(host string, port int, dir string) (*Server, error) {
	if why := Missing(); why != "" {
		return nil, fmt.Errorf("cannot start the AWS stand-in: %s", why)
	}
	script := filepath.Join(dir, "moto_server.py")
	if err := os.WriteFile(script, launcher, 0o644); err != nil {
		return nil, err
	}
	// With port 0 moto binds a port itself and logs it: choosing a free
	// port here and handing it over would race with other processes.
	cmd := exec.Command("python3", script, "-H", host, "-p", fmt.Sprint(port))
	logPath := filepath.Join(dir, "moto.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_DEFAULT_REGION="+Region)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		select {}
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start python3 %s: %w", script, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	running := regexp.MustCompile(`Running on http://` + regexp.QuoteMeta(host) + `:(\d+)`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("moto exited before it served; its log:\n%s", b)
		default:
		}
		b, _ := os.ReadFile(logPath)
		if m := running.FindSubmatch(b); m != nil {
			s := &Server{URL: "http://" + host + ":" + string(m[1]), Log: logPath, cmd: cmd}
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
	b, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("moto did not serve within 30 s; its log:\n%s", b)
}

// Stop kills the server.
func (m *Server) Stop() {
	if m.cmd != nil && m.cmd.Process != nil {
		m.cmd.Process.Kill()
	}
}

// Config is an SDK config pointed at url (moto, or another stand-in):
// static test credentials, Region, url as every service's endpoint.
func Config(url string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
	}
}
