package vars_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/prompt"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/vars"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A question gate's answer is a prompt variable of the nodes after it
// (docs/prompt-variables.md § Node outputs): {<hitl node>_path} is the
// file Human wrote the reply to, and empty until the gate was answered.
func TestTemplateVars_HITLAnswerIsAPathForLaterNodes(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: ask, kind: hitl, signal: question, question: "Which database?" }
    - { id: build, kind: agent, role_file: f/build.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: ask, to: build }
    - { from: build, to: publish }
`, Roles: map[string]string{"f/build.md": "{?ask_path}The human answered in {ask_path}.{/ask_path}Build it."}})
	if v := r.Vars(t, "build"); v["ask_path"] != "" {
		t.Errorf("{ask_path} = %q before the gate was answered, want empty", v["ask_path"])
	}
	r.Dispatch(t, "ask") // the gate waits
	if _, err := r.Svc.Human(context.Background(), r.Run.ID, "ask", core.Reply{Decision: core.DecisionAnswer, Text: "Postgres 16."}); err != nil {
		t.Fatal(err)
	}
	r.Dispatch(t, "build")
	want := "The human answered in " + r.Ctx("ask.md") + ".Build it."
	if got := r.LastPrompt(t); got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
	if !strings.Contains(workertest.Read(t, r.Ctx("ask.md")), "Postgres 16.") {
		t.Error("ask.md lacks the answer")
	}
}

// completeStep records a completed step of node no worker ran (checks and
// tool steps are dispatched elsewhere).
func completeStep(t *testing.T, r *workertest.Rig, node, verdict string) {
	t.Helper()
	ctx := context.Background()
	visits, _ := r.Svc.Store.CountVisits(ctx, r.Run.ID, node)
	v, _ := json.Marshal(core.StepValue{StepRef: fmt.Sprintf("%s#%d", node, visits+1), Node: node, Outcome: verdict})
	st := stratus.Step{TID: fmt.Sprintf("r1.%s.%d", node, visits+1), RunID: r.Run.ID, Node: node, Kind: r.Env.Flow.Node(node).Kind,
		Visit: visits + 1, StepRef: fmt.Sprintf("%s#%d", node, visits+1), DedupKey: fmt.Sprintf("%s-%d", node, visits+1),
		TaskToken: "x", Status: stratus.StepCompleted, Verdict: verdict, Value: v}
	if _, _, err := r.Svc.Store.CreateStep(ctx, st); err != nil {
		t.Fatal(err)
	}
}

// docs/contracts.md § Template variables: the core set is metadata and paths;
// a variable with no value for the current node is empty.
func TestTemplateVars_CoreSetIsPathsAndMetadata(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow})
	v := r.Vars(t, "planning")
	want := map[string]string{
		"task_id": "t1", "stage": "planning", "repo_path": r.Dir, "repo": r.Dir,
		"task_path": filepath.Join(r.Dir, "task.md"), "report_dir": r.Ctx(""),
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("{%s} = %q, want %q", k, v[k], w)
		}
	}
	for _, k := range []string{"plan_path", "diff_path", "change_overview_path", "diff_base", "checks_path", "review_path",
		"subtask_order", "subtask_count", "subtask_spec_path", "predecessor_context", "memory_path", "conflicts_path", "summary_body_path"} {
		if v[k] != "" {
			t.Errorf("{%s} = %q before anything ran, want empty", k, v[k])
		}
	}
	for k := range v {
		if !contains(prompt.Allowlist(core.OutputNodes(r.Env.Flow)), k) {
			t.Errorf("variable %q is outside the flow's allowlist", k)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// docs/prompt-variables.md § Node outputs, worc flow-authoring.md § Where a
// node's output goes: each earlier node's output is a path — agents
// <ctx>/<node>.md, tools <ctx>/tools/<node>/stdout.txt, the latest checks and
// evaluator steps {checks_path} and {review_path}, slot nodes their slot's
// variable and no {<node>_path}.
func TestTemplateVars_NodeOutputsArePaths(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow})
	r.Visit(t, "planning", "the plan")
	r.Visit(t, "scan", "scanned")
	r.Visit(t, "implementation", "done")
	completeStep(t, r, "testing", "pass")
	completeStep(t, r, "lint", "pass")
	r.Visit(t, "review", `{"findings": []}`)
	r.Visit(t, "wrap", "all done")
	v := r.Vars(t, "publish")
	want := map[string]string{
		"plan_path":           r.Ctx("plan.md"),
		"scan_path":           r.Ctx("scan.md"),
		"implementation_path": r.Ctx("implementation.md"),
		"checks_path":         r.Ctx("testing.md"),
		"lint_path":           r.Ctx("tools/lint/stdout.txt"),
		"review_path":         r.Ctx("review.md"),
		"summary_body_path":   r.Ctx("summary.md"),
		"planning_path":       "",
		"wrap_path":           "",
	}
	for k, w := range want {
		if v[k] != w {
			t.Errorf("{%s} = %q, want %q", k, v[k], w)
		}
	}
}

// docs/contracts.md § Template variables: a variable is empty until its
// producer ran, a skipped producer leaves it empty, and an unknown name
// renders verbatim — through the whole render path.
func TestRenderPrompt_UnknownVerbatimEmptyWithoutValueOnePass(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Roles: map[string]string{
		"r/impl.md": "Task {task_id} at {stage}.{?plan_path} Plan: {plan_path}.{/plan_path} Scan: [{scan_path}] {nope} {\"json\": 1}",
	}})
	r.Dispatch(t, "implementation")
	got := r.LastPrompt(t)
	want := `Task t1 at implementation. Scan: [] {nope} {"json": 1}`
	if got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
	r.Submit(t, "x")
	r.Visit(t, "planning", "{scan_path} is not expanded again")
	r.Visit(t, "scan", "s")
	r.Dispatch(t, "implementation")
	want = fmt.Sprintf("Task t1 at implementation. Plan: %s. Scan: [%s] {nope} {\"json\": 1}", r.Ctx("plan.md"), r.Ctx("scan.md"))
	if got := r.LastPrompt(t); got != want {
		t.Errorf("prompt = %q, want %q", got, want)
	}
}

// worc reference.md § Conditional nodes: derived.needs_refinement is true
// unless the task has a non-empty description and an `## Acceptance
// criteria` section; with no `##` section the whole body is the description.
func TestNeedsRefinement_FormednessNotRelevance(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		body string
		want bool
	}{
		"description and criteria":            {"## Description\n\nDo it.\n\n## Acceptance criteria\n\n- x\n", false},
		"criteria heading any case":           {"## Description\nDo it.\n## ACCEPTANCE CRITERIA:\n- x\n", false},
		"empty criteria section still counts": {"## Description\nDo it.\n## Acceptance criteria\n", false},
		"no criteria":                         {"## Description\n\nDo it.\n", true},
		"empty description":                   {"## Description\n\n## Acceptance criteria\n- x\n", true},
		"sections but no description":         {"## Context\nStuff.\n## Acceptance criteria\n- x\n", true},
		"no sections: body is description":    {"Do it. Acceptance criteria: it works.\n", true},
		"empty body":                          {"", true},
		"heading in a code fence":             {"## Description\nDo it.\n```\n## Acceptance criteria\n```\n", true},
		"level-3 heading is not a section":    {"## Description\nDo it.\n### Acceptance criteria\n- x\n", true},
	} {
		if got := vars.NeedsRefinement(tc.body); got != tc.want {
			t.Errorf("%s: NeedsRefinement = %v, want %v", name, got, tc.want)
		}
	}
}

// worc reference.md § Conditional nodes: the two facts, equals, an unknown
// fact resolving false with one warning, and nodes.<id>.enabled: false
// checked before the predicate.
func TestSkipNode_WhenFactsAndTaskDisable(t *testing.T) {
	t.Parallel()
	const wellFormed = "## Description\nDo it.\n## Acceptance criteria\n- x\n"
	for _, tc := range []struct {
		name, when, network, front, body string
		skip                             bool
		why                              string
	}{
		{name: "no predicate runs", skip: false},
		{name: "refinement skipped for a well-formed task", when: "{ fact: derived.needs_refinement }", body: wellFormed, skip: true, why: "when derived.needs_refinement is false"},
		{name: "refinement runs for a bare task", when: "{ fact: derived.needs_refinement }", body: "Do it.\n", skip: false},
		{name: "equals false inverts", when: "{ fact: derived.needs_refinement, equals: false }", body: wellFormed, skip: false},
		{name: "external research false without network_policy", when: "{ fact: config.external_research }", skip: true},
		{name: "external research true with network_policy", when: "{ fact: config.external_research }", network: "  network_policy: research\n", skip: false},
		{name: "unknown fact resolves false", when: "{ fact: derived.typo }", skip: true, why: "when derived.typo is false"},
		{name: "disabled before the predicate", when: "{ fact: derived.needs_refinement }", body: "Do it.\n", front: "nodes: { n: { enabled: false } }\n", skip: true, why: "disabled by the task"},
		{name: "enabled true runs", front: "nodes: { n: { enabled: true } }\n", skip: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			when := ""
			if tc.when != "" {
				when = ", when: " + tc.when
			}
			fl, err := flow.Parse("f.yaml", []byte("flow:\n  name: f\n  task_type: f\n  permission_ceiling: read-only\n  output_policy: code_change\n  publishing: none\n"+tc.network+
				"  nodes:\n    - { id: n, kind: agent, role_file: n.md"+when+" }\n"))
			if err != nil {
				t.Fatal(err)
			}
			tk, err := task.Parse("t.md", []byte("---\nid: t1\ntitle: T\n"+tc.front+"---\n"+tc.body))
			if err != nil {
				t.Fatal(err)
			}
			var rec logging.Recorder
			s := worker.New(core.Config{Log: rec.Logger()})
			env := &core.RunEnv{Flow: fl, Task: tk}
			skip, why := vars.SkipNode(s.Service, fl.Node("n"), env)
			if skip != tc.skip || !strings.Contains(why, tc.why) {
				t.Errorf("skipNode = %v %q, want %v %q", skip, why, tc.skip, tc.why)
			}
			vars.SkipNode(s.Service, fl.Node("n"), env)
			wantWarnings := 0
			if strings.Contains(tc.when, "typo") {
				wantWarnings = 1
			}
			if len(rec.Messages()) != wantWarnings {
				t.Errorf("rec.Messages() after two evaluations = %q, want %d", rec.Messages(), wantWarnings)
			}
		})
	}
}

// diffRole is a role file that reads the diff variables.
const diffRole = "Change: {diff_path}, overview {change_overview_path}, base {diff_base}.\n"

// docs/contracts.md § Template variables: {diff_path}, {change_overview_path}
// and {diff_base} are empty until the first edit, then arrive together: the
// full diff against the commit recorded at the run's first dispatch, and a
// bounded overview with each path's kind and line counts. Stratus's own files
// are not part of the change.
func TestDiffVars_ArriveTogetherAfterTheFirstEdit(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Git: true, Roles: map[string]string{"r/impl.md": diffRole}})
	r.Visit(t, "planning", "plan") // first dispatch: records the base
	head, err := workertest.Git(context.Background(), r.Dir, nil, "rev-parse", "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	head = strings.TrimSpace(head)
	if got := workertest.Read(t, filepath.Join(r.Dir, ".stratus", "logs", "t1", "diff_base")); got != "r1 "+head+"\n" {
		t.Errorf("diff_base record = %q, want %q", got, "r1 "+head+"\n")
	}
	v := r.Vars(t, "implementation")
	for _, k := range []string{"diff_path", "change_overview_path", "diff_base"} {
		if v[k] != "" {
			t.Errorf("{%s} = %q before any edit, want empty", k, v[k])
		}
	}
	workertest.Write(t, filepath.Join(r.Dir, "README.md"), "one\nTWO\nthree\n")
	workertest.Write(t, filepath.Join(r.Dir, "src", "new.go"), "package src\n")
	workertest.Write(t, filepath.Join(r.Dir, "debug.log"), "ignored\n")
	v = r.Vars(t, "implementation")
	if v["diff_base"] != head || v["diff_path"] != r.Ctx("current.diff") || v["change_overview_path"] != r.Ctx("change-overview.txt") {
		t.Fatalf("diff vars = %q %q %q", v["diff_base"], v["diff_path"], v["change_overview_path"])
	}
	diff := workertest.Read(t, v["diff_path"])
	if !strings.Contains(diff, "+TWO") || !strings.Contains(diff, "src/new.go") || strings.Contains(diff, "debug.log") || strings.Contains(diff, "workspace/") || strings.Contains(diff, ".stratus") {
		t.Errorf("current.diff does not hold exactly the change:\n%s", diff)
	}
	ov := workertest.Read(t, v["change_overview_path"])
	for _, line := range []string{"M README.md +2 -1", "A src/new.go +1 -0", "2 paths, +3 -1 lines, against base " + head} {
		if !strings.Contains(ov, line) {
			t.Errorf("change-overview.txt lacks %q:\n%s", line, ov)
		}
	}
	// The repository's own index is untouched: nothing is staged.
	if staged, _ := workertest.Git(context.Background(), r.Dir, nil, "diff", "--cached", "--name-only"); staged != "" {
		t.Errorf("the snapshot staged into the real index: %q", staged)
	}
}

// The diff snapshot (three git processes) is taken only for a step that
// reads it: a role file naming a diff variable, or a tool node, whose stdin
// carries diff_path (worc flow-authoring.md § Custom tool nodes). Any other
// step renders without one, and nothing is written.
func TestDiffVars_SnapshotOnlyForAStepThatReadsIt(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Git: true, Roles: map[string]string{"r/review.md": "Review {?diff_path}the change at {diff_path}{/diff_path}.\n"}})
	r.Visit(t, "planning", "plan")
	workertest.Write(t, filepath.Join(r.Dir, "README.md"), "changed\n")
	if v := r.Vars(t, "scan"); v["diff_path"] != "" || v["diff_base"] != "" {
		t.Errorf("scan's role file names no diff variable, but it got %q %q", v["diff_path"], v["diff_base"])
	}
	if _, err := os.Stat(r.Ctx("current.diff")); !os.IsNotExist(err) {
		t.Fatalf("a step that does not read the diff wrote current.diff: %v", err)
	}
	if v := r.Vars(t, "review"); v["diff_path"] != r.Ctx("current.diff") {
		t.Errorf("review names {diff_path} in a section token, but got %q", v["diff_path"])
	}
	os.Remove(r.Ctx("current.diff"))
	if v := r.Vars(t, "lint"); v["diff_path"] != r.Ctx("current.diff") {
		t.Errorf("the tool node's stdin carries diff_path, but it got %q", v["diff_path"])
	}
}

// A work dir its enclosing repository ignores (make demo's .scratch/demo)
// is not a git work tree: the diff variables stay empty, no base is
// recorded, and nothing is warned about (git add would refuse the ignored
// paths).
func TestDiffVars_IgnoredWorkDirIsNotAGitWorkTree(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the work dir sits in a git repository that ignores it")
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Roles: map[string]string{"r/impl.md": diffRole}})
	outer := filepath.Dir(r.Dir) // the test's temp root, holding the rig's dirs
	workertest.Write(t, filepath.Join(outer, ".gitignore"), "/"+filepath.Base(r.Dir)+"/\n")
	for _, args := range [][]string{{"init", "-q"}, {"add", ".gitignore"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "outer"}} {
		if _, err := workertest.Git(context.Background(), outer, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
	r.Visit(t, "planning", "plan")
	workertest.Write(t, filepath.Join(r.Dir, "x.go"), "package x\n")
	if v := r.Vars(t, "implementation"); v["diff_path"] != "" || v["diff_base"] != "" {
		t.Errorf("diff vars in an ignored work dir = %q %q, want empty", v["diff_path"], v["diff_base"])
	}
	if _, err := os.Stat(filepath.Join(r.Dir, ".stratus", "logs", "t1", "diff_base")); !os.IsNotExist(err) {
		t.Errorf("diff_base recorded in an ignored work dir: %v", err)
	}
	if r.Warned("diff") {
		t.Errorf("warned about the diff of an ignored work dir: %q", r.Warnings.Messages())
	}
}

// docs/contracts.md § Template variables: the overview lists at most 200
// paths, then a count of the rest; renames read old → new.
func TestChangeOverview_BoundedWithRenames(t *testing.T) {
	t.Parallel()
	snap := &gitwork.Snapshot{Base: "abc", Diff: []byte("0123456789")}
	snap.Paths = append(snap.Paths, gitwork.ChangedPath{Kind: "R", Old: "a.go", Path: "b.go", Added: 1, Deleted: 1})
	snap.Paths = append(snap.Paths, gitwork.ChangedPath{Kind: "A", Path: "img.png", Added: -1, Deleted: -1})
	for i := range 250 {
		snap.Paths = append(snap.Paths, gitwork.ChangedPath{Kind: "M", Path: fmt.Sprintf("f%03d", i), Added: 1})
	}
	ov := string(snap.Overview("/x/current.diff"))
	for _, want := range []string{"252 paths, +251 -1 lines, against base abc", "Full diff: /x/current.diff (10 bytes)", "R a.go → b.go +1 -1", "A img.png binary", "… and 52 more paths"} {
		if !strings.Contains(ov, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	if n := strings.Count(ov, "\nM f"); n != 198 {
		t.Errorf("overview lists %d M lines; with the rename and the binary that is %d paths, want 200", n, n+2)
	}
}

// docs/contracts.md § Template variables: outside a git work tree there is no
// diff; the variables stay empty and nothing is recorded.
func TestDiffVars_EmptyOutsideAGitWorkTree(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Roles: map[string]string{"r/impl.md": diffRole}})
	workertest.Write(t, filepath.Join(r.Dir, "x.go"), "x")
	r.Visit(t, "planning", "plan")
	if v := r.Vars(t, "implementation"); v["diff_path"] != "" || v["diff_base"] != "" {
		t.Errorf("diff vars outside git = %q %q, want empty", v["diff_path"], v["diff_base"])
	}
	if _, err := os.Stat(filepath.Join(r.Dir, ".stratus", "logs", "t1", "diff_base")); !os.IsNotExist(err) {
		t.Errorf("diff_base recorded outside git: %v", err)
	}
}

// worc reference.md § output_policy: {report_dir} is the policy's report
// directory (docs/research/<task> for repository_document).
func TestTemplateVars_ReportDirFollowsOutputPolicy(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: strings.Replace(workertest.ChainFlow, "output_policy: code_change", "output_policy: repository_document", 1)})
	if got, want := r.Vars(t, "scan")["report_dir"], filepath.Join(r.Dir, "docs", "research", "t1"); got != want {
		t.Errorf("{report_dir} = %q, want %q", got, want)
	}
}

// docs/contracts.md § Template variables: inside the region every node gets
// {subtask_order} {subtask_count} {subtask_spec_path}; only the region's
// implementation node gets {predecessor_context}, from subtask 2 on, a
// factual floor naming each earlier subtask's spec, changed files and
// acceptance criteria; nodes outside the region get none of them.
func TestSubtaskVars_RegionOrderSpecAndPredecessorFloor(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.DecompositionFlow, Config: workertest.EnableDecomposition, Git: true})
	r.Visit(t, "planning", workertest.TwoSubtasks)
	spec1 := workertest.Read(t, r.Ctx("subtasks/01.md"))
	if !strings.HasPrefix(spec1, "# Subtask 1 of 2: Store the counter\n\nAdd an attempts column.\n") || !strings.Contains(spec1, "- [ ] a failed delivery increments attempts") {
		t.Errorf("subtasks/01.md = %q", spec1)
	}

	r.Dispatch(t, "implementation") // subtask 1
	v := r.Vars(t, "review")
	if v["subtask_order"] != "1" || v["subtask_count"] != "2" || v["subtask_spec_path"] != r.Ctx("subtasks/01.md") {
		t.Errorf("review in subtask 1: %q %q %q", v["subtask_order"], v["subtask_count"], v["subtask_spec_path"])
	}
	if v["predecessor_context"] != "" {
		t.Errorf("review got {predecessor_context} = %q; it is the implementation node's alone", v["predecessor_context"])
	}
	workertest.Write(t, filepath.Join(r.Dir, "store.go"), "package x\n")
	if sv, _ := r.Submit(t, "stored"); sv.SubtaskOrder != 1 {
		t.Errorf("implementation StepValue.SubtaskOrder = %d, want 1", sv.SubtaskOrder)
	}
	r.Visit(t, "review", workertest.FindingsClean)

	r.Dispatch(t, "implementation") // subtask 2
	pv := r.Vars(t, "implementation")
	if pv["subtask_order"] != "2" || pv["subtask_spec_path"] != r.Ctx("subtasks/02.md") || pv["predecessor_context"] != r.Ctx("subtasks/02.predecessors.md") {
		t.Fatalf("implementation in subtask 2: %q", pv)
	}
	brief := workertest.Read(t, pv["predecessor_context"])
	for _, want := range []string{"## Subtask 1 of 2: Store the counter", "- Spec: " + r.Ctx("subtasks/01.md"), "  - store.go", "  - [ ] a failed delivery increments attempts"} {
		if !strings.Contains(brief, want) {
			t.Errorf("predecessor brief lacks %q:\n%s", want, brief)
		}
	}
	if rv := r.Vars(t, "review"); rv["subtask_order"] != "2" || rv["predecessor_context"] != "" {
		t.Errorf("review in subtask 2: order %q, predecessor_context %q; want 2 and none", rv["subtask_order"], rv["predecessor_context"])
	}
	if strings.Contains(brief, "Subtask 2 of 2") {
		t.Errorf("the brief of subtask 2 covers itself:\n%s", brief)
	}
	if v := r.Vars(t, "documentation"); v["subtask_order"] != "" || v["subtask_spec_path"] != "" {
		t.Errorf("documentation is outside the region but got %q %q", v["subtask_order"], v["subtask_spec_path"])
	}
}

// A step's subtask is counted from the proposer's, the region entry's and
// the step's node's steps back to the proposer's latest completion
// (store.Before), without reading the run's whole step list (README.md §
// Performance).
func TestSubtaskOf_ReadsOnlyTheRegionsNodes(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.DecompositionFlow, Config: workertest.EnableDecomposition, Git: true})
	r.Visit(t, "planning", workertest.TwoSubtasks)
	r.Visit(t, "implementation", "stored")
	r.Visit(t, "review", workertest.FindingsClean)
	impl := r.Dispatch(t, "implementation") // subtask 2
	r.Svc.Store = workertest.ListlessStore{Store: r.Svc.Store}
	for _, st := range []stratus.Step{impl, {TID: "probe.review", RunID: r.Run.ID, Node: "review"}} {
		order, count, err := vars.SubtaskOf(context.Background(), r.Svc.Service, r.Env, st)
		if err != nil || order != 2 || count != 2 {
			t.Errorf("SubtaskOf(%s) = %d of %d, %v; want 2 of 2", st.TID, order, count, err)
		}
	}
	if v := r.Vars(t, "review"); v["subtask_order"] != "2" {
		t.Errorf("review in subtask 2: {subtask_order} = %q; want 2", v["subtask_order"])
	}
}
