package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
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
	GateURL      string // a waiting hitl step: where its reply forms are
	Prev, Next   string // step refs of the node's previous and next visits ("" none)
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
	for _, sv := range v.Steps {
		if sv.Step.Node == node && sv.Step.Kind == p.Step.Step.Kind {
			switch sv.Step.Visit {
			case visit - 1:
				p.Prev = sv.Step.StepRef
			case visit + 1:
				p.Next = sv.Step.StepRef
			}
		}
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
	logDir := keyOf(stage, st.Node, fmt.Sprintf("run-%06d", st.Visit)) // in the run's logs dir (runDoc)
	if st.Kind == report.Kind {
		logDir = keyOf(stage, fmt.Sprintf("run-%06d", st.Visit))
	}
	// The prompt and the outputs are this visit's own, from the store (a
	// later visit, or a later run of the same task, rewrites the ctx dir
	// and the logs' files).
	p.Prompt = Doc{Name: "rendered prompt", Note: "no prompt recorded"}
	if a := p.Step.Attempt; a != nil && a.Prompt != "" {
		p.Prompt = s.doc("prompt.md", []byte(a.Prompt))
	}
	p.Log = s.runDoc(ctx, v.Run, "runner.log", keyOf(logDir, "runner.log"), MaxShown)
	if p.Log.Text != "" {
		lines := logging.Lines(p.Log.Text)
		for i, l := range lines {
			lines[i] = logging.Render(l) // the runner's JSON records as sentences
		}
		p.Log.Text = strings.Join(lines, "\n")
		if len(lines) > 60 {
			p.Log.Text = "… " + english.Plural(len(lines)-60, "line") + " before\n" + strings.Join(lines[len(lines)-60:], "\n")
		}
	}
	env, _ := s.src.Env(ctx, runID)
	if a := p.Step.Attempt; a != nil {
		p.Outputs = s.tailDocs(ctx, st, a.N)
	}
	switch {
	case st.Kind == flow.KindHITL:
		var hv worker.HITLValue
		if json.Unmarshal(st.Value, &hv) == nil && hv.Request != "" {
			d := Doc{Name: hv.Signal, Text: hv.Request}
			if hv.Answer != "" {
				d.Text += "\n\nanswer: " + hv.Answer
			}
			d.Text = safetext.Block(d.Text) // docs/security.md § Text an engine wrote
			p.Outputs = append(p.Outputs, d)
		}
		if st.Status == stratus.StepWaiting {
			p.GateURL = "/runs/" + url.PathEscape(runID) + "#gate-" + st.Node
		}
	case st.Kind == flow.KindPublish && env != nil:
		p.Outputs = append(p.Outputs, s.runDoc(ctx, v.Run, "summary.md", "summary.md", MaxShown))
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

// tailDocs are the outputs an attempt recorded: each staged part (the
// last write of each name) and the final body.
func (s *Server) tailDocs(ctx context.Context, st stratus.Step, attempt int) []Doc {
	tail, err := s.src.Store.ListOutput(ctx, st.TID, attempt)
	if err != nil {
		return []Doc{{Name: "output", Note: err.Error()}}
	}
	var docs []Doc
	at := map[string]int{}
	for _, e := range tail {
		switch e.Kind {
		case stratus.OutputArtifact:
			d := s.doc(e.Name, e.Body)
			if i, seen := at[e.Name]; seen {
				docs[i] = d
			} else {
				at[e.Name] = len(docs)
				docs = append(docs, d)
			}
		case stratus.OutputFinal:
			name := st.Node + ".md (final)"
			if !e.OK {
				name = "failure"
			}
			d := s.doc(st.Node+".md", e.Body)
			d.Name = name
			docs = append(docs, d)
		}
	}
	return docs
}
