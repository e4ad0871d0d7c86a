package webui

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/worker"
)

// StepPage is what a step's page shows.
type StepPage struct {
	Target       string
	Run          stratus.Run
	Step         runview.StepView
	Attempts     []stratus.Attempt
	Prompt       Doc
	Outputs      []Doc // the projection, then each staged part
	Findings     []findings.Finding
	FindingsNote string
	Gate         string // the evaluator's gate severity
	Degradations []stratus.Degradation
	Log          Doc
}

// MaxShown bounds a file a page shows, bytes; a larger one is named.
const MaxShown = 1 << 20

// step serves GET /runs/{run}/steps/{node}/{visit}.
func (s *Server) step(w http.ResponseWriter, r *http.Request) {
	p, err := s.loadStep(r.Context(), r.PathValue("run"), r.PathValue("node"), r.PathValue("visit"))
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, http.StatusOK, "step.html", p)
}

func (s *Server) loadStep(ctx context.Context, runID, node, visitText string) (*StepPage, error) {
	visit, err := visitOf(visitText)
	if err != nil {
		return nil, err
	}
	v, err := runview.Load(ctx, s.src.Store, runID)
	if err != nil {
		return nil, err
	}
	ref := shortRef(node, visit)
	p := &StepPage{Target: s.src.Target, Run: v.Run}
	found := false
	for _, sv := range v.Steps {
		if sv.Step.StepRef == ref {
			p.Step, found = sv, true
		}
	}
	if !found {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "run %s has no step %s", runID, ref)
	}
	st := p.Step.Step
	if p.Step.Attempt != nil {
		for n := 1; n <= p.Step.Attempt.N; n++ {
			if a, err := s.src.Store.GetAttempt(ctx, st.TID, n); err == nil {
				p.Attempts = append(p.Attempts, a)
			}
		}
	}
	stage := "stages"
	if st.Kind == report.Kind {
		stage = "supervisor"
	}
	logDir := keyOf(report.Dir(v.Run.TaskID), stage, st.Node, fmt.Sprintf("run-%06d", st.Visit))
	if st.Kind == report.Kind {
		logDir = keyOf(report.Dir(v.Run.TaskID), stage, fmt.Sprintf("run-%06d", st.Visit))
	}
	p.Prompt = s.readDoc(ctx, "rendered-prompt.md", keyOf(logDir, "rendered-prompt.md"), MaxShown)
	p.Log = s.readDoc(ctx, "runner.log", keyOf(logDir, "runner.log"), MaxShown)
	if p.Log.Text != "" {
		lines := strings.Split(strings.TrimRight(p.Log.Text, "\n"), "\n")
		if len(lines) > 60 {
			p.Log.Text = "… " + fmt.Sprint(len(lines)-60) + " lines before\n" + strings.Join(lines[len(lines)-60:], "\n")
		}
	}
	env, _ := s.src.Env(ctx, runID)
	if env != nil && env.Config != nil && st.Kind != report.Kind {
		if dir, err := projection.CtxDir(env.Config.Projection.Placement, v.Run.TaskID); err == nil {
			p.Outputs = append(p.Outputs, s.readDoc(ctx, st.Node+".md", keyOf(dir, st.Node+".md"), MaxShown))
			if sv, err := decodeValue(st.Value); err == nil {
				for _, part := range sv.Parts {
					p.Outputs = append(p.Outputs, s.readDoc(ctx, part, keyOf(dir, part), MaxShown))
				}
			}
		}
	}
	if st.Kind == flow.KindEvaluator && p.Step.Attempt != nil && env != nil && env.Flow != nil {
		s.loadFindings(ctx, p, env)
	}
	degs, err := s.src.Store.ListDegradations(ctx, runID)
	if err == nil {
		for _, d := range degs {
			if d.StepRef == st.StepRef {
				p.Degradations = append(p.Degradations, d)
			}
		}
	}
	return p, nil
}

// loadFindings folds the evaluator's latest attempt and reads its
// findings, each marked gating against the node's gate severity.
func (s *Server) loadFindings(ctx context.Context, p *StepPage, env *worker.RunEnv) {
	tail, err := s.src.Store.ListOutput(ctx, p.Step.Step.TID, p.Step.Attempt.N)
	if err != nil || len(tail) == 0 {
		p.FindingsNote = "no output recorded"
		return
	}
	node := env.Flow.Node(p.Step.Step.Node)
	value, err := fold.Fold(p.Step.Step.Node, tail, "")
	if err != nil {
		p.FindingsNote = err.Error()
		return
	}
	fs, err := findings.Parse(value)
	if err != nil {
		p.FindingsNote = err.Error()
		return
	}
	if node != nil {
		p.Gate = worker.PolicyOf(env.Flow, node).Gate
		findings.Mark(fs, p.Gate)
	}
	p.Findings = fs
}

// decodeValue reads a step's value.
func decodeValue(raw []byte) (worker.StepValue, error) {
	var v worker.StepValue
	if len(raw) == 0 {
		return v, fmt.Errorf("no value")
	}
	return v, jsonUnmarshal(raw, &v)
}
