package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/flowgraph"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker"
)

// RunLine is a run of the list.
type RunLine = runview.RunLine

// NodeState is a node as the run's graph colours it: the status of its
// latest visit and how many visits it had.
type NodeState struct {
	flowgraph.Placed
	Status string // pending | running | waiting | done | failed | canceled | skipped
	Label  string // the latest visit's outcome, or its status
	Visits int
	Latest string // step_ref of the latest visit
}

// EdgeState is an edge with its loop's spend.
type EdgeState struct {
	flowgraph.Routed
	Spent int // times the loop edge was taken (a loop edge only)
	// AtLeast says Spent counts the loop's turns over a long run's page
	// only: its source's latest visit recorded no count of the loop.
	AtLeast bool
}

// Bar is one visit on the timeline: its offset and width, percent of the
// run's span.
type Bar struct {
	StepRef, Status, Outcome string
	Left, Width              float64
	Duration                 time.Duration
	Supervisor               bool
}

// Gate is a hitl node waiting for a human.
type Gate struct {
	Node, StepRef, CSRF string
	Signal, Request     string // approval | question, and what is asked
	Upstream            Doc    // the latest upstream output
	Command             string // the shell command that replies (a read-only viewer shows it)
}

// RunPage is what the run page shows.
type RunPage struct {
	Target   string
	Run      stratus.Run
	Status   string
	Spend    lifecycle.Spend
	Duration time.Duration // its active time (stratus.Run.Duration)
	Wall     time.Duration // its start to its end (or now): the timeline's span
	Graph    *flowgraph.Layout
	Nodes    []NodeState
	Edges    []EdgeState
	Steps    []runview.StepView
	Bars     []Bar
	Gates    []Gate
	ReadOnly bool
	Summary  Doc
	FlowNote string // why there is no graph
	Note     string // the run reads interrupted, but that could not be recorded (runview.NotRecordedNote)
	Ended    bool   // the run is terminal
	Why      string // why a run that did not end done stopped: its last failed step's reason, or its status's hint
	// Total is how many steps the run has; First the number (from 1, in
	// creation order) of Steps[0]: Steps, Bars are the page of the run's
	// steps the page shows (its newest runview.PageSteps unless ?upto=).
	// Older and Newer link the pages before and after it ("" for none).
	Total, First int
	Older, Newer string
}

// Last is the number of the page's last step.
func (p *RunPage) Last() int { return p.First + len(p.Steps) - 1 }

// loadRun reads what the run page shows of the steps pg selects: with
// page, everything; without (an event stream's poll, every Poll per open
// page), only the status and the graph's colours — no spend, gates'
// documents or summary read from the sink. What it reads of a long run
// is its page and each node's latest step, not the run (README.md §
// Performance).
func (s *Server) loadRun(ctx context.Context, runID string, page bool, pg runview.Page) (*RunPage, error) {
	// A run whose owner is gone reads interrupted even when the disk is
	// too full to record it (docs/security.md § Output that did not persist).
	v, err := runview.LoadReconciled(ctx, s.src.Store, runID, pg)
	if err != nil {
		return nil, err
	}
	run := v.Run
	p := &RunPage{Target: s.src.Target, Run: run, Status: run.Status, Steps: v.Steps, ReadOnly: s.src.Reply == nil, Ended: stratus.RunTerminal(run.Status),
		Total: v.Total, First: v.First}
	if v.NotRecorded != nil {
		p.Note = runview.NotRecordedNote(v.NotRecorded)
	}
	if e := v.Earlier(); e > 0 {
		p.Older = fmt.Sprintf("/runs/%s?upto=%d", url.PathEscape(run.ID), e)
	}
	if l := v.Later(); l > 0 {
		p.Newer = "/runs/" + url.PathEscape(run.ID)
		if up := p.Last() + max(pg.Limit, 1); up < v.Total {
			p.Newer += fmt.Sprintf("?upto=%d", up)
		}
	}
	end := run.EndedAt
	if end.IsZero() {
		end = time.Now()
	}
	p.Duration, p.Wall = run.Duration(end), end.Sub(run.CreatedAt)
	if v.Waiting() {
		p.Status = runview.StatusWaiting
	}
	// Each node's latest step, as the page shows it when it holds it.
	inPage := map[string]runview.StepView{}
	for _, sv := range v.Steps {
		inPage[sv.Step.TID] = sv
	}
	heads := make([]runview.StepView, len(v.Heads))
	for i, h := range v.Heads {
		sv, ok := inPage[h.TID]
		if !ok {
			sv = runview.StepOf(h)
			if h.Status == stratus.StepRunning && runview.RunsWorker(h.Kind) {
				// A running node's label shows its attempt's progress.
				if sv, err = runview.Describe(ctx, s.src.Store, h); err != nil {
					return nil, err
				}
			}
		}
		heads[i] = sv
	}
	env, err := s.src.Env(ctx, runID)
	if !run.PrunedAt.IsZero() {
		p.FlowNote = "the run was pruned (docs/security.md § Retention): its frozen flow is gone"
	} else if err != nil || env == nil || env.Flow == nil {
		p.FlowNote = fmt.Sprintf("the run's frozen flow cannot be read (%v)", err)
	} else if err := s.drawGraph(ctx, p, env.Flow, heads, page); err != nil {
		return nil, err
	}
	if !page {
		return p, nil
	}
	if p.Spend, err = lifecycle.RunSpend(ctx, s.src.Store, runID); err != nil {
		return nil, err
	}
	p.Bars = bars(run, v.Steps, end)
	// Steps before the page's: the nodes' latest that are older than it.
	known := v.Steps
	if v.Earlier() > 0 {
		var older []runview.StepView
		for _, h := range heads {
			if _, ok := inPage[h.Step.TID]; !ok && (len(v.Steps) == 0 || h.Step.CreatedAt.Before(v.Steps[0].Step.CreatedAt)) {
				older = append(older, h)
			}
		}
		known = append(older, v.Steps...)
	}
	p.Why = why(run, known)
	for _, sv := range heads {
		if sv.Step.Kind == flow.KindHITL && sv.Step.Status == stratus.StepWaiting {
			g := Gate{Node: sv.Step.Node, StepRef: sv.Step.StepRef, CSRF: s.csrfToken(runID, sv.Step.Node)}
			var hv worker.HITLValue
			if json.Unmarshal(sv.Step.Value, &hv) == nil {
				g.Signal, g.Request = hv.Signal, hv.Request
			}
			steps := known
			if _, ok := inPage[sv.Step.TID]; !ok {
				steps = heads // a gate older than the page: the nodes' latest before it
			}
			g.Upstream = s.upstream(ctx, run, env, steps, sv)
			g.Command = s.replyCommand(run.ID, sv.Step.Node, g.Signal)
			p.Gates = append(p.Gates, g)
		}
	}
	p.Summary = s.runDoc(ctx, run, "summary.md", "summary.md", 4<<20)
	return p, nil
}

// drawGraph lays out f and colours each node by its latest visit
// (heads: each node's latest step). A page that holds the whole run counts
// each node's visits and each loop's spend over its steps; a page of a
// longer run takes a node's visits from its latest visit's number and a
// loop's spend from the loop's counter in its source's latest visit's
// input (counted over the page, EdgeState.AtLeast, when it has none),
// and only when spent (an event stream's snapshot sends no edges).
func (s *Server) drawGraph(ctx context.Context, p *RunPage, f *flow.Flow, heads []runview.StepView, spent bool) error {
	g := flowgraph.Build(f)
	p.Graph = g.Layout()
	whole := p.Total == len(p.Steps)
	latest := map[string]runview.StepView{}
	visits := map[string]int{}
	taken := map[[2]string]int{} // node, outcome → times
	for _, sv := range heads {
		if sv.Step.Kind != report.Kind {
			latest[sv.Step.Node] = sv
			visits[sv.Step.Node] = sv.Step.Visit
		}
	}
	if whole {
		clear(visits)
		for _, sv := range p.Steps {
			if sv.Step.Kind == report.Kind {
				continue
			}
			visits[sv.Step.Node]++
			if sv.Outcome != "" {
				taken[[2]string{sv.Step.Node, sv.Outcome}]++
			}
		}
	}
	for _, n := range p.Graph.Nodes {
		ns := NodeState{Placed: n, Status: "pending", Visits: visits[n.ID]}
		if p.Ended {
			ns.Status, ns.Label = "skipped", "not reached"
		}
		if sv, ok := latest[n.ID]; ok {
			ns.Status, ns.Label, ns.Latest = nodeStatus(sv), sv.Outcome, sv.Step.StepRef
			if ns.Label == "" {
				ns.Label = ns.Status
			}
			if a := sv.Attempt; ns.Status == "running" && a != nil && !a.StartedAt.IsZero() {
				// Live progress: the stream sends it as it moves.
				ns.Label = fmt.Sprintf("%s · %d st · %s tok", fmtDuration(time.Since(a.StartedAt)), a.Steps, compact(a.PromptTokens+a.CompletionTokens))
			}
		}
		p.Nodes = append(p.Nodes, ns)
	}
	pageTaken := map[[2]string]int{} // over the page, when the loop's count is not recorded
	for _, sv := range p.Steps {
		if sv.Step.Kind != report.Kind && sv.Outcome != "" {
			pageTaken[[2]string{sv.Step.Node, sv.Outcome}]++
		}
	}
	for _, e := range p.Graph.Edges {
		es := EdgeState{Routed: e}
		switch {
		case e.Loop == "":
		case whole:
			es.Spent = taken[[2]string{e.From, e.Outcome}]
		case spent:
			// A long run's page: the loop's counter as its source's latest
			// visit was dispatched with it ($.loops of the step's input),
			// and that visit's own turn, one read however long the run.
			sv, ok := latest[e.From]
			n, counted := loopCount(sv.Step.Input, e.Loop)
			if !ok || !counted {
				n, es.AtLeast = pageTaken[[2]string{e.From, e.Outcome}], true
			} else if sv.Outcome == e.Outcome {
				n++
			}
			es.Spent = n
		}
		if e.Budget > 0 && es.Spent > e.Budget {
			// The outcome after the budget's last round is not taken back
			// round the loop (the flow's exhaustion path takes it): spent
			// says the rounds the budget paid for, as summary.md does.
			es.Spent = e.Budget
		}
		p.Edges = append(p.Edges, es)
	}
	return nil
}

// loopCount is loop's counter in a step's input ($.loops, as the
// compiled flow keeps it: flow.LoopStateNames); false when it has none.
func loopCount(input json.RawMessage, loop string) (int, bool) {
	var in struct {
		Loops map[string]int `json:"loops"`
	}
	if len(input) == 0 || json.Unmarshal(input, &in) != nil {
		return 0, false
	}
	n, ok := in.Loops[loop]
	return n, ok
}

// nodeStatus is the colour of a visit: a visit that completed with a
// failing verdict (a checks or tool node's fail, an evaluator's rework, a
// report that failed or was invalid) takes the failure colour, not done's.
func nodeStatus(sv runview.StepView) string {
	switch sv.Step.Status {
	case stratus.StepWaiting, stratus.StepParked:
		return "waiting"
	case stratus.StepFailed:
		return "failed"
	case stratus.StepCanceled:
		return "canceled"
	case stratus.StepCompleted:
		switch sv.Outcome {
		case "failed", "invalid", nodeexec.Fail, "rework":
			return "failed"
		case "skipped":
			return "skipped"
		}
		return "done"
	}
	return "running"
}

// bars places each visit on the run's span.
func bars(run stratus.Run, steps []runview.StepView, end time.Time) []Bar {
	span := end.Sub(run.CreatedAt)
	if span <= 0 {
		span = time.Millisecond
	}
	var out []Bar
	for _, sv := range steps {
		start, stop := sv.Span() // the step table's and status's duration too
		if stop.IsZero() {
			stop = end
		}
		b := Bar{StepRef: sv.Step.StepRef, Status: nodeStatus(sv), Outcome: sv.Outcome, Duration: stop.Sub(start), Supervisor: sv.Step.Kind == report.Kind}
		if b.Supervisor && sv.Job != "" {
			b.StepRef = sv.Step.StepRef + " " + sv.Job
		}
		b.Left = 100 * float64(start.Sub(run.CreatedAt)) / float64(span)
		b.Width = max(100*float64(stop.Sub(start))/float64(span), 0.4)
		b.Left = min(max(b.Left, 0), 99.6)
		b.Width = min(b.Width, 100-b.Left)
		out = append(out, b)
	}
	return out
}

// upstream is the output of the latest step that ended before gate.
func (s *Server) upstream(ctx context.Context, run stratus.Run, env *worker.RunEnv, steps []runview.StepView, gate runview.StepView) Doc {
	if env == nil || env.Config == nil {
		return Doc{Note: "the run's config cannot be read"}
	}
	dir, err := projection.RunCtxDir(env.Config.Projection.Placement, run)
	if err != nil {
		return Doc{Note: err.Error()}
	}
	var prev *runview.StepView
	for i := range steps {
		sv := steps[i]
		if sv.Step.TID == gate.Step.TID {
			break
		}
		if sv.Step.Kind != report.Kind && sv.Step.Status == stratus.StepCompleted && runview.RunsWorker(sv.Step.Kind) {
			prev = &steps[i]
		}
	}
	if prev == nil {
		return Doc{Note: "no step ran before it"}
	}
	// The run's own ctx file: on a stack's bucket, under the run (sink.RunKey).
	return s.readDoc(ctx, prev.Step.StepRef+": "+prev.Step.Node+".md", sink.RunKey(s.src.Sink, run.ID, keyOf(dir, prev.Step.Node+".md")), 1<<20)
}

// run serves GET /runs/{run}.
// RUN may be a prefix of a run id, a task id or latest, as on the command
// line (README § Naming a run): the page redirects to the run's own.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	// A bad page is a 400 before the run is looked up, however it is named.
	pg, err := pageOf(r.URL.Query())
	if err != nil {
		s.fail(w, err)
		return
	}
	if ref := r.PathValue("run"); lifecycle.CheckRunID(ref) != nil {
		run, err := runview.Resolve(r.Context(), s.src.Store, ref)
		if err != nil {
			s.fail(w, err)
			return
		}
		if run.ID != ref {
			to := "/runs/" + url.PathEscape(run.ID)
			if r.URL.RawQuery != "" {
				to += "?" + r.URL.RawQuery // the page asked for (?upto=) stays asked for
			}
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
	}
	// The run, or its 404, before the first byte; the page's head goes
	// out before the run's steps are read (README.md § Performance).
	run, err := s.src.Store.GetRun(r.Context(), r.PathValue("run"))
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	s.tmpl.ExecuteTemplate(w, "run-head", &RunPage{Target: s.src.Target, Run: run})
	if fl, ok := w.(http.Flusher); ok {
		fl.Flush()
	}
	p, err := s.loadRun(r.Context(), run.ID, true, pg)
	var buf bytes.Buffer
	if err == nil {
		err = s.tmpl.ExecuteTemplate(&buf, "run-body", p)
	}
	if err != nil {
		// The status went out with the head: the error is the page's body.
		buf.Reset()
		s.tmpl.ExecuteTemplate(&buf, "run-fail", map[string]any{"Status": http.StatusInternalServerError, "Message": stratus.ErrorMessage(err)})
	}
	w.Write(buf.Bytes())
}

// pageOf is the page of steps a run page's query asks for: ?upto=N, the
// page that ends at step N (from 1, in creation order), else the newest
// (runview.Newest). Errors: EINVALID naming upto for anything but a
// number 1 or more.
func pageOf(q url.Values) (runview.Page, error) {
	pg := runview.Newest
	if !q.Has("upto") {
		return pg, nil
	}
	v := q.Get("upto")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return pg, stratus.FieldErrorf(stratus.EINVALID, "upto", "upto %q is not a step number; valid: 1, 2, ... (the page ends at that step)", v)
	}
	pg.Upto = n
	return pg, nil
}

// Snapshot is one message of a run's event stream: the run's status and
// each node's colour; a client reloads when Steps changes.
type Snapshot struct {
	Status string            `json:"status"`
	Steps  int               `json:"steps"`
	Nodes  map[string]string `json:"nodes"`
	Labels map[string]string `json:"labels"`
	Ended  bool              `json:"ended"`
}

func (s *Server) snapshot(ctx context.Context, runID string) (Snapshot, error) {
	// The newest step only: the stream sends the run's status, its step
	// count and each node's colour (its latest step), not the steps.
	p, err := s.loadRun(ctx, runID, false, runview.Page{Limit: 1})
	if err != nil {
		return Snapshot{}, err
	}
	sn := Snapshot{Status: p.Status, Steps: p.Total, Nodes: map[string]string{}, Labels: map[string]string{}, Ended: stratus.RunTerminal(p.Run.Status)}
	for _, n := range p.Nodes {
		sn.Nodes[n.ID] = n.Status
		sn.Labels[n.ID] = n.Label
	}
	return sn, nil
}

// events serves GET /runs/{run}/events: server-sent events, one
// "snapshot" whenever the run changes (read every Poll), until the run
// ends or the client goes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("run")
	first, err := s.snapshot(r.Context(), runID)
	if err != nil {
		s.fail(w, err)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	send := func(sn Snapshot) {
		b, _ := json.Marshal(sn)
		fmt.Fprintf(w, "event: snapshot\ndata: %s\n\n", b)
		fl.Flush()
	}
	send(first)
	last, _ := json.Marshal(first)
	t := time.NewTicker(s.src.Poll)
	defer t.Stop()
	for !first.Ended {
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
		sn, err := s.snapshot(r.Context(), runID)
		if err != nil {
			return
		}
		if b, _ := json.Marshal(sn); string(b) != string(last) {
			send(sn)
			last = b
		}
		first.Ended = sn.Ended
	}
}

// visitOf parses a step URL's visit.
func visitOf(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || strconv.Itoa(n) != s { // one spelling: no sign, no leading zero
		return 0, stratus.FieldErrorf(stratus.EINVALID, "visit", "%q is not a visit number; valid: 1, 2, ...", s)
	}
	return n, nil
}

// shortRef is a step's node and visit, for titles.
func shortRef(node string, visit int) string { return node + "#" + strconv.Itoa(visit) }

// why is what a run page says beside a status other than done: the last
// failed step and its reason, or how to go on.
func why(run stratus.Run, steps []runview.StepView) string {
	if !run.PrunedAt.IsZero() {
		return "pruned " + run.PrunedAt.Format("2006-01-02 15:04") + ": its steps and files were removed after retention_days (it ended " + run.EndedAt.Format("2006-01-02 15:04") + ")"
	}
	if run.Status == stratus.RunDone || run.Status == stratus.RunRunning {
		return ""
	}
	for i := len(steps) - 1; i >= 0; i-- {
		if sv := steps[i]; sv.Step.Status == stratus.StepFailed && sv.Reason != "" {
			return sv.Step.StepRef + " failed: " + sv.Reason
		}
	}
	switch run.Status {
	case stratus.RunInterrupted:
		return "interrupted: stratus resume " + run.ID + " goes on from where it stopped"
	case stratus.RunManualActionRequired:
		return "it needs a human: see the summary below; stratus resume " + run.ID + " goes on"
	}
	return ""
}

// compact writes a count short enough for a node box: 950, 1.2k, 3.4M.
func compact(n int64) string {
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 1_000_000:
		return strconv.FormatFloat(float64(n)/1000, 'f', 1, 64) + "k"
	}
	return strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64) + "M"
}
