package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/worker"
)

// runWorkerCLI runs the built binary with stdin and exactly the STRATUS_*
// variables given (any inherited ones are dropped).
func runWorkerCLI(t *testing.T, env map[string]string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(stratusBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATUS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
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

// Bad flags, arguments, input and a missing worker environment are usage
// errors (exit 2) caught before any request: the API URL below is never
// called (nothing listens on port 1).
func TestWorker_BadInputExitsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	body := filepath.Join(dir, "body.md")
	writeTestFile(t, body, "body\n")
	env := map[string]string{"STRATUS_API_URL": "http://127.0.0.1:1", "STRATUS_HANDLE": "wh-abcdefgh"}
	for _, tc := range []struct {
		name  string
		env   map[string]string
		stdin string
		args  []string
		want  string
	}{
		{"no API URL", map[string]string{"STRATUS_HANDLE": "wh-abcdefgh"}, "", []string{"worker", "prompt"}, "STRATUS_API_URL is not set"},
		{"no handle", map[string]string{"STRATUS_API_URL": "http://127.0.0.1:1"}, "", []string{"worker", "submit", body}, "STRATUS_HANDLE is not set"},
		{"no env at all", nil, "", []string{"worker", "stats", "--steps", "1"}, "STRATUS_API_URL is not set"},
		{"submit --ok not a bool", env, "", []string{"worker", "submit", "--ok=maybe", body}, `invalid argument "maybe" for "--ok"`},
		{"submit without a body source", env, "", []string{"worker", "submit"}, "accepts 1 arg"},
		{"submit body file missing", env, "", []string{"worker", "submit", filepath.Join(dir, "nope.md")}, "no such file"},
		// docs/contracts.md § Output is a tool call: the sentinel names an
		// absolute path.
		{"submit relative @file: sentinel", env, "@file:body.md\n", []string{"worker", "submit", "-"}, `"body.md" is relative; the sentinel is @file:<absolute path>`},
		{"artifact relative @file: sentinel", env, "@file:./body.md", []string{"worker", "artifact", "--name", "b.md", "-"}, "is relative"},
		{"artifact without --name", env, "", []string{"worker", "artifact", body}, "--name is required"},
		{"result --ok not a bool", env, "", []string{"worker", "result", "--task-id", "t1", "--ok=maybe"}, `invalid argument "maybe" for "--ok"`},
		{"result without --ok", env, "", []string{"worker", "result", "--task-id", "t1"}, "--ok is required"},
		{"result without --task-id", env, "", []string{"worker", "result", "--ok=true"}, "--task-id is required (or set STRATUS_TASK_ID)"},
		{"result value not JSON", env, "", []string{"worker", "result", "--task-id", "t1", "--ok=true", "--value", "done"}, "--value is not valid JSON"},
		{"result value-file not JSON", env, "{oops", []string{"worker", "result", "--task-id", "t1", "--ok", "--value-file", "-"}, "--value-file - is not valid JSON"},
		{"result value and value-file", env, "", []string{"worker", "result", "--task-id", "t1", "--ok=false", "--value", "1", "--value-file", body}, "exclusive"},
		{"degradation without --fallback", env, "", []string{"worker", "degradation", "--tool", "grep", "--error", "timeout"}, "--fallback is required"},
		{"stats without a counter", env, "", []string{"worker", "stats"}, "give at least one of"},
		{"stats negative", env, "", []string{"worker", "stats", "--prompt-tokens", "-3"}, "--prompt-tokens is not a finite number of 0 or more"},
		{"stats NaN cost", env, "", []string{"worker", "stats", "--cost-usd", "NaN"}, "--cost-usd is not a finite number"},
		{"prompt takes no arguments", env, "", []string{"worker", "prompt", "extra"}, "unknown command"},
	} {
		r := runWorkerCLI(t, tc.env, tc.stdin, tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%s: exit %d stdout %q stderr %q; want exit %d and stderr containing %q", tc.name, r.code, r.stdout, r.stderr, ExitUsage, tc.want)
		}
	}
}

// The worker subcommands against a real embedded run
// (docs/contracts.md § Routes, § Output is a tool call): a
// flow of three agent nodes whose engine is a shell script calling `stratus
// worker ...` with the environment the runner exports.
//
//   - gather fetches its prompt (and the system bytes), stages a part from a
//     file and one through an @file: sentinel on stdin, is refused a part
//     named ../escape.md (exit 2: the client refuses the name before
//     sending it, with the server's message; docs/security.md § Part names)
//     and a foreign --task-id (exit 1, 403), records a degradation and
//     stats, and reports;
//   - final ends its attempt itself with `worker submit -` fed an @file:
//     sentinel naming a file outside the work dir (which only the worker
//     side may read: DESIGN.md § Limits), and prints no report;
//   - verdict ends its attempt with `worker result --ok=true --value JSON`.
//
// Each command's output and exit status land in files the test reads.
func TestWorker_SubcommandsInsideARealRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// Outside the work dir: the embedded server would refuse an @file: body
	// naming these, so a success proves the CLI resolved it worker-side.
	out := t.TempDir()
	writeTestFile(t, filepath.Join(out, "notes-src.md"), "# Notes\n\nraw, not wrapped\n")
	writeTestFile(t, filepath.Join(out, "big.md"), "a file-shaped part\n")
	writeTestFile(t, filepath.Join(out, "final.md"), "The final body, from a file.\n")
	writeTestFile(t, filepath.Join(dir, "engine.sh"), `read line
S='`+stratusBin+`'
O='`+out+`'
exec 2>>"$O/engine.err"
run() { name=$1; shift; "$@" >"$O/$name.out" 2>"$O/$name.err"; echo $? >"$O/$name.code"; }
case "$line" in
*'"node":"gather"'*)
  run prompt "$S" worker prompt
  run system "$S" worker prompt --system
  run foreign "$S" worker prompt --task-id not-mine
  run artifact "$S" worker artifact --name notes.md "$O/notes-src.md"
  echo "@file:$O/big.md" | run sentinel "$S" worker artifact --name big.md -
  run escape "$S" worker artifact --name ../escape.md "$O/notes-src.md"
  run degradation "$S" worker degradation --tool grep --error "timed out" --fallback "read the file" --note "from the test"
  run stats "$S" worker stats --steps 2 --prompt-tokens 11 --completion-tokens 5 --cost-usd 0.25
  printf '{"subrun_report": "staged"}\n' ;;
*'"node":"final"'*)
  echo "@file:$O/final.md" | run submit "$S" worker submit - ;;
*'"node":"verdict"'*)
  run result "$S" worker result --ok=true --value '{"answer": 42}' ;;
*'"node":"after"'*)
  # The run must not end (and stop the verdict engine) before that engine
  # has recorded its command's exit status.
  i=0; while [ ! -s "$O/result.code" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
  printf '{"subrun_report": "after"}\n' ;;
esac
`)
	usePrimaryShellEngine(t, dir, "shw")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/wk.yaml"), `flow:
  name: wk
  task_type: wk
  permission_ceiling: read-only
  output_policy: repository_document
  publishing: local_artifact
  nodes:
    - { id: gather, kind: agent, role_file: wk/step.md }
    - { id: final, kind: agent, role_file: wk/step.md }
    - { id: verdict, kind: agent, role_file: wk/step.md }
    - { id: after, kind: agent, role_file: wk/step.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: gather, to: final }
    - { from: final, to: verdict }
    - { from: verdict, to: after }
    - { from: after, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/wk/step.md"), "Work on {task_id}.\n")
	writeTestFile(t, filepath.Join(dir, "task.md"), "---\nid: t-wk\ntitle: Worker CLI\ntask_type: wk\n---\nbody\n")

	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
	engineErr, _ := os.ReadFile(filepath.Join(out, "engine.err"))
	if r.code != ExitOK {
		t.Fatalf("run exit %d\nstderr:\n%s\nengine stderr:\n%s", r.code, r.stderr, engineErr)
	}
	if got := join(steps(r.stderr)); got != "gather#1:done final#1:done verdict#1:done after#1:done publish#1:done" {
		t.Fatalf("steps: %s\n%s", got, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	ctxDir := filepath.Join(dir, "workspace/tasks/t-wk/ctx")

	for name, want := range map[string]int{"prompt": 0, "system": 0, "foreign": 1, "artifact": 0, "sentinel": 0, "escape": 2,
		"degradation": 0, "stats": 0, "submit": 0, "result": 0} {
		if got := strings.TrimSpace(readFile(t, filepath.Join(out, name+".code"))); got != string(rune('0'+want)) {
			t.Errorf("worker %s exit %s, want %d; stderr: %s", name, got, want, readFile(t, filepath.Join(out, name+".err")))
		}
	}

	// prompt prints the payload
	// (docs/contracts.md § Request and response bodies); --system the exact
	// bytes behind system_ref.
	var p worker.Payload
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, "prompt.out"))), &p); err != nil {
		t.Fatalf("worker prompt output: %v", err)
	}
	if p.StepRef != "gather#1" || p.Attempt != 1 || p.Context == nil || p.Context.CtxDir != ctxDir || p.SystemRef == nil || p.Engine == nil {
		t.Errorf("payload = %+v", p)
	}
	if sys := readFile(t, filepath.Join(out, "system.out")); sys != p.System || len(sys) != p.SystemRef.Bytes {
		t.Errorf("worker prompt --system printed %q; payload system %q (%d bytes)", sys, p.System, p.SystemRef.Bytes)
	}
	// API refusals: exit 1 with the server's message.
	if e := readFile(t, filepath.Join(out, "foreign.err")); !strings.Contains(e, "403 forbidden") || !strings.Contains(e, `"not-mine" is not the task this credential was issued for`) {
		t.Errorf("foreign --task-id stderr: %s", e)
	}
	if e := readFile(t, filepath.Join(out, "escape.err")); !strings.Contains(e, `name: part name "../escape.md" contains "/"`) {
		t.Errorf("../escape.md stderr: %s", e)
	}

	// docs/contracts.md § Files are the server's job: parts land raw in the
	// ctx dir; an @file: sentinel stands for its file's bytes.
	if got := readFile(t, filepath.Join(ctxDir, "notes.md")); got != "# Notes\n\nraw, not wrapped\n" {
		t.Errorf("notes.md = %q", got)
	}
	if got := readFile(t, filepath.Join(ctxDir, "big.md")); got != "a file-shaped part\n" {
		t.Errorf("big.md (staged through @file:) = %q", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "workspace/tasks/t-wk/escape.md")); err == nil {
		t.Error("../escape.md was written outside the ctx dir")
	}
	for node, want := range map[string]string{"gather": "staged", "final": "The final body, from a file.\n", "verdict": `{"answer":42}`} {
		_, body, err := projection.Decode([]byte(readFile(t, filepath.Join(ctxDir, node+".md"))))
		if err != nil || string(body) != want {
			t.Errorf("%s.md body = %q, %v; want %q", node, body, err, want)
		}
	}
	for name, want := range map[string]string{"submit": "final#1", "result": "verdict#1"} {
		var sv worker.StepValue
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(out, name+".out"))), &sv); err != nil || sv.StepRef != want || sv.Outcome != "done" {
			t.Errorf("worker %s printed %+v (%v), want step %s done", name, sv, err, want)
		}
	}

	// docs/contracts.md § Request and response bodies: recorded on the run
	// with the server's step_ref and attempt, never as output.
	st, err := sqlite.Open(filepath.Join(dir, ".stratus/stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds, err := st.ListDegradations(context.Background(), res.RunID)
	if err != nil || len(ds) != 1 {
		t.Fatalf("degradations = %+v, %v", ds, err)
	}
	if d := ds[0]; d.Tool != "grep" || d.Error != "timed out" || d.Fallback != "read the file" || d.Note != "from the test" || d.StepRef != "gather#1" || d.Attempt != 1 {
		t.Errorf("degradation = %+v", d)
	}
}
