package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// stratusBin is a stratus binary built once for the tests: workers run as
// `<binary> runner` subprocesses, so the tests need a real one.
var stratusBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stratus-test-bin")
	if err != nil {
		panic(err)
	}
	stratusBin = filepath.Join(dir, "stratus")
	// As make build makes it: the slim stratus, and stratus-full beside
	// it, to which it hands --target aws, dev aws and ui.
	out, err := exec.Command("go", "build", "-tags", "slim", "-o", stratusBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build stratus: %v\n%s", err, out)
		os.Exit(2)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, FullBinary), ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build %s: %v\n%s", FullBinary, err, out)
		os.Exit(2)
	}
	// Beside it, as make build puts it: embedded runs use the small runner
	// (TestRun_WithoutTheSmallRunner runs stratus alone).
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "stratus-runner"), "../stratus-runner").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build stratus-runner: %v\n%s", err, out)
		os.Exit(2)
	}
	// And what `stratus dev aws` runs the stack's functions with, where
	// it looks by default (make lambdas rie puts them in bin/): each
	// function's bootstrap, as sam build makes it, and the Lambda Runtime
	// Interface Emulator (go.mod's tool).
	mains, _ := filepath.Glob("../../functions/*/main.go")
	for _, m := range mains {
		fn := filepath.Base(filepath.Dir(m))
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", filepath.Join(dir, "lambdas", fn, "bootstrap"), "../../functions/"+fn)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build the %s function: %v\n%s", fn, err, out)
			os.Exit(2)
		}
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "aws-lambda-rie"), "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build aws-lambda-rie: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// stratus runs the built binary.
func runCLI(t *testing.T, args ...string) result {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv is runCLI with env added to this process's environment.
func runCLIEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(stratusBin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run stratus %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

var endLine = regexp.MustCompile(`stratus: end\s+(\S+)\s+node=(\S+) attempt=(\d+) terminal=(\S+) verdict=(\S+) duration=(\S+) tokens=(\d+)/(\d+)`)

// steps returns "step_ref:verdict" for every end line of a run's progress.
func steps(stderr string) []string {
	var out []string
	for _, m := range endLine.FindAllStringSubmatch(stderr, -1) {
		out = append(out, m[1]+":"+m[5])
	}
	return out
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeTestFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// decodeRun reads `run --json` (or resume's) stdout: JSON lines, one
// object per event (README.md § Live progress), the last the run's end with
// its result.
func decodeRun(t testing.TB, stdout string) RunResult {
	t.Helper()
	evs := jsonLines(t, stdout)
	if len(evs) == 0 || evs[len(evs)-1]["event"] != "run_ended" {
		t.Fatalf("run --json output does not end with the run_ended line:\n%s", stdout)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var r RunResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("run --json output: %v\n%s", err, stdout)
	}
	return r
}

// jsonLines parses stdout as JSON lines, each an object with an "event".
func jsonLines(t testing.TB, stdout string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["event"] == nil {
			t.Fatalf("--json line %q is not an event object (%v); output:\n%s", l, err, stdout)
		}
		out = append(out, m)
	}
	return out
}

func join(s []string) string { return strings.Join(s, " ") }

// usePrimaryShellEngine adds a provider NAME that runs `sh engine.sh` in the
// work dir and makes it the primary of an installed DIR/.stratus/config.yaml.
func usePrimaryShellEngine(t *testing.T, dir, name string) {
	t.Helper()
	usePrimaryShellEngineEnv(t, dir, name, "")
}

// usePrimaryShellEngineEnv is usePrimaryShellEngine with the provider's
// env overlay (a YAML flow map such as "{SPY: /tmp/x}"; "" = none).
func usePrimaryShellEngineEnv(t testing.TB, dir, name, env string) {
	t.Helper()
	path := filepath.Join(dir, ".stratus/config.yaml")
	provider := "    " + name + ":\n      command: sh\n      args: [engine.sh]\n"
	if env != "" {
		provider += "      env: " + env + "\n"
	}
	cfg := strings.Replace(readFile(t, path), "  providers:\n", "  providers:\n"+provider, 1)
	writeTestFile(t, path, strings.Replace(cfg, "primary: echo", "primary: "+name, 1))
}

// useIsolation sets worker.isolation in dir's config.yaml
// (docs/contracts.md § The in-process twin).
func useIsolation(t testing.TB, dir, isolation string) {
	t.Helper()
	path := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, path)
	if !strings.Contains(cfg, "  isolation: in-process\n") {
		t.Fatalf("%s has no worker.isolation to set", path)
	}
	writeTestFile(t, path, strings.Replace(cfg, "  isolation: in-process\n", "  isolation: "+isolation+"\n", 1))
}

// tinyRun readies an installed work dir dir (made by install, or t.TempDir
// when dir is "") for a run of flow "tiny" (writeTwoStepFlow) whose
// primary engine is engine.sh holding engine, with the provider's env
// overlay env ("" = none); it returns dir and the task file, id taskID.
func tinyRun(t *testing.T, dir, engine, env, taskID string) (string, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), engine)
	usePrimaryShellEngineEnv(t, dir, "shx", env)
	writeTwoStepFlow(t, dir)
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: "+taskID+"\ntitle: "+taskID+"\ntask_type: tiny\n---\nbody\n")
	return dir, task
}

// writeTwoStepFlow installs flow "tiny" in DIR: agents first, then answer,
// then publish, with their role files.
func writeTwoStepFlow(t testing.TB, dir string) {
	t.Helper()
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny.yaml"), `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: workspace-write
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - { id: first, kind: agent, role_file: tiny/first.md }
    - { id: answer, kind: agent, role_file: tiny/answer.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: first, to: answer }
    - { from: answer, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/first.md"), "First for {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/tiny/answer.md"), "Answer for {task_id}.\n")
}

// slowEngine is an engine.sh that answers "ok", or, while the work dir
// holds "slow", writes its pid and its parent's to engine.pids and hangs.
const slowEngine = `read line
if [ -f slow ]; then
  sleep 300 &
  echo "$$ $PPID $!" > engine.pids
  wait
fi
printf '{"subrun_report": "ok"}\n'
`

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
