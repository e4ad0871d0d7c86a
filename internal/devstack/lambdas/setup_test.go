package lambdas_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/testenv"
)

// The artifacts the tests run, built once per test binary into buildDir:
// the emulator (the go.mod tool, as `make rie` builds it) and bootstraps
// built as `make lambdas` builds them.
var (
	buildDir  string
	buildOnce sync.Map // what -> *built
)

type built struct {
	once sync.Once
	path string
	out  string
	err  error
}

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "stratus-lambdas-")
	if err != nil {
		panic(err)
	}
	buildDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

// build runs `go build` of pkg into buildDir/name once, with the Lambda
// build's environment and flags when lambda is set. A build that fails
// (no module proxy, no toolchain) skips the test naming what is missing.
func build(t *testing.T, name, pkg string, lambda bool) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		testenv.Missing(t, "linux", "the Lambda Runtime Interface Emulator runs on Linux only")
	}
	v, _ := buildOnce.LoadOrStore(name, &built{})
	b := v.(*built)
	b.once.Do(func() {
		b.path = filepath.Join(buildDir, name)
		args := []string{"build", "-o", b.path}
		if lambda {
			// As `make lambdas` builds them.
			args = append(args, "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = testenv.ModuleRoot(t)
		cmd.Env = os.Environ()
		if lambda {
			cmd.Env = append(cmd.Env, "GOOS=linux", "CGO_ENABLED=0")
		}
		out, err := cmd.CombinedOutput()
		b.out, b.err = string(out), err
	})
	if b.err != nil {
		testenv.Missing(t, pkg, "go build failed (the module proxy must be reachable once): "+b.err.Error()+"\n"+b.out)
	}
	return b.path
}

// rie is the emulator: bin/aws-lambda-rie when `make rie` left one, else
// built from the go.mod tool.
func rie(t *testing.T) string {
	t.Helper()
	if p := filepath.Join(testenv.ModuleRoot(t), "bin", "aws-lambda-rie"); isExec(p) {
		return p
	}
	return build(t, "aws-lambda-rie", "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie", false)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// fakeBootstrap is testdata/fake, a function whose payload says what it does.
func fakeBootstrap(t *testing.T) string {
	t.Helper()
	return build(t, "fake/bootstrap", "./internal/devstack/lambdas/testdata/fake", true)
}

// startFake starts the fake function with cfg's overrides.
func startFake(t *testing.T, cfg lambdas.Config) *lambdas.Function {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "fake"
	}
	cfg.Bootstrap = fakeBootstrap(t)
	cfg.RIE = rie(t)
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fn, err := lambdas.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Stop)
	return fn
}
