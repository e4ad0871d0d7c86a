package report

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/store"
)

// Kind is the step kind of a supervisor turn: a synthetic step that is not
// a flow node (docs/contracts.md § The supervisor: "It is not a node and not
// a stage").
const Kind = "supervisor"

// Supervisor jobs (docs/contracts.md § The supervisor: observe / finalize /
// handoff).
const (
	JobObserve  = "observe"
	JobFinalize = "finalize"
	JobHandoff  = "handoff"
)

// SupervisorValue is the Value of a supervisor turn's step.
type SupervisorValue struct {
	StepRef  string `json:"step_ref"`
	Node     string `json:"node"`
	Attempt  int    `json:"attempt,omitempty"`
	Outcome  string `json:"outcome,omitempty"` // done | failed; "" while running
	Reason   string `json:"reason,omitempty"`
	Job      string `json:"job"`                 // JobObserve, JobFinalize, JobHandoff
	JobVisit int    `json:"job_visit,omitempty"` // the turn's ordinal among the run's turns of its job
	For      string `json:"for,omitempty"`       // the step observed, or the publish step finalized (its task id)
	ForRef   string `json:"for_ref,omitempty"`   // that step's step_ref
}

// SynthesisPart is the name of the sidecar a finalize attempt's tail
// carries: the supervisor_final record of what reached disk.
const SynthesisPart = "supervisor_final"

// Synthesis outcomes.
const (
	SynthesisWritten   = "written"   // prose reached summary.md
	SynthesisCollapsed = "collapsed" // prose below CollapseFloor: discarded
	SynthesisFailed    = "failed"    // the turn could not run or returned nothing usable
)

// CollapseFloor is the prose length, in characters, below which a
// synthesis counts as collapsed (docs/contracts.md § The summary artifacts,
// situation 4).
const CollapseFloor = 120

// Synthesis is the supervisor_final record: what the finalize turn put on
// disk, rather than what it returned
// (docs/contracts.md § The summary artifacts).
type Synthesis struct {
	Outcome   string     `json:"outcome"`
	StepRef   string     `json:"step_ref,omitempty"`
	Prose     string     `json:"prose,omitempty"`      // sanitized; set only when written
	FollowUps []FollowUp `json:"follow_ups,omitempty"` // the turn's own follow-ups (flow emit_follow_ups)
	Discarded string     `json:"discarded,omitempty"`  // collapsed: the text discarded
	Reason    string     `json:"reason,omitempty"`     // failed: why
}

// StepLine is one step of the run with what the report reads of it.
type StepLine struct {
	Step     stratus.Step
	Attempts []stratus.Attempt
	// Final is the final body of the latest attempt (nil when it has none).
	Final []byte
	// Outcome, Reason and Parts are read from the step's value.
	Outcome string
	Reason  string
	Parts   []string
	// Job and For are set on a supervisor turn (Step.Kind == Kind).
	Job, For, ForRef string
	// Evaluator passes: the findings of the report, gating marked against
	// Gate; FindingsErr when the report broke the contract.
	Findings    []findings.Finding
	FindingsErr string
	Gate        string
	Blocking    bool
	MaxRework   int
	BestEffort  bool
	// Exhausted: the worker recorded that a non-blocking evaluator accepted
	// with its rework budget spent.
	Exhausted  bool
	synthesis  *Synthesis // a finalize turn's sidecar
	providerOf func(stratus.Attempt) string
}

// Provider is the provider attempt a ran on: its recorded resolution, else
// the provider its node routes to.
func (l StepLine) Provider(a stratus.Attempt) string {
	if a.Resolved.Provider != "" {
		return a.Resolved.Provider
	}
	if l.providerOf != nil {
		return l.providerOf(a)
	}
	return ""
}

// GatingCount is how many of the pass's findings gate.
func (l StepLine) GatingCount() int {
	n := 0
	for _, f := range l.Findings {
		if f.Gating {
			n++
		}
	}
	return n
}

// AcceptedOpen reports an evaluator pass that accepted with gating
// findings still open: a non-blocking evaluator that spent its
// max_rework_per_stage (worc reference.md § evaluator node).
func (l StepLine) AcceptedOpen() bool {
	return l.Step.Kind == flow.KindEvaluator && l.Step.Verdict == "accept" && (l.Exhausted || l.GatingCount() > 0)
}

// Changes are the work dir's changed paths, never the diff
// (docs/contracts.md § The summary artifacts: "the report names the changed
// paths").
type Changes struct {
	Git   bool     // the work dir is a git work tree and git answered
	Paths []string // "XY path" porcelain lines, sorted; Stratus's own state excluded
	Note  string   // why the paths are not known, when !Git
	// DiffPath is the absolute path of the run's current.diff in the ctx
	// dir, when one was written: the report points at it, never inlines it.
	DiffPath string
	// Branch, for a run whose repository travelled (stratus.Run.Workspace),
	// is the branch its commits come back as; Base and Head bound them in
	// the run's own history (not the branch's: pull rewrites them onto
	// Origin, the operator's HEAD at run start, "" when it had none);
	// Commits counts the steps that changed the workspace.
	Branch, Base, Head, Origin string
	Commits                    int
}

// Facts are what the report is rendered from.
type Facts struct {
	Run    stratus.Run
	Status string // the run's terminal as it is being written
	// Steps are the flow's steps in creation order; Supervisor the
	// supervisor layer's turns.
	Steps      []StepLine
	Supervisor []StepLine
	// SupervisorOn is config supervisor.enabled; EmitFollowUps the flow's
	// supervisor.emit_follow_ups.
	SupervisorOn  bool
	EmitFollowUps bool
	// Synthesis is the latest finalize turn's record (nil: none ran).
	Synthesis    *Synthesis
	Degradations []stratus.Degradation
	Changes      Changes
	CtxDir       string // sink key of the run's ctx dir ("" unknown)
	// Families maps a provider name to its CLI family (claude, codex, "").
	Families map[string]string
	// Stop is how a run that did not end done stopped (nil: not known, or
	// done); the driver sets it after Collect. Why reads it.
	Stop *Stop
	// Publishing are the lines of the Publishing section: the run's
	// pushed branch and pull request (publishingNotes).
	Publishing []string
}

// Env is what Collect reads beyond the store: the run's flow (gate
// severities, blocking, budgets, node kinds) and the configuration
// (supervisor.enabled, providers, ctx-dir placement). Either may be nil.
type Env struct {
	Flow   *flow.Flow
	Config *config.Config
	// Front is the task's front matter (nodes.<id>.provider hints), or nil.
	Front map[string]any
}

// Collect reads a run's facts from the store and the work dir.
func Collect(ctx context.Context, st store.Store, run stratus.Run, status string, env Env) (*Facts, error) {
	steps, err := st.ListSteps(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	f := &Facts{Run: run, Status: status, SupervisorOn: true, Families: map[string]string{}}
	cfg := env.Config
	if cfg != nil {
		f.SupervisorOn = cfg.Supervisor.On()
		for name, p := range cfg.Agents.Providers {
			f.Families[name] = p.Family(name)
		}
		if cd, err := projection.RunCtxDir(cfg.Projection.Placement, run); err == nil {
			f.CtxDir = cd
		}
	}
	f.Publishing = publishingNotes(run)
	if env.Flow != nil && env.Flow.Supervisor != nil && env.Flow.Supervisor.EmitFollowUps != nil {
		f.EmitFollowUps = *env.Flow.Supervisor.EmitFollowUps
	}
	for _, s := range steps {
		line := StepLine{Step: s}
		for n := 1; ; n++ {
			a, err := st.GetAttempt(ctx, s.TID, n)
			if stratus.ErrorCode(err) == stratus.ENOTFOUND {
				break
			} else if err != nil {
				return nil, err
			}
			line.Attempts = append(line.Attempts, a)
		}
		var v SupervisorValue
		var sv struct {
			Reason    string   `json:"reason"`
			Parts     []string `json:"parts"`
			Exhausted bool     `json:"exhausted"`
		}
		if len(s.Value) > 0 {
			json.Unmarshal(s.Value, &v)
			json.Unmarshal(s.Value, &sv)
		}
		line.Outcome, line.Reason, line.Parts, line.Exhausted = v.Outcome, v.Reason, sv.Parts, sv.Exhausted
		var tail []stratus.OutputEvent
		if n := len(line.Attempts); n > 0 {
			if tail, err = st.ListOutput(ctx, s.TID, line.Attempts[n-1].N); err != nil {
				return nil, err
			}
			for _, e := range tail {
				switch {
				case e.Kind == stratus.OutputFinal && line.Final == nil:
					line.Final = e.Body
				case e.Kind == stratus.OutputSidecar && e.Name == SynthesisPart:
					var syn Synthesis
					if json.Unmarshal(e.Body, &syn) == nil {
						line.synthesis = &syn
					}
				}
			}
		}
		line.providerOf = routedProvider(env, s)
		if s.Kind == Kind {
			line.Job, line.For, line.ForRef = v.Job, v.For, v.ForRef
			f.Supervisor = append(f.Supervisor, line)
			continue
		}
		if node := nodeOf(env.Flow, s.Node); node != nil {
			line.BestEffort = node.BestEffort
			if node.Kind == flow.KindEvaluator {
				line.Gate, line.Blocking, line.MaxRework = evaluatorPolicy(env.Flow, node)
			}
		}
		if s.Kind == flow.KindEvaluator && len(tail) > 0 && s.Status == stratus.StepCompleted {
			format := ""
			if node := nodeOf(env.Flow, s.Node); node != nil {
				format = node.SubmitFormat
				if format == "" {
					format = env.Flow.SubmitFormat
				}
			}
			if line.Gate == "" {
				line.Gate = findings.DefaultGate
			}
			value, err := fold.Fold(s.Node, tail, format)
			if err == nil {
				line.Findings, err = findings.Parse(value)
			}
			if err != nil {
				line.FindingsErr = stratus.ErrorMessage(err)
			} else {
				findings.Mark(line.Findings, line.Gate)
			}
		}
		f.Steps = append(f.Steps, line)
	}
	// The latest finalize turn decides what reached disk.
	for i := len(f.Supervisor) - 1; i >= 0; i-- {
		l := f.Supervisor[i]
		if l.Job != JobFinalize {
			continue
		}
		switch {
		case l.synthesis != nil:
			syn := *l.synthesis
			syn.StepRef = l.Step.StepRef
			f.Synthesis = &syn
		case l.Step.Status == stratus.StepRunning:
			f.Synthesis = &Synthesis{Outcome: SynthesisFailed, StepRef: l.Step.StepRef, Reason: "the finalize turn had not finished"}
		default:
			why := l.Reason
			if why == "" {
				why = "the finalize turn recorded no result"
			}
			f.Synthesis = &Synthesis{Outcome: SynthesisFailed, StepRef: l.Step.StepRef, Reason: why}
		}
		break
	}
	if f.Degradations, err = st.ListDegradations(ctx, run.ID); err != nil {
		return nil, err
	}
	if ws := run.Workspace; ws != nil {
		// The engines worked in checkouts of their own: the work dir's
		// status is not the run's change.
		f.Changes = Changes{Branch: "stratus/" + run.TaskID, Base: ws.Base, Head: ws.Head, Origin: ws.Origin, Commits: max(len(ws.Bundles)-1, 0)}
		return f, nil
	}
	f.Changes = changedPaths(ctx, run.WorkDir, f.CtxDir)
	if run.WorkDir != "" && f.CtxDir != "" {
		p := filepath.Join(run.WorkDir, filepath.FromSlash(f.CtxDir), "current.diff")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			f.Changes.DiffPath = p
		}
	}
	return f, nil
}

func nodeOf(fl *flow.Flow, id string) *flow.Node {
	if fl == nil {
		return nil
	}
	return fl.Node(id)
}

// evaluatorPolicy is an evaluator's gate_severity, blocking and
// max_rework_per_stage, with flow.defaults.evaluator and worc's defaults
// (high, true, 1) filled in.
func evaluatorPolicy(fl *flow.Flow, n *flow.Node) (gate string, blocking bool, maxRework int) {
	gate, blocking, maxRework = n.GateSeverity, true, 1
	var d *flow.EvaluatorDefaults
	if fl.Defaults != nil {
		d = fl.Defaults.Evaluator
	}
	if gate == "" && d != nil {
		gate = d.GateSeverity
	}
	if gate == "" {
		gate = findings.DefaultGate
	}
	if n.Blocking != nil {
		blocking = *n.Blocking
	}
	switch {
	case n.MaxReworkPerStage != nil:
		maxRework = *n.MaxReworkPerStage
	case d != nil && d.MaxReworkPerStage != nil:
		maxRework = *d.MaxReworkPerStage
	}
	return gate, blocking, maxRework
}

// routedProvider is the provider a step's attempts route to when an
// attempt recorded none: the task's hint, the node's pin, the primary; for
// a supervisor turn supervisor.provider or the primary.
func routedProvider(env Env, s stratus.Step) func(stratus.Attempt) string {
	return func(stratus.Attempt) string {
		if env.Config == nil {
			return ""
		}
		pin := ""
		if s.Kind == Kind {
			pin = env.Config.Supervisor.Provider
		} else {
			if nodes, ok := env.Front["nodes"].(map[string]any); ok {
				if o, ok := nodes[s.Node].(map[string]any); ok {
					pin, _ = o["provider"].(string)
				}
			}
			if n := nodeOf(env.Flow, s.Node); pin == "" && n != nil {
				pin = n.Provider
			}
		}
		if pin == "" {
			return env.Config.Agents.Primary
		}
		return pin
	}
}

// changedPaths lists the work dir's changed paths from git status
// (gitwork), leaving out Stratus's own state (.stratus/) and the run's ctx
// dir. A work dir that is not a git work tree — including one its
// enclosing repository ignores — or a git that fails leaves the paths
// unknown, with the reason.
func changedPaths(ctx context.Context, workDir, ctxDir string) Changes {
	if workDir == "" {
		return Changes{Note: "the run has no work dir"}
	}
	t, err := gitwork.Open(ctx, workDir)
	if errors.Is(err, gitwork.ErrNotTree) {
		return Changes{Note: "the work dir is not a git repository (" + gitwork.Reason(err) + "), so its changed paths are not known"}
	} else if err != nil {
		return Changes{Note: "git could not list the work dir's changes (" + oneLine(err.Error()) + "), so its changed paths are not known"}
	}
	exclude := []string{".stratus"}
	if ctxDir != "" {
		exclude = append(exclude, ctxDir)
	}
	entries, err := t.Status(ctx, gitwork.StatusOptions{Exclude: exclude, InDir: true})
	if err != nil {
		return Changes{Note: "git could not list the work dir's changes (" + oneLine(err.Error()) + "), so its changed paths are not known"}
	}
	c := Changes{Git: true}
	for _, e := range entries {
		c.Paths = append(c.Paths, strings.TrimSpace(e.Code)+" "+strings.TrimPrefix(e.Path, t.Prefix))
	}
	sort.Strings(c.Paths)
	return c
}

// ctxFile is the absolute path of a step's projection in the ctx dir.
func (f *Facts) ctxFile(node string) string {
	if f.CtxDir == "" || f.Run.WorkDir == "" {
		return ""
	}
	return path.Join(f.Run.WorkDir, f.CtxDir, node+".md")
}

// CtxFile is the absolute path of node's projection ("" when unknown).
func (f *Facts) CtxFile(node string) string { return f.ctxFile(node) }

// prose is the provider-authored prose that reaches summary.md, or "".
func (f *Facts) prose() string {
	if f.Status != stratus.RunDone || f.Synthesis == nil || f.Synthesis.Outcome != SynthesisWritten {
		return ""
	}
	if len([]rune(strings.TrimSpace(f.Synthesis.Prose))) < CollapseFloor {
		return ""
	}
	return strings.TrimSpace(f.Synthesis.Prose)
}

// Degraded reports that a synthesis was expected and none reached disk
// (situations 3 and 4 of docs/contracts.md § The summary artifacts).
func (f *Facts) Degraded() bool {
	return f.Status == stratus.RunDone && f.Synthesis != nil && f.prose() == ""
}
