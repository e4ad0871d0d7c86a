package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/testenv"
)

// `stratus graph` prints an installed flow as Mermaid or dot;
// a bad format or an unknown flow is a usage error.
func TestGraph_MermaidDotAndErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	m := runCLI(t, "graph", "implementation", "--dir", dir)
	if m.code != 0 || !strings.HasPrefix(m.stdout, "flowchart TD\n") || !strings.Contains(m.stdout, `n_review -->|"rework · review_fix ≤3"| n_fixing`) {
		t.Errorf("graph (mermaid): exit %d\n%s%s", m.code, m.stdout, m.stderr)
	}
	d := runCLI(t, "graph", "implementation", "--dir", dir, "--format", "dot")
	if d.code != 0 || !strings.Contains(d.stdout, `"fixing" -> "review" [style=dashed, constraint=false]`) {
		t.Errorf("graph --format dot: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}
	for _, args := range [][]string{{"graph", "implementation", "--dir", dir, "--format", "png"}, {"graph", "nope", "--dir", dir}, {"graph"}} {
		if r := runCLI(t, args...); r.code != ExitUsage || r.stderr == "" {
			t.Errorf("%v: exit %d %q; want %d with a message", args, r.code, r.stderr, ExitUsage)
		}
	}
}

// `stratus --version` names the version, the commit and Go.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"--version", "-v"} {
		r := runCLI(t, flag)
		if r.code != 0 || !regexp.MustCompile(`^stratus \S+ \(commit \S+.*, go1\.\d+[^\n]*\)\n$`).MatchString(r.stdout) {
			t.Errorf("%s: exit %d %q", flag, r.code, r.stdout)
		}
	}
}

// `stratus logs RUN [NODE]` prints each worker step's
// runner log tail under a header naming the step, its attempt and
// terminal; an unknown run or node is a usage error (exit 2).
func TestLogs_TailPerStep(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t)
	r := runCLI(t, "logs", runID, "review", "--dir", dir, "--lines", "1")
	if r.code != 0 || strings.Count(r.stdout, "== review#") != 2 || !strings.Contains(r.stdout, "== review#1 attempt 1 Captured — 1 of 2 findings at or above high\n") ||
		!strings.Contains(r.stdout, "1 line before (.stratus/logs/demo-greeting/stages/review/run-000001/runner.log)") || !strings.Contains(r.stdout, "runner: the engine ended ") || !strings.Contains(r.stdout, " terminal=Captured ") {
		t.Errorf("logs RUN review: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The file itself holds the runner's JSON records (README.md § Logs),
	// each naming its run, step and attempt, as on ECS; logs renders them.
	raw := readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/stages/review/run-000001/runner.log"))
	if !strings.Contains(raw, `"component":"runner","run_id":"`+runID+`","step_ref":"review#1","attempt":1`) || strings.Contains(r.stdout, `{"time"`) {
		t.Errorf("runner.log is not the runner's records, or logs did not render them:\n%s", raw)
	}
	if all := runCLI(t, "logs", runID, "--dir", dir); all.code != 0 || !strings.Contains(all.stdout, "== planning#1") || !strings.Contains(all.stdout, "== supervisor#2 (finalize of publish#1)") {
		t.Errorf("logs RUN: exit %d\n%s", all.code, all.stdout)
	}
	for _, args := range [][]string{{"logs", "nope", "--dir", dir}, {"logs", runID, "nosuch", "--dir", dir}, {"logs", runID, "--lines", "0", "--dir", dir}} {
		if r := runCLI(t, args...); r.code != ExitUsage {
			t.Errorf("%v: exit %d %s; want %d", args, r.code, r.stderr, ExitUsage)
		}
	}
	// A node with no log names the nodes that have one.
	// (In the order their steps began: the supervisor's turn on review#1
	// and fixing#1 begin at once, so either may come first.)
	nosuch := runCLI(t, "logs", runID, "nosuch", "--dir", dir)
	_, nodes, ok := strings.Cut(strings.TrimSpace(nosuch.stderr), `has no step of node "nosuch" that ran a worker; nodes with logs: `)
	got := strings.Split(nodes, ", ")
	slices.Sort(got)
	if want := []string{"_supervisor", "fixing", "implementation", "planning", "review"}; !ok || !slices.Equal(got, want) {
		t.Errorf("logs RUN nosuch: %s; want the nodes %v", nosuch.stderr, want)
	}
}

// README § Exit status: logs has --json like the other inspection commands
// (status, runs): one indented JSON array, one object per step that ran a
// worker, with its step_ref, attempt, terminal and reason and its log's
// tail as lines, each its text and, for a runner record, the record
// decoded. Before, `logs RUN --json` failed with "unknown flag: --json".
func TestLogs_JSONOneObjectPerStep(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t)
	r := runCLI(t, "logs", runID, "review", "--dir", dir, "--lines", "1", "--json")
	if r.code != 0 {
		t.Fatalf("logs --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var steps []LogsStep
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&steps); err != nil {
		t.Fatalf("stdout is not a JSON array of steps: %v\n%s", err, r.stdout)
	}
	if len(steps) != 2 {
		t.Fatalf("logs review --json lists %d steps, want review#1 and review#2:\n%s", len(steps), r.stdout)
	}
	// Every key the help lists is there, lines_before even when 0.
	if all := runCLI(t, "logs", runID, "review", "--dir", dir, "--json"); strings.Count(all.stdout, `"lines_before":`) != 2 {
		t.Errorf("logs --json without --lines: want lines_before in each step's object:\n%s", all.stdout)
	}
	first := steps[0]
	if first.StepRef != "review#1" || first.Node != "review" || first.Attempt != 1 || first.Terminal != "Captured" ||
		first.Reason != "1 of 2 findings at or above high" || first.LogError != "" || first.LinesBefore != 1 ||
		first.Log != ".stratus/logs/demo-greeting/stages/review/run-000001/runner.log" {
		t.Errorf("review#1 = %+v", first)
	}
	if len(first.Lines) != 1 {
		t.Fatalf("review#1 has %d lines, want the 1 of --lines 1", len(first.Lines))
	}
	var rec struct {
		Msg      string `json:"msg"`
		StepRef  string `json:"step_ref"`
		Terminal string `json:"terminal"`
	}
	var compact bytes.Buffer
	if l := first.Lines[0]; json.Unmarshal(l.Record, &rec) != nil || rec.StepRef != "review#1" || rec.Terminal != "Captured" ||
		json.Compact(&compact, l.Record) != nil || l.Text != compact.String() {
		t.Errorf("review#1's last line = %+v; want the runner's record, as text and decoded", l)
	}
	// The text form is unchanged by the flag's arrival.
	if plain := runCLI(t, "logs", runID, "review", "--dir", dir, "--lines", "1"); plain.code != 0 || !strings.HasPrefix(plain.stdout, "== review#1 attempt 1 Captured — 1 of 2 findings at or above high\n") {
		t.Errorf("logs without --json: exit %d\n%s", plain.code, plain.stdout)
	}
}

// Install counts flows, not files; a second install says what it kept.
func TestInstall_SaysFlowsAndFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, "install", "--dir", dir)
	if r.code != 0 || !regexp.MustCompile(`config\.yaml \(primary echo\), 2 flows \(implementation, merge; \d+ files\) under flows/\n`).MatchString(r.stdout) {
		t.Errorf("install: exit %d %q", r.code, r.stdout)
	}
	again := runCLI(t, "install", "--dir", dir)
	if again.code != 0 || !strings.Contains(again.stdout, "the flows under flows/ kept as they are (--force replaces them)") {
		t.Errorf("second install: exit %d %q", again.code, again.stdout)
	}
	// README § Workspaces: which files of .stratus/ to commit, and the
	// .gitignore that keeps the rest out, written once.
	for _, out := range []string{r.stdout, again.stdout} {
		if !strings.Contains(out, "commit with your project: .stratus/.gitignore, .stratus/config.yaml, .stratus/flows/;") {
			t.Errorf("install does not say what to commit: %q", out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, ".stratus", ".gitignore")); err != nil || strings.Count(string(b), "\n/*\n") != 1 {
		t.Errorf(".stratus/.gitignore after two installs: %v\n%s", err, b)
	}
}

// A rerun of a task moves the earlier run's logs into attempt-N/: logs,
// status and the viewer read each run's own, never the latest run's under the earlier run's name.
func TestRerun_EachRunReadsItsOwnLogs(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", `read line
n=$(cat pass 2>/dev/null || echo 0); n=$((n+1)); echo $n > pass
echo "engine pass $n" >&2
printf '{"subrun_report": "ok"}\n'
`, "", "t-rerun")
	var ids []string
	for range 2 {
		r := runCLI(t, "run", task, "--dir", dir, "--json")
		if r.code != 0 {
			t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
		}
		ids = append(ids, decodeRun(t, r.stdout).RunID)
	}
	v := serveUI(t, dir)
	pass := regexp.MustCompile(`engine pass \d+\n`)
	var seen []string
	for i, id := range ids {
		r := runCLI(t, "logs", id, "first", "--dir", dir)
		own := pass.FindAllString(r.stdout, -1)
		if r.code != 0 || len(own) != 1 || (i == 0 && own[0] != "engine pass 1\n") || (i > 0 && own[0] == seen[0]) {
			t.Fatalf("logs %s (run %d): exit %d, want its own engine pass (earlier runs': %q):\n%s%s", id, i+1, r.code, seen, r.stdout, r.stderr)
		}
		seen = append(seen, own[0])
		st := runCLI(t, "status", id, "--dir", dir, "--json")
		var res StatusResult
		if err := json.Unmarshal([]byte(st.stdout), &res); err != nil || len(res.Summary) == 0 {
			t.Fatalf("status %s: %v %s", id, err, st.stdout)
		}
		if md := readFile(t, res.Summary[len(res.Summary)-1]); !strings.Contains(md, "run `"+id+"`") {
			t.Errorf("status %s names the summary %s, which is another run's", id, res.Summary[len(res.Summary)-1])
		}
		if code, body, _ := v.get(t, "/runs/"+id); code != 200 || !strings.Contains(body, "run <code>"+id+"</code>") {
			t.Errorf("the viewer's page of %s: %d, its summary is not its own", id, code)
		}
		if code, body, _ := v.get(t, "/runs/"+id+"/steps/first/1"); code != 200 || !strings.Contains(body, own[0]) {
			t.Errorf("the viewer's first#1 of %s: %d, want its own runner log %q", id, code, own[0])
		}
	}
}

// logs prints an engine's control bytes escaped: a
// colour code or a carriage return in a runner log does not reach the
// terminal as itself; a tab stays (docs/security.md § Text an engine
// wrote).
func TestLogs_ControlBytesEscaped(t *testing.T) {
	if got, want := safetext.Block(logging.Render("\x1b[31mred\x1b[0m\rover\tok\u0085é\u202e")), `\x1b[31mred\x1b[0m\rover`+"\tok"+`\u0085é\u202e`; got != want {
		t.Errorf("a log line shows as %q, want %q", got, want)
	}
}

// An unknown command lists every command there is (the list was written by
// hand and had lost ui, graph, logs, pull).
func TestUnknownCommand_ListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := runCLI(t, "version")
	for _, want := range []string{"stratus --version", "ui", "graph", "logs", "pull", "contract", "approve"} {
		if r.code != ExitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("stratus version: exit %d %q; want %d and %q", r.code, r.stderr, ExitUsage, want)
		}
	}
	if r := runCLI(t, "statsu"); !strings.Contains(r.stderr, "did you mean status?") {
		t.Errorf("stratus statsu: %q", r.stderr)
	}
}

// Resuming an older run of a task after a later run takes its logs back: the
// later run's summary, ctx files and runner logs stay its own, and the resumed run writes into its own.
func TestResume_OlderRunTakesItsLogsBack(t *testing.T) {
	t.Parallel()
	dir, task, id1 := failedRun(t, "t-reclaim")
	second := runCLI(t, "run", task, "--dir", dir, "--json")
	if second.code != 0 {
		t.Fatalf("second run: exit %d\n%s", second.code, second.stderr)
	}
	id2 := decodeRun(t, second.stdout).RunID
	before := runCLI(t, "logs", id2, "first", "--dir", dir).stdout
	if r := runCLI(t, "resume", id1, "--dir", dir); r.code != 0 {
		t.Fatalf("resume %s: exit %d\n%s", id1, r.code, r.stderr)
	}
	if after := runCLI(t, "logs", id2, "first", "--dir", dir).stdout; after != before {
		t.Errorf("resuming %s changed %s's logs:\nbefore\n%s\nafter\n%s", id1, id2, before, after)
	}
	for _, id := range []string{id1, id2} {
		var res StatusResult
		st := runCLI(t, "status", id, "--dir", dir, "--json")
		if err := json.Unmarshal([]byte(st.stdout), &res); err != nil || len(res.Summary) == 0 {
			t.Fatalf("status %s: %v %s", id, err, st.stdout)
		}
		if md := readFile(t, res.Summary[len(res.Summary)-1]); !strings.Contains(md, "run `"+id+"`") {
			t.Errorf("status %s names %s, another run's summary", id, res.Summary[len(res.Summary)-1])
		}
	}
	if r := runCLI(t, "logs", id1, "first", "--dir", dir); r.code != 0 || !strings.Contains(r.stdout, "engine pass") {
		t.Errorf("logs %s after its resume: exit %d\n%s%s", id1, r.code, r.stdout, r.stderr)
	}
}

// Embedded runs whose workers are processes (worker.isolation:
// process) use the small stratus-runner beside stratus (TestMain builds it
// there, as make build does); stratus alone still runs its runs, with
// `stratus runner` for a worker process and `stratus runner reap` as the
// in-process worker's reaper (docs/contracts.md § The in-process twin).
func TestRun_WithoutTheSmallRunner(t *testing.T) {
	t.Parallel()
	dir := installExample(t, testenv.ModuleRoot(t))
	useIsolation(t, dir, "process")
	if r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	if log := readFile(t, filepath.Join(dir, ".stratus/logs/demo-greeting/stages/review/run-000001/runner.log")); !strings.Contains(log, `"binary":"stratus-runner"`) {
		t.Errorf("the demo's worker was not the small runner:\n%s", log)
	}
	alone := filepath.Join(t.TempDir(), "stratus")
	if err := os.Link(stratusBin, alone); err != nil {
		writeTestFile(t, alone, readFile(t, stratusBin))
	}
	os.Chmod(alone, 0o755)
	for _, isolation := range []string{"process", "in-process"} {
		dir2, task := tinyRun(t, "", "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n", "", "t-alone")
		useIsolation(t, dir2, isolation)
		cmd := exec.Command(alone, "run", task, "--dir", dir2)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("stratus alone, %s: %v\n%s", isolation, err, out)
		} else if strings.Contains(string(out), "workers are processes") { // the reaper did not start
			t.Errorf("stratus alone, %s, warned:\n%s", isolation, out)
		}
		if log := readFile(t, filepath.Join(dir2, ".stratus/logs/t-alone/stages/first/run-000001/runner.log")); !strings.Contains(log, `"binary":"stratus"`) {
			t.Errorf("stratus alone, %s: the worker was not stratus:\n%s", isolation, log)
		}
	}
}

// failedRun readies a tiny run (tinyRun) whose engine numbers its passes
// on stderr ("engine pass N") and fails while DIR/fail exists, runs it
// once — it fails — and removes DIR/fail, so that a resume or a rerun
// goes through. It returns the work dir, the task file and the run's id.
func failedRun(t *testing.T, taskID string) (dir, task, runID string) {
	t.Helper()
	dir = t.TempDir()
	_, task = tinyRun(t, dir, `read line
n=$(cat `+dir+`/pass 2>/dev/null || echo 0); n=$((n+1)); echo $n > `+dir+`/pass
echo "engine pass $n" >&2
if [ -f `+dir+`/fail ]; then printf '{"event":"turn_failed","error":"told to fail"}\n'; exit 1; fi
printf '{"subrun_report": "ok"}\n'
`, "", taskID)
	writeTestFile(t, filepath.Join(dir, "fail"), "")
	first := runCLI(t, "run", task, "--dir", dir, "--json")
	if first.code == 0 {
		t.Fatalf("the first run should fail:\n%s", first.stderr)
	}
	os.Remove(filepath.Join(dir, "fail"))
	return dir, task, decodeRun(t, first.stdout).RunID
}

// graph --json gives a program the graph: each node with its kind, each
// edge with its outcome (and loop, budget, back), each loop once with its
// budget; --json with --format is refused.
func TestGraph_JSON(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := Main([]string{"graph", "implementation", "--builtin", "--json"}, IO{Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var g GraphResult
	if err := json.Unmarshal(out.Bytes(), &g); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if g.Flow != "implementation" || len(g.Nodes) == 0 || g.Nodes[0] != (GraphNode{ID: "planning", Kind: "agent"}) {
		t.Errorf("flow %q, nodes %+v", g.Flow, g.Nodes)
	}
	var rework *GraphEdge
	back := false
	for i, e := range g.Edges {
		if e.From == "review" && e.Outcome == "rework" {
			rework = &g.Edges[i]
		}
		back = back || e.Back
	}
	if rework == nil || rework.Loop != "review_fix" || rework.Budget < 1 || !back {
		t.Errorf("edges %+v: want review's rework edge in loop review_fix with its budget, and a back edge", g.Edges)
	}
	if len(g.Loops) != 1 || g.Loops[0].Name != "review_fix" || g.Loops[0].Budget != rework.Budget {
		t.Errorf("loops %+v", g.Loops)
	}
	errb.Reset()
	if code := Main([]string{"graph", "implementation", "--builtin", "--json", "--format", "dot"}, IO{Out: &out, Err: &errb}); code != ExitUsage {
		t.Errorf("--json --format dot: exit %d %s", code, errb.String())
	}
}
