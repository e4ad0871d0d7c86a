package supervise_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/worker/attempt"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

const longProse = "The run added the --name flag and a table test. Review found the empty-name case unhandled at first; the fix rejects it with exit status 2, and the second review accepted."

// supervisorLaunches are the launched supervisor turns.
func supervisorLaunches(r *workertest.Rig) []launch.Spec {
	var out []launch.Spec
	for _, s := range r.Launcher.Launched() {
		if strings.Contains(s.TaskID, "."+core.SupervisorNode+".") {
			out = append(out, s)
		}
	}
	return out
}

func submitTo(t *testing.T, r *workertest.Rig, sp launch.Spec, body string, ok bool) *core.StepValue {
	t.Helper()
	sv, err := r.Svc.Submit(context.Background(), "Bearer "+sp.Handle, sp.TaskID, []byte(body), ok)
	if err != nil {
		t.Fatalf("submit to %s: %v", sp.TaskID, err)
	}
	return sv
}

func summary(t *testing.T, r *workertest.Rig) (map[string]any, string) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(workertest.Read(t, filepath.Join(r.Dir, ".stratus/logs/t1/summary.json"))), &m); err != nil {
		t.Fatal(err)
	}
	return m, workertest.Read(t, filepath.Join(r.Dir, ".stratus/logs/t1/summary.md"))
}

func tokenCounts(r *workertest.Rig) (map[string]bool, int) {
	ok := map[string]bool{}
	for k := range r.Tokens.Successes() {
		ok[k] = true
	}
	return ok, len(r.Tokens.Failures())
}

// toPublish runs implementation and an accepting review, then dispatches
// publish; it returns the publish token.
func toPublish(t *testing.T, r *workertest.Rig) string {
	t.Helper()
	r.Visit(t, "implementation", "did it")
	if sv := r.Visit(t, "review", workertest.FindingsClean); sv.Outcome != "accept" {
		t.Fatalf("review = %+v", sv)
	}
	r.Dispatch(t, "publish")
	return "tok-3"
}

// docs/contracts.md § What the supervisor layer does: at publish the finalize
// turn runs through the worker path (read-only, its own engine input), reads
// a deterministic packet, and its prose becomes summary.md under the task
// title, with the fact sections appended; its submit completes no token of
// its own, and publish completes after it.
func TestFinalize_ProseReachesSummaryThenPublishCompletes(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	pubTok := toPublish(t, r)
	sups := supervisorLaunches(r)
	if len(sups) != 1 {
		t.Fatalf("supervisor turns launched: %d, want 1 finalize", len(sups))
	}
	if done, _ := tokenCounts(r); done[pubTok] {
		t.Fatal("publish completed before its finalize turn ended")
	}
	p, err := r.Svc.FetchPrompt(context.Background(), "Bearer "+sups[0].Handle, sups[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	json.Unmarshal(p.Engine.Input, &in)
	packet := filepath.Join(r.Dir, ".stratus/logs/t1/supervisor/packet.json")
	if in["node"] != "supervisor.finalize" || in["visit"] != float64(1) || p.Engine.PermissionProfile != flow.ReadOnly || p.Engine.NetworkAccess ||
		!strings.Contains(p.Prompt, packet) || p.StepRef != "supervisor#1" || p.Engine.Provider != "echo" {
		t.Errorf("finalize payload: input %v, engine %+v, step %s\nprompt:\n%s", in, p.Engine, p.StepRef, p.Prompt)
	}
	var pk struct {
		Steps []struct {
			StepRef, Status, Note string
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(workertest.Read(t, packet)), &pk); err != nil || len(pk.Steps) != 3 || pk.Steps[2].Status != "pending" {
		t.Errorf("packet steps = %+v (%v)", pk.Steps, err)
	}

	// docs/contracts.md § What the supervisor layer does: the layer is
	// read-only; it stages no part.
	if err := r.Svc.Artifact(context.Background(), "Bearer "+sups[0].Handle, "notes.md", []byte("x")); stratus.ErrorCode(err) != stratus.EFORBIDDEN {
		t.Errorf("a supervisor turn staged a part: %v", err)
	}
	in64, out64 := int64(900), int64(300)
	var events []core.Event
	r.Svc.OnEvent = func(e core.Event) { events = append(events, e) }
	if err := r.Svc.RecordStats(context.Background(), "Bearer "+sups[0].Handle, core.Stats{PromptTokens: &in64, CompletionTokens: &out64}); err != nil {
		t.Fatal(err)
	}
	sv := submitTo(t, r, sups[0], "<summary>"+longProse+"</summary><follow_ups>[]</follow_ups>", true)
	if sv.Outcome != "done" {
		t.Errorf("finalize submit = %+v", sv)
	}
	// The turn's live events name it by its job and carry what it spent.
	for _, e := range events {
		switch e.Type {
		case core.EventStepProgress:
			if e.Node != report.JobFinalize {
				t.Errorf("progress of the finalize turn names node %q", e.Node)
			}
		case core.EventSupervisorEnded:
			if e.PromptTokens != 900 || e.CompletionTokens != 300 || e.Duration <= 0 || e.Node != report.JobFinalize {
				t.Errorf("supervisor_ended %+v; want its 900/300 tokens and duration", e)
			}
		}
	}
	done, failures := tokenCounts(r)
	if !done[pubTok] || len(done) != 3 || failures != 0 {
		t.Errorf("tokens completed %v (%d failures), want implementation, review and publish only", done, failures)
	}
	m, md := summary(t, r)
	if m["summary"] != longProse || m["degraded"] != nil {
		t.Errorf("summary.json = %v", m)
	}
	want := "# A task\n\n" + longProse + "\n\n## Pipeline nodes skipped\n"
	if !strings.HasPrefix(md, want) || strings.Contains(md, "<follow_ups>") || !strings.Contains(md, "## Run cost\n") {
		t.Errorf("summary.md:\n%s\nwant it to start %q", md, want)
	}
	su, _ := m["supervisor_usage"].(map[string]any)
	if byJob, _ := su["by_job"].(map[string]any); byJob == nil || byJob["finalize"].(map[string]any)["input_tokens"] != float64(900) {
		t.Errorf("supervisor_usage = %v", m["supervisor_usage"])
	}
}

// docs/contracts.md § The summary artifacts (the finalize turn could not
// run): a finalize turn that fails — a failed report, or a worker that exits
// without one — never fails the run: the deterministic report takes over,
// degraded.
func TestFinalize_FailureFallsBackToTheRenderer(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"failed report", "worker exited"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
			pubTok := toPublish(t, r)
			sp := supervisorLaunches(r)[0]
			if how == "failed report" {
				submitTo(t, r, sp, "Failed: the engine crashed", false)
			} else {
				attempt.WorkerExited(r.Svc.Service, sp.TaskID, 1, errors.New("signal: killed"), "")
			}
			done, failures := tokenCounts(r)
			if !done[pubTok] || failures != 0 {
				t.Fatalf("publish not completed (failures %d)", failures)
			}
			m, md := summary(t, r)
			if m["degraded"] != true || m["summary"] != "" || !strings.Contains(md, "## Steps\n") || !strings.Contains(md, "did not reach this report") {
				t.Errorf("summary.json %v\nsummary.md:\n%s", m, md)
			}
			if !r.Warned("deterministic report takes over") {
				t.Errorf("no warning: %v", r.Warnings.Messages())
			}
		})
	}
}

// docs/contracts.md § The summary artifacts (collapsed prose): collapsed
// prose yields no provider summary.md, flags the run degraded and carries the
// discarded text in a warning (one "warning:" prefix, no "WARNING:" of its
// own).
func TestFinalize_CollapsedProseIsDiscardedWithAWarning(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	toPublish(t, r)
	submitTo(t, r, supervisorLaunches(r)[0], "Looks good.", true)
	m, md := summary(t, r)
	if m["degraded"] != true || m["summary"] != "" || !strings.Contains(md, "below the 120-character floor") {
		t.Errorf("summary.json %v\nsummary.md:\n%s", m, md)
	}
	if !r.Warned(`the synthesis collapsed`) || !r.Warned(`Discarded text: "Looks good."`) || r.Warned(`WARNING`) {
		t.Errorf("warnings = %v", r.Warnings.Messages())
	}
}

// docs/contracts.md § Running without a supervisor, § The summary artifacts
// (the layer is disabled): enabled false runs no turn at all — not at
// publish, not after a deviation — and the report is rendered from the facts,
// not degraded.
func TestSupervisorDisabled_NoTurnsRendererWrites(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true, Config: func(c *config.Config) { c.Supervisor.Enabled = new(bool) }})
	r.Visit(t, "implementation", "did it")
	r.Visit(t, "review", workertest.FindingsOneHigh) // a rework: a deviation
	r.Visit(t, "implementation", "fixed")
	r.Visit(t, "review", workertest.FindingsClean)
	r.Dispatch(t, "publish")
	r.Svc.Drain()
	if n := len(supervisorLaunches(r)); n != 0 {
		t.Fatalf("%d supervisor turns launched with the layer off", n)
	}
	if done, _ := tokenCounts(r); !done["tok-5"] {
		t.Fatal("publish did not complete at once")
	}
	m, md := summary(t, r)
	if m["degraded"] != nil || m["summary"] != "" || m["supervisor_usage"] != nil || !strings.Contains(md, "## Gates\n") {
		t.Errorf("summary.json %v\nsummary.md:\n%s", m, md)
	}
}

// docs/contracts.md § What observe.mode costs: under events a rework earns
// one best-effort observation — launched off the routing path, recorded as
// supervisor/observe-<node>-<visit>.md, completing no token — and an ordinary
// step earns none; a flow that narrows to none observes nothing.
func TestObserve_EventsModeObservesADeviationOnly(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	r.Visit(t, "implementation", "did it")
	r.Svc.Drain()
	if n := len(supervisorLaunches(r)); n != 0 {
		t.Fatalf("an ordinary step was observed (%d turns)", n)
	}
	r.Visit(t, "review", workertest.FindingsOneHigh)
	r.Svc.Drain()
	sups := supervisorLaunches(r)
	if len(sups) != 1 {
		t.Fatalf("a rework earned %d observations, want 1", len(sups))
	}
	p, err := r.Svc.FetchPrompt(context.Background(), "Bearer "+sups[0].Handle, sups[0].TaskID)
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	json.Unmarshal(p.Engine.Input, &in)
	if in["node"] != "supervisor.observe" || !strings.Contains(p.Prompt, "review#1") || !strings.Contains(p.Prompt, "deviation (rework)") || p.Engine.Reasoning != "" && p.Engine.Reasoning != "low" {
		t.Errorf("observe payload: input %v\nprompt:\n%s", in, p.Prompt)
	}
	before, _ := tokenCounts(r)
	submitTo(t, r, sups[0], "The review flagged an unhandled empty name; watch the fix.", true)
	if after, _ := tokenCounts(r); len(after) != len(before) {
		t.Errorf("an observation completed a token: %v → %v", before, after)
	}
	if note := workertest.Read(t, filepath.Join(r.Dir, ".stratus/logs/t1/supervisor/observe-review-1.md")); !strings.Contains(note, "unhandled empty name") {
		t.Errorf("observation note:\n%s", note)
	}
	// The observation is no flow step: a later prompt's context skips it.
	r.Dispatch(t, "implementation")
	if strings.Contains(r.LastPrompt(t), "_supervisor") {
		t.Error("a flow step's prompt points at a supervisor turn")
	}

	quiet := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow("  supervisor:\n    observe: { mode: none }\n"), Supervisor: true})
	quiet.Visit(t, "implementation", "did it")
	quiet.Visit(t, "review", workertest.FindingsOneHigh)
	quiet.Svc.Drain()
	if n := len(supervisorLaunches(quiet)); n != 0 {
		t.Errorf("a flow narrowed to none observed %d steps", n)
	}
}

// docs/contracts.md § Prompt audit: every agent and evaluator step run writes
// prompt-audit/<ordinal:06d>-<node>.md (a fenced JSON header, then the prompt
// last) and a timeline.jsonl line with the prompt; a task's prompt_audit
// overrides config in both directions.
func TestPromptAudit_FilesAndTaskOverride(t *testing.T) {
	t.Parallel()
	front := func(v string) string {
		return "---\nid: t1\ntitle: A task\n" + v + "---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n"
	}
	for _, tc := range []struct {
		name   string
		config bool
		task   string
		want   bool
	}{
		{"config off", false, "", false},
		{"config on", true, "", true},
		{"task on beats config off", false, "prompt_audit: true\n", true},
		{"task off beats config on", true, "prompt_audit: false\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Task: front(tc.task), Config: func(c *config.Config) { c.PromptAudit = tc.config }})
			r.Visit(t, "implementation", "did it")
			r.Visit(t, "review", workertest.FindingsClean)
			dir := filepath.Join(r.Dir, ".stratus/logs/t1/prompt-audit")
			_, err := os.Stat(dir)
			if got := err == nil; got != tc.want {
				t.Fatalf("audit written = %v, want %v", got, tc.want)
			}
			if !tc.want {
				return
			}
			md := workertest.Read(t, filepath.Join(dir, "000002-review.md"))
			head, prompt, ok := strings.Cut(md, "\n```\n\n## Prompt\n\n")
			if !ok || !strings.HasPrefix(head, "# Prompt audit: review#1\n\n```json\n") || prompt != "Role of review.\n" {
				t.Fatalf("review audit:\n%s", md)
			}
			var meta core.AuditRecord
			if err := json.Unmarshal([]byte(strings.TrimPrefix(head, "# Prompt audit: review#1\n\n```json\n")), &meta); err != nil {
				t.Fatal(err)
			}
			if meta.Route != "primary" || meta.Provider != "echo" || len(meta.Attempts) != 1 || meta.Attempts[0].Status != stratus.AttemptSubmitted ||
				meta.Attempts[0].ErrorClass != nil || meta.ConfiguredModel != nil || meta.Outcome != "accept" || meta.Prompt != "" {
				t.Errorf("metadata = %+v", meta)
			}
			lines := strings.Split(strings.TrimSpace(workertest.Read(t, filepath.Join(dir, core.TimelineFile))), "\n")
			var first core.AuditRecord
			if len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || first.StepRef != "implementation#1" || first.Prompt != "Role of implementation.\n" {
				t.Errorf("timeline.jsonl:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
}

// docs/contracts.md § Prompt audit: a failed attempt's row carries its error
// class, and a secret-shaped token in the prompt is redacted like
// rendered-prompt.md.
func TestPromptAudit_ErrorClassAndRedaction(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Config: func(c *config.Config) { c.PromptAudit = true },
		Roles: map[string]string{"r/impl.md": "Use key sk-abcdefghijklmnopqrstuvwx here.\n"}})
	r.Dispatch(t, "implementation")
	sp := r.Launcher.Launched()[0]
	if _, err := r.Svc.Submit(context.Background(), "Bearer "+sp.Handle, sp.TaskID, []byte("boom"), false); err != nil {
		t.Fatal(err)
	}
	md := workertest.Read(t, filepath.Join(r.Dir, ".stratus/logs/t1/prompt-audit/000001-implementation.md"))
	if strings.Contains(md, "sk-abcdefghijklmnopqrstuvwx") || !strings.Contains(md, "[REDACTED]") {
		t.Errorf("audit not redacted:\n%s", md)
	}
	if !strings.Contains(md, `"status": "failed",`) || !strings.Contains(md, `"error_class": "Failed"`) {
		t.Errorf("failed attempt row lacks its error class:\n%s", md)
	}
}
