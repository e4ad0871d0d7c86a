package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// goModuleEngine is the engine of goChecksSetup: the implementation step
// mends the tiny module's function, so its test passes.
const goModuleEngine = `read line
case "$line" in
  *'"node":"implementation"'*) printf 'package tiny\n\n// Answer is the answer.\nfunc Answer() int { return 42 }\n' > tiny.go ;;
esac
printf '{"subrun_report":"done"}\n'
`

// goChecksSetup is a git work tree holding a tiny Go module whose test
// fails until the implementation step runs, the gated flow, and one
// command set: `go test ./...`.
func goChecksSetup(t *testing.T) string {
	t.Helper()
	testenv.MustHaveCommand(t, "go", "the check runs go test")
	testenv.MustHaveCommand(t, "git", "the run's repository travels as git bundles")
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	usePrimaryShellEngine(t, dir, "shx")
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, cfgPath)
	sets := "checks:\n  timeout_seconds: 600\n  command_sets:\n    go:\n      commands:\n        - { name: test, argv: [go, test, ./...] }\n"
	writeTestFile(t, cfgPath, strings.Replace(cfg, "checks:\n  timeout_seconds: 7200\n", sets, 1))
	writeTestFile(t, filepath.Join(dir, "engine.sh"), goModuleEngine)
	writeTestFile(t, filepath.Join(dir, "go.mod"), "module example.com/tiny\n\ngo 1.21\n")
	writeTestFile(t, filepath.Join(dir, "tiny.go"), "package tiny\n\n// Answer is the answer.\nfunc Answer() int { return 41 }\n")
	writeTestFile(t, filepath.Join(dir, "tiny_test.go"), "package tiny\n\nimport \"testing\"\n\nfunc TestAnswer(t *testing.T) {\n\tif got := Answer(); got != 42 {\n\t\tt.Fatalf(\"Answer() = %d, want 42\", got)\n\t}\n}\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated.yaml"), gatedFlow)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated/implementation.md"), "Implement {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated/fixing.md"), "Fix what {checks_path} reports.\n")
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-gocheck\ntitle: Go check\ntask_type: gated\n---\nbody\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", "engine.sh", "go.mod", "tiny.go", "tiny_test.go", "task.md"}, {"commit", "-q", "-m", "base"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// docs/runner-image.md § The environment of checks and tools: on the AWS
// stand-in a worker's environment is PATH alone (as an ECS task's may
// be), and a `go test` check still passes there: the check gets a HOME,
// TMPDIR and cache dir. `logs --target aws` then shows the check's step,
// its reason and what go test printed, from the stack's table and bucket;
// a check whose toolchain is missing parks the run, and says so there.
func TestDevAWS_GoTestCheckPasses(t *testing.T) {
	flags := devAWS(t, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	dir := goChecksSetup(t)
	r := runCLI(t, append([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json"}, flags...)...)
	if got := join(steps(r.stderr)); r.code != ExitOK || got != "implementation#1:done testing#1:pass publish#1:done" {
		t.Fatalf("run on dev aws: exit %d, steps %s\n%s", r.code, got, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	l := runCLI(t, append([]string{"logs", res.RunID, "testing"}, flags...)...)
	for _, want := range []string{"== testing#1", "1 check passed", "ok  \texample.com/tiny"} {
		if l.code != ExitOK || !strings.Contains(l.stdout, want) {
			t.Errorf("logs --target aws: exit %d, lacks %q:\n%s%s", l.code, want, l.stdout, l.stderr)
		}
	}
	l = runCLI(t, append([]string{"logs", res.RunID, "--json"}, flags...)...)
	var ls []LogsStep
	if l.code != ExitOK || json.Unmarshal([]byte(l.stdout), &ls) != nil || len(ls) < 2 {
		t.Fatalf("logs --json --target aws: exit %d\n%s%s", l.code, l.stdout, l.stderr)
	}
	for _, s := range ls {
		if s.StepRef == "testing#1" && !strings.HasSuffix(s.Log, "stages/testing/run-000001/checks.md") {
			t.Errorf("testing#1's log is %q, want its checks.md", s.Log)
		}
	}

	// docs/runner-image.md § When a check cannot run: a toolchain the
	// worker lacks (exit 127) parks the run with no fix round, and status
	// and logs --target aws say what is missing.
	dir = goChecksSetup(t)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "argv: [go, test, ./...]", "argv: [sh, -c, stratus-no-such-toolchain]", 1))
	r = runCLI(t, append([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json"}, flags...)...)
	if got := join(steps(r.stderr)); r.code != ExitManual || got != "implementation#1:done testing#1:incomplete" {
		t.Fatalf("run with a missing toolchain on dev aws: exit %d, steps %s\n%s", r.code, got, r.stderr)
	}
	res = decodeRun(t, r.stdout)
	want := "go/test (exit 127: a command it runs was not found (it said: sh: 1: stratus-no-such-toolchain: not found); install it in the runner image"
	for _, args := range [][]string{{"status", res.RunID}, {"logs", res.RunID, "testing"}} {
		out := runCLI(t, append(args, flags...)...)
		if !strings.Contains(out.stdout, want) {
			t.Errorf("%s --target aws does not say %q:\n%s%s", args[0], want, out.stdout, out.stderr)
		}
	}
}
