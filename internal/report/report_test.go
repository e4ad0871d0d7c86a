package report

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/testenv"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func cost(c float64) *float64 { return &c }

func marked(gate string, fs ...findings.Finding) []findings.Finding {
	findings.Mark(fs, gate)
	return fs
}

// facts is a done run: planning, review#1 rework, fixing, review#2 accept
// with a low finding, publish pending.
func facts() *Facts {
	return &Facts{
		Run:          stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "Title", Flow: "implementation", WorkDir: "/w"},
		Status:       stratus.RunDone,
		SupervisorOn: true,
		CtxDir:       "workspace/tasks/t1/ctx",
		Families:     map[string]string{"claude": "claude", "codex": "codex"},
		Changes:      Changes{Git: true, Paths: []string{"M cmd/hello/main.go", "?? cmd/hello/main_test.go"}},
		Steps: []StepLine{
			{Step: stratus.Step{StepRef: "planning#1", Node: "planning", Kind: "agent", Status: "completed", Verdict: "done"},
				Attempts: []stratus.Attempt{{N: 1, Agent: "planning", PromptTokens: 10, CompletionTokens: 2, StartedAt: t0, EndedAt: t0.Add(time.Second), Resolved: stratus.Resolved{Provider: "codex"}}}},
			{Step: stratus.Step{StepRef: "review#1", Node: "review", Kind: "evaluator", Status: "completed", Verdict: "rework"},
				Reason: "1 of 2 findings at or above high", Gate: "high",
				Findings: marked("high", findings.Finding{Severity: "high", Path: "a.go", What: "Broken. It panics.", Fix: "guard it"},
					findings.Finding{Severity: "low", What: "nit"}),
				Attempts: []stratus.Attempt{{N: 1, Agent: "review", PromptTokens: 5, CompletionTokens: 1, CostUSD: cost(0.25), StartedAt: t0, EndedAt: t0.Add(2 * time.Second), Resolved: stratus.Resolved{Provider: "claude"}}}},
			{Step: stratus.Step{StepRef: "review#2", Node: "review", Kind: "evaluator", Status: "completed", Verdict: "accept"},
				Reason: "1 finding, none at or above high", Gate: "high",
				Findings: marked("high", findings.Finding{Severity: "low", Path: "a_test.go", What: "Test names are vague. They do not say which case they cover.", Fix: "Name each row after its case."}),
				Attempts: []stratus.Attempt{{N: 1, Agent: "review", PromptTokens: 5, CompletionTokens: 1, CostUSD: cost(0.5), StartedAt: t0, EndedAt: t0.Add(time.Second), Resolved: stratus.Resolved{Provider: "claude"}}}},
			{Step: stratus.Step{StepRef: "docs#1", Node: "docs", Kind: "agent", Status: "completed", Verdict: "skipped"}, Reason: "disabled by the task (nodes.docs.enabled: false)"},
			{Step: stratus.Step{StepRef: "publish#1", Node: "publish", Kind: "publish", Status: stratus.StepRunning}},
		},
	}
}

// prose is a synthesis long enough to reach disk.
const prose = "The run added a --name flag to the greeting command and a table test; the reviewer sent the first change back for the empty-name case, which the fix now rejects with exit status 2."

func withSynthesis(f *Facts, syn *Synthesis) *Facts {
	f.Synthesis = syn
	if syn != nil {
		f.Supervisor = append(f.Supervisor, StepLine{Step: stratus.Step{StepRef: "supervisor#1", Node: "_supervisor", Kind: Kind, Status: "completed", Verdict: "done"}, Job: JobFinalize,
			Attempts: []stratus.Attempt{{N: 1, Agent: "supervisor", PromptTokens: 7, CompletionTokens: 3, StartedAt: t0, EndedAt: t0.Add(time.Second), Resolved: stratus.Resolved{Provider: "codex"}}}})
	}
	return f
}

var keySet = []string{"what", "summary", "follow_ups", "task_usage", "supervisor_usage", "cost_not_accounted", "degraded"}

func decode(t *testing.T, js []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	for k := range m {
		if !slices.Contains(keySet, k) {
			t.Errorf("summary.json key %q is outside worc's key set %v", k, keySet)
		}
	}
	return m
}

// docs/contracts.md § The summary artifacts: "It is a pure function of
// state.db plus the task's artifacts — two renders of one run are
// byte-identical": two collects and renders of one recorded run give the same
// bytes.
func TestRender_ByteIdenticalReRender(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	run := stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "Title", Flow: "f", Status: stratus.RunRunning, WorkDir: dir, CreatedAt: t0}
	if err := st.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	add := func(node, kind, verdict, body string, n int, c *float64) {
		tid := "r1." + node + "." + string(rune('0'+n))
		s := stratus.Step{TID: tid, RunID: "r1", Node: node, Kind: kind, Visit: n, StepRef: node + "#" + string(rune('0'+n)), DedupKey: tid, Status: stratus.StepRunning, CreatedAt: t0}
		if _, _, err := st.CreateStep(ctx, s); err != nil {
			t.Fatal(err)
		}
		a := stratus.Attempt{TID: tid, N: 1, Agent: node, Status: stratus.AttemptRunning, StartedAt: t0, PromptTokens: 100, CompletionTokens: 9, CostUSD: c}
		if err := st.CreateAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
		a.Status, a.EndedAt = stratus.AttemptSubmitted, t0.Add(time.Duration(n)*time.Second)
		s.Status, s.Verdict, s.Value, s.EndedAt = stratus.StepCompleted, verdict, json.RawMessage(`{"outcome":"`+verdict+`"}`), a.EndedAt
		if _, err := st.CompleteAttempt(ctx, stratus.OutputEvent{TID: tid, Attempt: 1, Kind: stratus.OutputFinal, Body: []byte(body), OK: true, At: a.EndedAt}, a, s); err != nil {
			t.Fatal(err)
		}
	}
	add("implementation", "agent", "done", "did it", 1, nil)
	add("review", "evaluator", "accept", `{"findings":[{"severity":"low","what":"b. c.","fix":"d"},{"severity":"medium","what":"a","fix":"e"}]}`, 1, cost(0.1))
	fl, err := flow.Parse("f.yaml", []byte(`flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: none
  nodes:
    - { id: implementation, kind: agent, role_file: r/i.md }
    - { id: review, kind: evaluator, role: review, role_file: r/r.md }
    - { id: publish, kind: publish, policy: none }
  edges:
    - { from: implementation, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: implementation, outcome: rework, loop: fix }
  budgets: { fix: 2 }
`))
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Flow: fl, Config: config.Default()}
	render := func() ([]byte, []byte) {
		f, err := Collect(ctx, st, run, stratus.RunDone, env)
		if err != nil {
			t.Fatal(err)
		}
		return Render(f)
	}
	js1, md1 := render()
	js2, md2 := render()
	if !bytes.Equal(js1, js2) || !bytes.Equal(md1, md2) {
		t.Fatalf("two renders of one run differ:\n%s\n---\n%s", md1, md2)
	}
	m := decode(t, js1)
	if fus, _ := m["follow_ups"].([]any); len(fus) != 2 {
		t.Errorf("follow_ups = %v, want both accepted findings", m["follow_ups"])
	}
	for _, s := range []string{"## Changes\n", "## Steps\n", "## Checks\n", "## Gates\n", "## Technical debt\n", "## Follow-ups\n", "## Pipeline nodes skipped\n", "## Provider fallbacks\n", "## Run cost\n"} {
		if !bytes.Contains(md1, []byte(s)) {
			t.Errorf("summary.md lacks section %q:\n%s", s, md1)
		}
	}
}

// docs/contracts.md § The summary artifacts: one renderer writes the PR body
// in the four situations where no provider-authored synthesis reaches disk;
// with prose, summary.md is the H1, the prose, the follow-ups, then the three
// fact sections.
func TestRender_FourSituationsAndProse(t *testing.T) {
	t.Parallel()
	disabled := facts()
	disabled.SupervisorOn = false
	failed := withSynthesis(facts(), nil)
	failed.Status = stratus.RunFailed
	manual := withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose})
	manual.Status = stratus.RunManualActionRequired
	for _, tc := range []struct {
		name          string
		f             *Facts
		deterministic bool
		degraded      bool
		mdHas         []string
	}{
		{"1 supervisor disabled", disabled, true, false, nil},
		{"2 failed terminal", failed, true, false, []string{"**failed**"}},
		{"2 manual terminal ignores any prose", manual, true, false, []string{"**manual_action_required**"}},
		{"3 synthesis could not run", withSynthesis(facts(), &Synthesis{Outcome: SynthesisFailed, Reason: "engine exited 1"}), true, true, []string{"did not reach this report", "engine exited 1"}},
		{"4 collapsed prose", withSynthesis(facts(), &Synthesis{Outcome: SynthesisCollapsed, Discarded: "ok"}), true, true, []string{"below the 120-character floor"}},
		{"prose reached disk", withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose}), false, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js, md := Render(tc.f)
			m := decode(t, js)
			if got := m["degraded"] == true; got != tc.degraded {
				t.Errorf("degraded = %v, want %v", m["degraded"], tc.degraded)
			}
			_, isDet := m["summary"].(string)
			isDet = isDet && m["summary"] == ""
			if isDet != tc.deterministic || bytes.Contains(md, []byte("## Steps\n")) != tc.deterministic {
				t.Errorf("deterministic = %v (summary %q), want %v:\n%s", isDet, m["summary"], tc.deterministic, md)
			}
			if !bytes.HasPrefix(md, []byte("# Title\n\n")) {
				t.Errorf("summary.md does not open with the task title H1:\n%s", md)
			}
			for _, h := range FactHeadings {
				if bytes.Count(md, []byte(h+"\n")) != 1 {
					t.Errorf("fact section %q not exactly once:\n%s", h, md)
				}
			}
			for _, s := range tc.mdHas {
				if !bytes.Contains(md, []byte(s)) {
					t.Errorf("summary.md lacks %q:\n%s", s, md)
				}
			}
			if !tc.deterministic {
				want := "# Title\n\n" + prose + "\n\n## Follow-ups\n\n"
				if !bytes.HasPrefix(md, []byte(want)) {
					t.Errorf("summary.md = %q, want it to start %q", md, want)
				}
				if bytes.Contains(md, []byte("## Gates")) || m["summary"] != prose {
					t.Errorf("prose summary carries the deterministic sections or lost its prose:\n%s", md)
				}
			}
		})
	}
}

// docs/contracts.md § The summary artifacts, situation 4: prose below the
// 120-character floor never reaches summary.md, whatever record says it.
func TestRender_CollapseFloor120(t *testing.T) {
	t.Parallel()
	for _, n := range []int{119, 120} {
		text := strings.Repeat("x", n)
		js, _ := Render(withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: text}))
		m := decode(t, js)
		if reached := m["summary"] == text; reached != (n >= 120) {
			t.Errorf("%d characters: summary reached = %v", n, reached)
		}
	}
}

// docs/contracts.md § The summary artifacts: one key set everywhere;
// follow_ups, task_usage, supervisor_usage, cost_not_accounted and degraded
// present only when they apply.
func TestSummaryJSON_KeySetPerTerminal(t *testing.T) {
	t.Parallel()
	noCalls := facts()
	for i := range noCalls.Steps {
		noCalls.Steps[i].Attempts = nil
	}
	noCalls.Steps = noCalls.Steps[:1]
	priced := facts()
	for i := range priced.Steps {
		for j := range priced.Steps[i].Attempts {
			priced.Steps[i].Attempts[j].CostUSD = cost(1)
		}
	}
	failed := facts()
	failed.Status = stratus.RunFailed
	for _, tc := range []struct {
		name string
		f    *Facts
		want []string
	}{
		{"done with prose", withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose}), []string{"what", "summary", "follow_ups", "task_usage", "supervisor_usage", "cost_not_accounted"}},
		{"done, collapsed", withSynthesis(facts(), &Synthesis{Outcome: SynthesisCollapsed}), []string{"what", "summary", "follow_ups", "task_usage", "supervisor_usage", "cost_not_accounted", "degraded"}},
		{"done, layer off, every call priced", priced, []string{"what", "summary", "follow_ups", "task_usage"}},
		{"failed", failed, []string{"what", "summary", "follow_ups", "task_usage", "cost_not_accounted"}},
		{"no provider call", noCalls, []string{"what", "summary"}},
	} {
		js, _ := Render(tc.f)
		m := decode(t, js)
		var got []string
		for _, k := range keySet {
			if _, ok := m[k]; ok {
				got = append(got, k)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %v, want %v\n%s", tc.name, got, tc.want, js)
		}
	}
}

// docs/contracts.md § What observe.mode costs: task_usage is every node
// attempt plus the layer, per provider; supervisor_usage splits by job; each
// unpriced provider gets {provider, attempts, input_tokens}; the Run cost
// section says the same in words.
func TestRunCost_UsageSplitsAndNotAccounted(t *testing.T) {
	t.Parallel()
	f := withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose})
	js, md := Render(f)
	var s Summary
	if err := json.Unmarshal(js, &s); err != nil {
		t.Fatal(err)
	}
	if s.TaskUsage.Calls != 4 || s.TaskUsage.InputTokens != 27 || *s.TaskUsage.CostUSD != 0.75 {
		t.Errorf("task_usage = %+v", s.TaskUsage)
	}
	if c := s.TaskUsage.ByProvider["codex"]; c == nil || c.Calls != 2 || c.CostUSD != nil {
		t.Errorf("task_usage.by_provider.codex = %+v", c)
	}
	if s.SupervisorUsage.Calls != 1 || s.SupervisorUsage.ByJob[JobFinalize].Calls != 1 || s.SupervisorUsage.ByJob[JobObserve].Calls != 0 {
		t.Errorf("supervisor_usage = %+v", s.SupervisorUsage)
	}
	if want := []CostNotAccounted{{Provider: "codex", Attempts: 2, InputTokens: 17}}; !slices.Equal(s.CostNotAccounted, want) {
		t.Errorf("cost_not_accounted = %+v, want %+v", s.CostNotAccounted, want)
	}
	for _, w := range []string{"$0.75 over 4 provider calls", "Codex cost not accounted (2 attempts, 17 input tokens).", "includes the subagents", "The supervisor layer made 1 call"} {
		if !bytes.Contains(md, []byte(w)) {
			t.Errorf("Run cost lacks %q:\n%s", w, md)
		}
	}
}

// docs/contracts.md § The summary artifacts: only findings a gate
// let past (those of an accepting final pass), plus gating findings a
// non-blocking evaluator left open, worded as still open; title = first
// sentence of what, rationale = the rest, action_hint = fix.
func TestFollowUps_Composition(t *testing.T) {
	t.Parallel()
	eval := func(ref, node, verdict string, fs ...findings.Finding) StepLine {
		return StepLine{Step: stratus.Step{StepRef: ref, Node: node, Kind: "evaluator", Status: "completed", Verdict: verdict}, Gate: "high", Findings: marked("high", fs...)}
	}
	steps := []StepLine{
		eval("review#1", "review", "rework", findings.Finding{Severity: "low", What: "Superseded nit."}),
		eval("lint#1", "lint", "accept", findings.Finding{Severity: "high", Path: "x.go", What: "Still broken. The loop never ends.", Fix: "Bound it."},
			findings.Finding{Severity: "medium", What: "Name e.g. foo is unclear. Rename.", Fix: "Rename foo."}),
		eval("review#2", "review", "accept", findings.Finding{Severity: "low", What: "Docs lag", Fix: "Update README.md."}),
		eval("audit#1", "audit", "rework", findings.Finding{Severity: "low", What: "Not let past."}),
		{Step: stratus.Step{StepRef: "bad#1", Node: "bad", Kind: "evaluator", Status: "completed", Verdict: "accept"}, FindingsErr: "not {findings}"},
	}
	got := FollowUps(steps)
	want := []FollowUp{
		{Title: "Still open: Still broken.", Rationale: "The loop never ends.", ActionHint: "Bound it.", Severity: "high", Paths: []string{"x.go"}, Source: "lint#1", Status: FollowUpStillOpen},
		{Title: "Name e.g. foo is unclear.", Rationale: "Rename.", ActionHint: "Rename foo.", Severity: "medium", Source: "lint#1", Status: FollowUpAccepted},
		{Title: "Docs lag", ActionHint: "Update README.md.", Severity: "low", Source: "review#2", Status: FollowUpAccepted},
	}
	if len(got) != len(want) {
		t.Fatalf("follow-ups = %+v\nwant %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Title != w.Title || g.Rationale != w.Rationale || g.ActionHint != w.ActionHint || g.Severity != w.Severity || g.Source != w.Source || g.Status != w.Status || !slices.Equal(g.Paths, w.Paths) {
			t.Errorf("follow-up %d = %+v\nwant %+v", i, g, w)
		}
	}
	// The supervisor's own follow-ups join them, deduped by title.
	merged := mergeFollowUps(got, []FollowUp{{Title: "docs LAG"}, {Title: "Add a changelog entry"}})
	if len(merged) != 4 || merged[3].Title != "Add a changelog entry" || merged[3].Source != "supervisor" {
		t.Errorf("merged = %+v", merged)
	}
}

// docs/contracts.md § The summary artifacts: "a title that is the finding's
// first sentence, with the remainder in rationale (rather than a mid-word
// truncation)".
func TestFirstSentence_SplitsAtTheFirstSentenceEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, first, rest string }{
		{"One. Two. Three.", "One.", "Two. Three."},
		{"Is it? Yes!", "Is it?", "Yes!"},
		{"main.go leaks a handle. Close it.", "main.go leaks a handle.", "Close it."},
		{"Use e.g. a map. Or a set.", "Use e.g. a map.", "Or a set."},
		{"line one\nline two", "line one", "line two"},
		{"no end at all", "no end at all", ""},
		{"  padded.  ", "padded.", ""},
	} {
		if f, r := FirstSentence(tc.in); f != tc.first || r != tc.rest {
			t.Errorf("FirstSentence(%q) = %q, %q; want %q, %q", tc.in, f, r, tc.first, tc.rest)
		}
	}
}

// docs/contracts.md § The summary artifacts: the report names the changed
// paths (git status of the work dir), never the diff, and leaves out
// Stratus's own state; a work dir that is not a git work tree says so.
func TestChanges_GitStatusPathsNeverTheDiff(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	dir := t.TempDir()
	if c := changedPaths(context.Background(), dir, "workspace/tasks/t1/ctx"); c.Git || !strings.Contains(c.Note, "not a git repository") {
		t.Errorf("non-git work dir: %+v", c)
	}
	run := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@e"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	write := func(p, body string) {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.go", "package a\n")
	run("init", "-q")
	run("add", "a.go")
	run("commit", "-q", "-m", "base")
	write("a.go", "package a // secret diff line\n")
	write("b.go", "package b\n")
	write(".stratus/stratus.db", "x")
	write("workspace/tasks/t1/ctx/review.md", "x")
	c := changedPaths(context.Background(), dir, "workspace/tasks/t1/ctx")
	if !c.Git || !slices.Equal(c.Paths, []string{"?? b.go", "M a.go"}) {
		t.Errorf("changes = %+v", c)
	}
	f := facts()
	f.Changes = c
	_, md := Render(f)
	if !bytes.Contains(md, []byte("- `a.go` M\n")) || bytes.Contains(md, []byte("secret diff line")) {
		t.Errorf("Changes section:\n%s", md)
	}
}

// docs/contracts.md § What the supervisor layer does: a finalize turn that
// fails does not overwrite an existing non-empty summary with a blank one.
func TestWrite_NeverReplacesProseWithBlank(t *testing.T) {
	t.Parallel()
	sk := fs.New(t.TempDir())
	ctx := context.Background()
	keys, err := Write(ctx, sk, withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose}))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := sk.Get(ctx, keys[1])
	if _, err := Write(ctx, sk, withSynthesis(facts(), &Synthesis{Outcome: SynthesisFailed, Reason: "rerun failed"})); err != nil {
		t.Fatal(err)
	}
	after, _ := sk.Get(ctx, keys[1])
	if !bytes.Equal(before, after) || !bytes.Contains(after, []byte(prose)) {
		t.Errorf("summary.md was replaced:\n%s", after)
	}
	// A failed terminal's report is always written: it is not a blank one.
	failed := facts()
	failed.Status = stratus.RunFailed
	if _, err := Write(ctx, sk, failed); err != nil {
		t.Fatal(err)
	}
	if now, _ := sk.Get(ctx, keys[1]); !bytes.Contains(now, []byte("**failed**")) {
		t.Errorf("a failed run's report was not written:\n%s", now)
	}
}

// docs/contracts.md § What the supervisor layer does: the publish step, which
// writes the report, is shown pending
// while it does; skipped nodes and fallbacks close the report.
func TestRender_PublishPendingSkippedAndFallbacks(t *testing.T) {
	t.Parallel()
	f := facts()
	f.Degradations = []stratus.Degradation{{StepRef: "planning#1", Attempt: 1, Tool: "codex", Error: "rate limited", Fallback: "claude"}}
	_, md := Render(f)
	for _, s := range []string{
		"| publish#1 | pending (it writes this report) |",
		"## Pipeline nodes skipped\n\n- docs#1: disabled by the task (nodes.docs.enabled: false)\n",
		"## Provider fallbacks\n\n- planning#1 (attempt 1): codex failed (rate limited); fell back to claude\n",
		"- review#1: **rework** (1 of 2 findings at or above high) — high 1, low 1; 1 gating at high\n",
	} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("summary.md lacks %q:\n%s", s, md)
		}
	}
}

func TestOverhead_ReportToNextEngineStart(t *testing.T) {
	t.Parallel()
	f := facts()
	f.Steps[1].Attempts[0].EngineStartedAt = t0.Add(1500 * time.Millisecond)
	got := Overhead(f)
	if len(got) != 1 || got[0] != 500*time.Millisecond {
		t.Errorf("Overhead = %v", got)
	}
}

// Each checks visit keeps its own report: the Checks section links every
// visit to the copy in its step's log dir, never all of them to the ctx
// file, which holds only the latest visit.
func TestRender_ChecksVisitsLinkTheirOwnReports(t *testing.T) {
	t.Parallel()
	f := facts()
	final := []byte(`{"kind":"checks","checks":{"checker":"command_profile","runs":[]}}`)
	for i, verdict := range []string{"fail", "pass"} {
		f.Steps = append(f.Steps, StepLine{Step: stratus.Step{StepRef: "testing#" + string(rune('1'+i)), Node: "testing", Kind: flow.KindChecks, Visit: i + 1, Status: "completed", Verdict: verdict}, Final: final})
	}
	_, md := Render(f)
	for _, s := range []string{
		"- testing#1: **fail**; output `/w/.stratus/logs/t1/stages/testing/run-000001/checks.md`\n",
		"- testing#2: **pass**; output `/w/.stratus/logs/t1/stages/testing/run-000002/checks.md`\n",
	} {
		if !bytes.Contains(md, []byte(s)) {
			t.Errorf("summary.md lacks %q:\n%s", s, md)
		}
	}
	if bytes.Contains(md, []byte("ctx/testing.md")) {
		t.Errorf("a checks visit links the ctx file, which only the latest visit owns:\n%s", md)
	}
}

// docs/security.md § Text an engine wrote: summary.md — the prose, a
// step's reason, a finding, a changed path — keeps no raw control, bidi or
// invisible format character of what an engine wrote; its lines and tabs
// stay. summary.json keeps the text as written (JSON escapes it).
func TestRender_SummaryMDShowsEngineTextEscaped(t *testing.T) {
	t.Parallel()
	const forged = "bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	failed := withSynthesis(facts(), nil)
	failed.Status = stratus.RunFailed
	failed.Steps[1].Reason = forged // an evaluator's reason, under Gates
	failed.Changes.Paths = append(failed.Changes.Paths, "?? evil\u202etxt.exe")
	prosed := withSynthesis(facts(), &Synthesis{Outcome: SynthesisWritten, Prose: prose + "\n\n\t" + forged})
	for name, f := range map[string]*Facts{"deterministic": failed, "prose": prosed} {
		js, md := Render(f)
		for _, raw := range []string{"\x1b", "\x07", "\r", "\u202e"} {
			if bytes.Contains(md, []byte(raw)) {
				t.Errorf("%s: summary.md holds %q raw:\n%s", name, raw, md)
			}
		}
		if !bytes.Contains(md, []byte(`verdict=done\u202egnp.exe`)) {
			t.Errorf("%s: summary.md does not show the engine's text escaped:\n%s", name, md)
		}
		if name == "prose" && (!bytes.Contains(md, []byte("\n\n\tbad \\x1b]0;PWNED\\x07")) || decode(t, js)["summary"] != prose+"\n\n\t"+forged) {
			t.Errorf("prose: its lines and tab are not kept, or summary.json lost the text as written:\n%s\n%s", md, js)
		}
	}
}

// README § Workspaces: a run whose repository travelled names its branch,
// the operator's HEAD it is built on and how many step commits it holds,
// never the run's own commit hashes, which pull rewrites (the branch's
// differ).
func TestChanges_WorktreeRunNamesTheBranchNotTheRunsOwnCommits(t *testing.T) {
	t.Parallel()
	base, head, origin := strings.Repeat("b", 40), strings.Repeat("c", 40), strings.Repeat("0a", 20)
	f := facts()
	f.Changes = Changes{Branch: "stratus/t1", Base: base, Head: head, Origin: origin, Commits: 2}
	_, md := Render(f)
	for _, want := range []string{"the commits of branch `stratus/t1` on top of 0a0a0a0a0a0a, your HEAD at run start", "(2, each named by its step)", "`git log --stat 0a0a0a0a0a0a..stratus/t1`"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("Changes section lacks %q:\n%s", want, md)
		}
	}
	if bytes.Contains(md, []byte(base[:12])) || bytes.Contains(md, []byte(head[:12])) {
		t.Errorf("Changes section names the run's own commits:\n%s", md)
	}
	f.Changes.Head = base
	if _, md := Render(f); bytes.Contains(md, []byte(base[:12])) || !bytes.Contains(md, []byte("the run made no commit")) {
		t.Errorf("a run without commits:\n%s", md)
	}
}
