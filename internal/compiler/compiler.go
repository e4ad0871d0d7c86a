package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// Defaults and fixed values of the emitted definition.
const (
	// DefaultQueueURL is a definition substitution: SAM (or the embedded
	// executor) replaces it with the dispatch queue's URL.
	DefaultQueueURL = "${DispatchQueueUrl}"
	// DefaultTimeoutSeconds is the deadline a node without timeout_seconds
	// gets in the state machine: a 6 h backstop (with the grace). The real
	// engine deadline of such a node comes from config.yaml (the provider's
	// timeout_seconds, else 600 s), which a compiled definition cannot know;
	// the runner enforces it, and HeartbeatSeconds catches a dead worker.
	DefaultTimeoutSeconds   = 6*3600 - TimeoutGraceSeconds
	DefaultHeartbeatSeconds = 300
	// TimeoutGraceSeconds is added to every node's engine deadline to form
	// the Task state's TimeoutSeconds: the queue wait, the worker launch and
	// the submit round trip happen outside the engine's own deadline.
	TimeoutGraceSeconds = 300

	// DispatchResource is the Task resource of every node state.
	DispatchResource = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"

	// Error names of the two Fail terminals.
	ErrFailed               = "stratus.Failed"
	ErrManualActionRequired = "stratus.ManualActionRequired"

	maxStateName = 80 // Step Functions limit on a state name
)

// Options tunes Compile. The zero value gives the defaults above.
type Options struct {
	QueueURL              string // default DefaultQueueURL
	DefaultTimeoutSeconds int    // deadline when a node sets none; default DefaultTimeoutSeconds
	HeartbeatSeconds      int    // HeartbeatSeconds of every non-hitl Task state; default 300
}

// Compile turns a flow into an Amazon States Language definition (JSONPath
// query language): deterministic JSON indented by two spaces, keys in a
// fixed order, ending in a newline. Compiling the same flow twice gives the
// same bytes.
//
// The machine, with state names that read like the flow:
//
//   - "init" (Pass): $.loops = {<counter>: 0, ...}, one counter per loop an
//     edge names plus <from>_<outcome> per edge with an inline budget; then
//     the entry node.
//   - "<node id>" (Task, one per node): sends {run_id, node, kind,
//     task_token} to the dispatch queue and waits for the task token; the
//     step's small value lands in $.last. TimeoutSeconds is the node's
//     deadline (agent/tool timeout_seconds, hitl timeout_s, else
//     DefaultTimeoutSeconds) plus TimeoutGraceSeconds; HeartbeatSeconds on
//     every kind but hitl (a human sends no heartbeat). Catch States.ALL →
//     "failed", or → "manual_action_required" for checks, tool and hitl
//     nodes, whose timeouts and launch errors are infrastructure failures
//     that park the task (reference.md § tool node, § hitl node).
//     Next: the one unconditional edge's target; "<id>.route" when the node
//     has outcome edges; "done" for a publish node or a node without edges.
//   - "<id>.route" (Choice on $.last.outcome): one StringEquals rule per
//     outcome edge in flow order; Default the unconditional edge's target,
//     else "manual_action_required" (fail closed: an outcome no edge names,
//     such as an evaluator's "invalid", parks the run).
//   - "<loop>.budget" (Choice) and "<loop>.count" (Pass) per loop and
//     target, suffixed ".<target>" when one loop feeds several targets: the
//     budget state sends a spent loop ($.loops.<loop> >= budget) to
//     "manual_action_required", the count state adds one with
//     States.MathAdd and goes on to the target. Every edge with a loop or an
//     inline budget enters its target through these.
//   - "done" (Succeed), "failed" and "manual_action_required" (Fail with
//     ErrFailed / ErrManualActionRequired), always emitted. When a node id
//     takes one of the names init, done, failed or manual_action_required
//     (worc's merge flow calls its publish node "done"), that fixed state is
//     named "run.<name>" instead; executors should tell the terminals apart
//     by their Error names, not their state names.
//
// Loop counters are JSONPath member names, so any character outside
// [A-Za-z0-9_] in a loop name (or in <from>_<outcome>) becomes '_'.
//
// Errors are *stratus.Error with code EINVALID: a nil flow, negative
// options, a flow with fatal validation problems (flow.Validate without a
// role-file root; each problem listed, one per line), two loops whose
// counter names collide, or a state name over 80 characters.
func Compile(f *flow.Flow, opt Options) ([]byte, error) {
	if f == nil {
		return nil, stratus.Errorf(stratus.EINVALID, "compile: no flow")
	}
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	if probs := flow.Fatal(flow.Validate(f, flow.ValidateOptions{})); len(probs) > 0 {
		lines := []string{fmt.Sprintf("flow %q cannot be compiled: %d fatal problem(s):", f.Name, len(probs))}
		for _, p := range probs {
			lines = append(lines, p.String())
		}
		return nil, stratus.Errorf(stratus.EINVALID, "%s", strings.Join(lines, "\n"))
	}
	c := &compiler{f: f, opt: opt}
	if err := c.plan(); err != nil {
		return nil, err
	}
	m := c.machine()
	for _, s := range m.States {
		if len([]rune(s.Key)) > maxStateName {
			return nil, stratus.Errorf(stratus.EINVALID, "flow %q: state name %q is longer than %d characters; shorten the node id or loop name", f.Name, s.Key, maxStateName)
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("compile %s: encode: %w", f.Name, err)
	}
	return buf.Bytes(), nil
}

func (o *Options) defaults() error {
	if o.QueueURL == "" {
		o.QueueURL = DefaultQueueURL
	}
	if o.DefaultTimeoutSeconds == 0 {
		o.DefaultTimeoutSeconds = DefaultTimeoutSeconds
	}
	if o.HeartbeatSeconds == 0 {
		o.HeartbeatSeconds = DefaultHeartbeatSeconds
	}
	switch {
	case o.DefaultTimeoutSeconds < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "DefaultTimeoutSeconds", "%d; want a positive number of seconds (0 means %d)", o.DefaultTimeoutSeconds, DefaultTimeoutSeconds)
	case o.HeartbeatSeconds < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "HeartbeatSeconds", "%d; want a positive number of seconds (0 means %d)", o.HeartbeatSeconds, DefaultHeartbeatSeconds)
	case o.HeartbeatSeconds >= o.DefaultTimeoutSeconds+TimeoutGraceSeconds:
		return stratus.FieldErrorf(stratus.EINVALID, "HeartbeatSeconds", "%d must be less than the shortest Task timeout, DefaultTimeoutSeconds+%d = %d",
			o.HeartbeatSeconds, TimeoutGraceSeconds, o.DefaultTimeoutSeconds+TimeoutGraceSeconds)
	}
	return nil
}

// loop is one budgeted way into a target: the counter it charges and the
// pair of states that check and charge it.
type loop struct {
	counter string // member of $.loops
	budget  int
	target  string // node id
	check   string // "<counter>.budget[.<target>]"
	charge  string // "<counter>.count[.<target>]"
}

type compiler struct {
	f   *flow.Flow
	opt Options

	init, done, failed, manual string // fixed state names, renamed on collision

	counters []string            // sorted
	loops    map[[2]string]*loop // (counter, target) → loop
}

var unsafeCounter = regexp.MustCompile(`[^A-Za-z0-9_]`)

// counterOf returns the $.loops member an edge charges, or "" for an edge
// that is not budgeted, and what it stands for (for collision messages).
func counterOf(e flow.Edge) (counter, source string) {
	switch {
	case e.Loop != "":
		return unsafeCounter.ReplaceAllString(e.Loop, "_"), fmt.Sprintf("loop %q", e.Loop)
	case e.Budget != nil:
		return unsafeCounter.ReplaceAllString(e.From+"_"+e.Outcome, "_"), fmt.Sprintf("the inline budget of edge %s -> %s (%s)", e.From, e.To, e.Outcome)
	}
	return "", ""
}

// plan names the fixed states and the loop states.
func (c *compiler) plan() error {
	name := func(base string) string {
		if c.f.Node(base) != nil {
			return "run." + base
		}
		return base
	}
	c.init, c.done, c.failed, c.manual = name("init"), name("done"), name("failed"), name("manual_action_required")

	sources := map[string]string{}   // counter → what it stands for
	targets := map[string][]string{} // counter → distinct targets, in edge order
	c.loops = map[[2]string]*loop{}
	for _, e := range c.f.Edges {
		counter, source := counterOf(e)
		if counter == "" {
			continue
		}
		if prev, ok := sources[counter]; ok && prev != source {
			return stratus.Errorf(stratus.EINVALID, "flow %q: %s and %s both count in $.loops.%s; rename one", c.f.Name, prev, source, counter)
		}
		sources[counter] = source
		if !slices.Contains(targets[counter], e.To) {
			targets[counter] = append(targets[counter], e.To)
		}
		budget := c.f.Budgets[e.Loop]
		if e.Budget != nil {
			budget = *e.Budget
		}
		c.loops[[2]string{counter, e.To}] = &loop{counter: counter, budget: budget, target: e.To}
	}
	for counter := range sources {
		c.counters = append(c.counters, counter)
	}
	slices.Sort(c.counters)
	for _, l := range c.loops {
		l.check, l.charge = l.counter+".budget", l.counter+".count"
		if len(targets[l.counter]) > 1 {
			l.check += "." + l.target
			l.charge += "." + l.target
		}
	}
	return nil
}

// entry returns the state an edge leads to: its target, or the budget
// check in front of the target when the edge is budgeted.
func (c *compiler) entry(e flow.Edge) string {
	if counter, _ := counterOf(e); counter != "" {
		return c.loops[[2]string{counter, e.To}].check
	}
	return e.To
}

func (c *compiler) machine() machine {
	f := c.f
	m := machine{
		Comment: fmt.Sprintf("Stratus flow %s (task_type %s)", f.Name, f.TaskType),
		StartAt: c.init,
	}
	result := make(object, 0, len(c.counters))
	for _, k := range c.counters {
		result = append(result, member{k, 0})
	}
	m.States = append(m.States, member{c.init, initState{Type: "Pass", Result: result, ResultPath: "$.loops", Next: f.Entry().ID}})

	emitted := map[string]bool{}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		out := f.Out(n.ID)
		var uncond *flow.Edge
		var routed []flow.Edge
		for j := range out {
			if out[j].Outcome == "" {
				uncond = &out[j]
			} else {
				routed = append(routed, out[j])
			}
		}
		next := c.done
		switch {
		case n.Kind == flow.KindPublish || len(out) == 0:
		case len(routed) > 0:
			next = n.ID + ".route"
		default:
			next = c.entry(*uncond)
		}
		m.States = append(m.States, member{n.ID, c.task(n, next)})

		if next == n.ID+".route" {
			ch := choiceState{Type: "Choice", Default: c.manual}
			for _, e := range routed {
				ch.Choices = append(ch.Choices, stringRule{Variable: "$.last.outcome", StringEquals: e.Outcome, Next: c.entry(e)})
			}
			if uncond != nil {
				ch.Default = c.entry(*uncond)
			}
			m.States = append(m.States, member{n.ID + ".route", ch})
		}
		if n.Kind == flow.KindPublish {
			continue
		}
		for _, e := range out {
			counter, _ := counterOf(e)
			if counter == "" {
				continue
			}
			l := c.loops[[2]string{counter, e.To}]
			if emitted[l.check] {
				continue
			}
			emitted[l.check] = true
			m.States = append(m.States,
				member{l.check, choiceState{Type: "Choice",
					Choices: []any{numericRule{Variable: "$.loops." + l.counter, NumericGreaterThanEquals: l.budget, Next: c.manual}},
					Default: l.charge}},
				member{l.charge, c.count(l)})
		}
	}
	// Only the terminals some state routes to: Step Functions (and the
	// embedded executor) reject a definition with an unreachable state.
	body, _ := json.Marshal(m.States)
	for _, t := range []member{
		{c.done, succeedState{Type: "Succeed"}},
		{c.failed, failState{Type: "Fail", Error: ErrFailed, Cause: "a step failed or timed out"}},
		{c.manual, failState{Type: "Fail", Error: ErrManualActionRequired,
			Cause: "a budget ran out, a gate could not decide, or an infrastructure step failed"}},
	} {
		ref, _ := json.Marshal(t.Key)
		if bytes.Contains(body, append([]byte(`"Next":`), ref...)) || bytes.Contains(body, append([]byte(`"Default":`), ref...)) {
			m.States = append(m.States, t)
		}
	}
	return m
}

func (c *compiler) task(n *flow.Node, next string) taskState {
	deadline := c.opt.DefaultTimeoutSeconds
	switch {
	case (n.Kind == flow.KindAgent || n.Kind == flow.KindTool) && n.TimeoutSeconds != nil:
		deadline = *n.TimeoutSeconds
	case n.Kind == flow.KindHITL && n.TimeoutS != nil:
		deadline = *n.TimeoutS
	}
	st := taskState{
		Type:     "Task",
		Resource: DispatchResource,
		Parameters: taskParameters{
			QueueURL: c.opt.QueueURL,
			MessageBody: messageBody{
				RunID:     "$.run_id",
				Node:      n.ID,
				Kind:      n.Kind,
				TaskToken: "$$.Task.Token",
			},
		},
		ResultPath:       "$.last",
		TimeoutSeconds:   deadline + TimeoutGraceSeconds,
		HeartbeatSeconds: c.opt.HeartbeatSeconds,
		Catch:            []catcher{{ErrorEquals: []string{"States.ALL"}, ResultPath: "$.error", Next: c.failed}},
		Next:             next,
	}
	switch n.Kind {
	case flow.KindHITL:
		st.HeartbeatSeconds = 0
		st.Catch[0].Next = c.manual
	case flow.KindTool, flow.KindChecks:
		st.Catch[0].Next = c.manual
	}
	return st
}

// count builds the Pass state that charges one loop: it rewrites $.loops
// whole, copying every counter and adding one to this loop's.
func (c *compiler) count(l *loop) countState {
	params := make(object, 0, len(c.counters))
	for _, k := range c.counters {
		v := "$.loops." + k
		if k == l.counter {
			v = "States.MathAdd($.loops." + k + ", 1)"
		}
		params = append(params, member{k + ".$", v})
	}
	return countState{Type: "Pass", Parameters: params, ResultPath: "$.loops", Next: l.target}
}
