// Package awstest starts the moto server that AWS-side tests run against
// (docs/architecture.md § Testing stand-ins): one process on a loopback port
// serving DynamoDB, S3, SQS, Step Functions (really executing), ECS, IAM and
// Secrets Manager, started by internal/devstack/moto (its moto_server.py works
// around moto 5.2.1's bugs). No test needs AWS credentials or the internet: the
// SDK gets static test credentials and the server's endpoint. Without moto a
// test that needs it is skipped, naming it (internal/testenv).
package awstest

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"

	"github.com/stratusflow/stratus/internal/devstack/moto"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stratusflow/stratus/internal/testenv"
)

// Region is the region every test client uses.
const Region = moto.Region

// ECSClient is moto.ECSClient: the SDK HTTP client for ECS calls to
// moto that mends moto 5.2.1's task answers.
type ECSClient = moto.ECSClient

// Server is a running moto server.
type Server struct {
	URL string // http://127.0.0.1:PORT
}

var (
	once    sync.Once
	shared  *Server
	missing string // why moto cannot run here; "" when it can
	err0    error
)

// Moto returns the package-wide moto server, starting it on first use
// (devstack.StartMoto); it lives until the test binary exits. When python3
// cannot import moto and flask_cors, the test is skipped naming what is
// missing (a failure under STRATUS_REQUIRE_ALL=1, as in CI:
// internal/testenv); a server that is installed but does not start fails
// the test. Tests should use unique resource names (t.Name()-derived)
// since they share the server.
func Moto(t testing.TB) *Server {
	t.Helper()
	once.Do(func() {
		if missing = moto.Missing(); missing != "" {
			return
		}
		dir, err := os.MkdirTemp("", "stratus-moto-")
		if err != nil {
			err0 = err
			return
		}
		m, err := moto.Start(0, dir)
		if err != nil {
			err0 = err
			return
		}
		shared = &Server{URL: m.URL}
	})
	if missing != "" {
		testenv.Missing(t, "moto", missing)
	}
	if err0 != nil {
		t.Fatalf("moto server: %v", err0)
	}
	return shared
}

// Config is an SDK config pointed at the server: static test credentials,
// Region, and the server as the base endpoint of every service.
func (s *Server) Config() aws.Config { return moto.Config(s.URL) }

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
