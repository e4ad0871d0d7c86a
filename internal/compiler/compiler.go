package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/retry"
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
	// DefaultHITLTimeoutSeconds is how long a human is waited for when a
	// hitl node sets no timeout_s, and for every agent's hitl request
	// (config.yaml hitl.timeout_seconds; its default, 24 h).
	DefaultHITLTimeoutSeconds = 86400
	// HITLRounds bounds the rounds of one agent's hitl loop (a question
	// answered or an approval denied sends the agent back to work): the
	// fourth request parks the run at manual_action_required.
	HITLRounds = 3

	// DispatchResource is the Task resource of every node state.
	DispatchResource = "arn:aws:states:::sqs:sendMessage.waitForTaskToken"
	// StopResource is the Task resource of a worker's "<node>.stop"
	// state: a plain send (request-response, no task token) to the same
	// dispatch queue.
	StopResource = "arn:aws:states:::sqs:sendMessage"
	// StopSuffix names the state a worker state's Catch passes first:
	// "<node>.stop". Node ids never hold a '.'.
	StopSuffix = ".stop"
	// KindStop is the MessageBody kind of a "<node>.stop" state: the
	// dispatch side stops the node's running worker (the ECS task) and
	// records why. The message carries no task token.
	KindStop = "stop"
	// StopTimeoutSeconds bounds a "<node>.stop" send.
	StopTimeoutSeconds = 60

	// Error names of the two Fail terminals.
	ErrFailed               = "stratus.Failed"
	ErrManualActionRequired = "stratus.ManualActionRequired"
	// ErrInfrastructure is the error a worker state fails with when its
	// worker could not be started for want of capacity or under throttling
	// (after the launcher's retries; internal/launch.ErrInfrastructure): an
	// infrastructure failure, caught straight to manual_action_required
	// (there is no worker to stop) and never charged to a rework budget.
	ErrInfrastructure = "stratus.InfrastructureFailed"
	// ErrCapReached is the error a worker state fails with when the run
	// has reached its cost or token cap (config.yaml limits, the task's
	// max_cost_usd / max_tokens) before the step's worker starts: caught
	// straight to "manual_action_required" on every worker state, a
	// best_effort agent's included, so no further step runs; a resume
	// with a higher cap goes on from there (README.md § Cost and token caps).
	ErrCapReached = "stratus.CapReached"
	// ErrMergeBlocked is the error a publish state fails with when the
	// pull request was opened but the merge asked for (git.auto_merge) was
	// refused — a protected branch, a conflict: caught to
	// manual_action_required with the pull request open, never failed
	// (worc configuration.md § `git`).
	ErrMergeBlocked = "stratus.MergeBlocked"

	// The transient error names (worc configuration.md §
	// agents.retry): a worker state fails with one of them when its
	// attempt failed transiently and the retry policy (internal/retry)
	// chose another attempt — the same provider or the next one. Every
	// worker state's first Retrier matches them, with the policy's
	// numbers (retry.Policy.TransientRetrier).
	ErrProviderUnavailable = "stratus.ProviderUnavailable"
	ErrRateLimited         = "stratus.RateLimited"
	ErrNetworkUnavailable  = "stratus.NetworkUnavailable"
	// ErrBlocked is the error a worker state fails with when every
	// provider it may run on is unavailable or rate-limited: its Cause is
	// retry.BlockedCause as JSON ({"wait_s": int, "retry_at": RFC3339,
	// "reason": text}); the state's Catch parks the step in "<node>.park"
	// and "<node>.wait", then enters the state again.
	ErrBlocked = "stratus.Blocked"
	// ErrBlockedTimeout is the error a worker state fails with when its
	// step has been parked agents.retry.max_blocked_s in all: caught
	// straight to "manual_action_required".
	ErrBlockedTimeout = "stratus.BlockedTimeout"
	// The errors Step Functions' SQS integration reports when
	// sqs:sendMessage fails (throttled, the queue unreachable): the
	// infrastructure Retrier of every Task state retries them.
	ErrSQSClient = "SQS.SdkClientException"
	ErrSQSAWS    = "SQS.AmazonSQSException"
	// ParkSuffix and WaitSuffix name a worker's park states: "<node>.park"
	// (Pass: the Blocked cause parsed into $.last.wait) and "<node>.wait"
	// (Wait: $.last.wait.wait_s seconds, then the node's state again).
	ParkSuffix = ".park"
	WaitSuffix = ".wait"

	maxStateName = flow.MaxStateName // Step Functions limit on a state name

	// ResumeState is the StartAt of every machine ("run.resume" when a
	// node takes the name): a Choice that sends an execution whose input
	// has ResumeAtField to the dispatch state it names, and any other to
	// "init". This is how a stopped run resumes on both runtimes
	// (README.md § Durable runs): moto 5.2.1 has no RedriveExecution and
	// LocalStack answers it 501, while a new execution entering at a state
	// works everywhere.
	ResumeState = flow.ResumeState
	// ResumeAtField is the member of the execution input naming the state
	// to enter: {"resume_at": "<state>", ...the state's input}.
	ResumeAtField = "resume_at"
)

// Outcomes and names the compiled machine shares with the worker that
// completes its Task states (internal/worker), reference.md § agent node
// (hitl) and flow-authoring.md § What a node returns (the human_input
// contract).
const (
	// OutcomeHumanInput is an agent step's outcome when its report asks a
	// human (a question or an approval): the machine waits in "<node>.hitl".
	OutcomeHumanInput = "human_input"
	// Outcomes of a "<node>.hitl" step: a question answered, an approval
	// given or denied.
	OutcomeAnswered = "answered"
	OutcomeApprove  = "approve"
	OutcomeDeny     = "deny"
	// HITLSuffix makes the name of an agent's hitl Task state, and of the
	// step that waits there: "<node>.hitl". Node ids never hold a '.'.
	HITLSuffix = ".hitl"
	// KindHITL is the MessageBody kind of a Task that waits for a human:
	// a hitl node, or an agent's "<node>.hitl" state.
	KindHITL = flow.KindHITL
	// GlobalBudget is the budget the global backstop counts in when the
	// flow's decomposition names no shared_budget.
	GlobalBudget = flow.GlobalBudget
)

// Options tunes Compile. The zero value gives the defaults above.
type Options struct {
	QueueURL              string // default DefaultQueueURL
	DefaultTimeoutSeconds int    // deadline when a node sets none; default DefaultTimeoutSeconds
	HeartbeatSeconds      int    // HeartbeatSeconds of every non-hitl Task state; default 300
	// HITLTimeoutSeconds is the human's deadline when a hitl node sets no
	// timeout_s, and of every agent's "<node>.hitl" wait (config.yaml
	// hitl.timeout_seconds); default DefaultHITLTimeoutSeconds.
	HITLTimeoutSeconds int
	// MaxFixCycles (config.yaml agents.max_fix_cycles) caps every loop
	// budget: the machine checks min(flow budget, MaxFixCycles). 0 = no cap.
	MaxFixCycles int
	// Retry is the run's retry policy (config.yaml agents.retry and
	// agents.max_stage_attempts, retry.FromConfig): the numbers of every
	// worker state's transient Retrier. nil: worc's defaults.
	Retry *retry.Policy
}

// Compile turns a flow into an Amazon States Language definition (JSONPath
// query language): deterministic JSON indented by two spaces, keys in a
// fixed order, ending in a newline. Compiling the same flow twice gives the
// same bytes.
//
// The machine, with state names that read like the flow:
//
//   - "init" (Pass): $.loops = {<counter>: 0, ...}, one counter per loop an
//     edge names, plus <from>_<outcome> per edge with an inline budget,
//     <node>_hitl per agent with a hitl grant, and the global backstop's
//     counter; then the entry node. A flow with decomposition then passes
//     "init.subtask" (Pass): $.subtask = {order: 0, count: 0}.
//   - "<node id>" (Task, one per node): sends {run_id, node, kind,
//     task_token} (plus subtask_order = $.subtask.order in a flow with
//     decomposition) to the dispatch queue and waits for the task token;
//     the step's small value lands in $.last. TimeoutSeconds is the node's
//     deadline (agent/tool timeout_seconds; hitl timeout_s, else
//     Options.HITLTimeoutSeconds; else DefaultTimeoutSeconds) plus
//     TimeoutGraceSeconds; HeartbeatSeconds on every kind but hitl (a human
//     sends no heartbeat). Catch States.ALL → "failed", or →
//     "manual_action_required" for checks, tool and hitl nodes, whose
//     timeouts and launch errors are infrastructure failures that park the
//     task (reference.md § tool node, § hitl node), or → the node's
//     unconditional successor for a best_effort agent (reference.md § agent
//     node: tolerate an infrastructure failure and continue; $.error keeps
//     the error). Next: the one unconditional edge's target; "<id>.route"
//     when the node has outcome edges, or is a gate without edges; "done"
//     for a publish node or an agent without edges.
//   - "<node id>.stop" (Task, one per worker node: agent, evaluator,
//     checks, tool), right after the node's state: its Catch goes here first
//     (docs/architecture.md § The path of one step, 10: a state that fails or
//     times out stops its worker before the failure routes). A plain
//     sqs:sendMessage (StopResource, no task token) of {run_id, node, kind:
//     "stop", error: $.error} to the dispatch queue, ResultPath null (the
//     state's data passes through, $.error included), TimeoutSeconds
//     StopTimeoutSeconds; Next, and its own Catch (States.ALL, ResultPath null:
//     a stop that cannot be sent does not change the route), the Catch's
//     original target. Unless that target continues the run (a best_effort
//     agent), a worker state also catches ErrInfrastructure first, straight to
//     "manual_action_required": the worker was never started, and an
//     infrastructure failure parks the task rather than failing it or charging
//     a loop. Every worker state catches ErrCapReached first the same way (a
//     reached cost or token cap parks the run, best_effort or not).
//   - Retry on every Task state (worc configuration.md § agents.retry; developer
//     guide § Handling errors): last, the infrastructure Retrier —
//     ErrInfrastructure, ErrSQSClient, ErrSQSAWS; 5 s doubling to 60 s,
//     3 retries (retry.InfrastructureRetrier). A worker state has first
//     the transient Retrier — ErrProviderUnavailable, ErrRateLimited,
//     ErrNetworkUnavailable; IntervalSeconds ceil(base_delay_s),
//     BackoffRate 2, MaxDelaySeconds ceil(max_delay_s), MaxAttempts
//     max_stage_attempts × (max_attempts + 1) − 1
//     (retry.Policy.TransientRetrier; omitted when that is 0). Every
//     dispatch message carries retry_count = $$.State.RetryCount.
//   - A worker state's Catch starts with ErrBlocked (ResultPath $.last) →
//     "<node>.park" and ErrBlockedTimeout (ResultPath $.error) →
//     "manual_action_required". "<node>.park" (Pass) sets $.last to
//     {parked: <node>, wait: States.StringToJson($.last.Cause)};
//     "<node>.wait" (Wait) waits $.last.wait.wait_s seconds, then enters
//     the node's state again, whose retries start afresh.
//
// History budget (docs/architecture.md § Limits: 25,000 events per execution):
// a worker state visit costs 6 events; a step failing transiently at once,
// forever, costs at most retry.Policy.WorstCase — with worc's defaults 698
// events (13 entries of the state, 12 parks, 156 attempts) before it gives up,
// so one such step takes under 3% of the budget and a run stays within it
// unless some 35 step visits each park until agents.retry.max_blocked_s (there
// is no run-wide bound on parked time; past the budget Step Functions fails the
// execution).
//   - "<id>.route" (Choice on $.last.outcome): one StringEquals rule per
//     outcome edge in flow order; Default the unconditional edge's target,
//     else "manual_action_required" (fail closed: an outcome no edge names,
//     such as an evaluator's "invalid", parks the run). A hitl node with
//     signal approval routes its route:approve / route:deny here; a
//     question's outcome "done" takes the unconditional edge. A gate
//     without edges (an evaluator, checks, tool or hitl node: a node whose
//     kind has a flow.PassOutcome) routes here too, with one rule: its
//     pass outcome (accept, pass, route:approve, done) → "done"; Default
//     "manual_action_required" (a failing last gate must not
//     end the run done).
//   - "<loop>.budget" (Choice) and "<loop>.count" (Pass) per loop and
//     target, suffixed ".<target>" when one loop feeds several targets: the
//     budget state sends a spent loop ($.loops.<loop> >= budget, the budget
//     clamped to Options.MaxFixCycles) to "manual_action_required", the
//     count state adds one with States.MathAdd and goes on to the target.
//     Every edge with a loop or an inline budget enters its target through
//     these. The global backstop: when budgets declares
//     global_fix_iterations (or the budget decomposition.shared_budget
//     names), every such edge also charges that counter, and its budget
//     state parks the run when either counter is spent (worc
//     configuration.md: a hard global fix cap across the whole task and
//     all subtasks). MaxFixCycles caps each loop, not the backstop, which
//     is the cap across loops.
//   - An agent with `hitl: {allow_question, allow_approval}` (reference.md
//     § agent node) is followed by "<id>.human_input" (Choice): outcome
//     human_input → "<id>.hitl", anything else → what would have followed
//     the node. "<id>.hitl" (Task, kind "hitl", node <id>, no heartbeat,
//     the hitl deadline, Catch → manual_action_required) waits for the
//     human; its value lands in $.human, so $.last still holds the agent's.
//     "<id>.hitl.route" (Choice on $.human.outcome): "approve" (when the
//     grant allows approval) → what would have followed the node;
//     "answered" and "deny" → back to <id> through the counter <id>_hitl,
//     HITLRounds rounds; anything else → manual_action_required.
//   - Decomposition (reference.md § decomposition): after the proposed_by
//     node, "<id>.decompose" (Choice): $.last.subtasks present, numeric and
//     > 1 → "decompose.start" (Pass: $.subtask = {order: 1, count:
//     $.last.subtasks}) → the region's entry (the sub_flow node an edge
//     from proposed_by enters); else what would have followed the node.
//     Every edge from a sub_flow node to a node outside the region passes
//     "decompose.more" (Choice, suffixed ".<state>" when exits lead to
//     several states): $.subtask.order < $.subtask.count →
//     "decompose.next" (Pass: order + 1 with States.MathAdd), then
//     "decompose.reset" (Pass: the counters of loops whose edges all lie
//     inside the region back to 0, the shared budget and the global
//     backstop kept) → the region's entry; else the edge's own target.
//   - "done" (Succeed), "failed" and "manual_action_required" (Fail with
//     ErrFailed / ErrManualActionRequired), emitted when some state routes
//     to them. When a node id takes one of the names init, done, failed or
//     manual_action_required (worc's merge flow calls its publish node
//     "done"), that fixed state is named "run.<name>" instead; executors
//     should tell the terminals apart by their Error names, not their state
//     names.
//
// Loop counters are JSONPath member names, so any character outside
// [A-Za-z0-9_] in a loop name (or in <from>_<outcome>) becomes '_'.
//
// Errors are *stratus.Error with code EINVALID: a nil flow, negative
// options, a flow with fatal validation problems (flow.Validate without a
// role-file root; each problem listed, one per line), two counters whose
// names collide, a decomposition whose proposed_by has no edge into its
// sub_flow, or a state name over 80 characters.
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
	if o.HITLTimeoutSeconds == 0 {
		o.HITLTimeoutSeconds = DefaultHITLTimeoutSeconds
	}
	switch {
	case o.DefaultTimeoutSeconds < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "DefaultTimeoutSeconds", "%d; want a positive number of seconds (0 means %d)", o.DefaultTimeoutSeconds, DefaultTimeoutSeconds)
	case o.HeartbeatSeconds < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "HeartbeatSeconds", "%d; want a positive number of seconds (0 means %d)", o.HeartbeatSeconds, DefaultHeartbeatSeconds)
	case o.HeartbeatSeconds >= o.DefaultTimeoutSeconds+TimeoutGraceSeconds:
		return stratus.FieldErrorf(stratus.EINVALID, "HeartbeatSeconds", "%d must be less than the shortest Task timeout, DefaultTimeoutSeconds+%d = %d",
			o.HeartbeatSeconds, TimeoutGraceSeconds, o.DefaultTimeoutSeconds+TimeoutGraceSeconds)
	case o.HITLTimeoutSeconds < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "HITLTimeoutSeconds", "%d; want a positive number of seconds (0 means %d)", o.HITLTimeoutSeconds, DefaultHITLTimeoutSeconds)
	case o.MaxFixCycles < 0:
		return stratus.FieldErrorf(stratus.EINVALID, "MaxFixCycles", "%d; want a cap > 0 on every loop budget, or 0 for none", o.MaxFixCycles)
	}
	if o.Retry == nil {
		p := retry.Default()
		o.Retry = &p
	}
	// config.Parse bounds these; a policy built by hand is checked here.
	switch r := o.Retry.TransientRetrier(); {
	case o.Retry.MaxAttempts < 0 || o.Retry.MaxStageAttempts < 1 || r.MaxAttempts > config.MaxStepAttemptsPerCycle:
		return stratus.FieldErrorf(stratus.EINVALID, "Retry", "max_attempts %d, max_stage_attempts %d; want max_attempts >= 0, max_stage_attempts >= 1 and at most %d attempts a park cycle",
			o.Retry.MaxAttempts, o.Retry.MaxStageAttempts, config.MaxStepAttemptsPerCycle)
	case o.Retry.BaseDelay < 0 || o.Retry.MaxDelay < o.Retry.BaseDelay || r.MaxDelaySeconds > maxRetrierDelaySeconds:
		return stratus.FieldErrorf(stratus.EINVALID, "Retry", "base delay %v, max delay %v; want 0 <= base <= max <= %d s", o.Retry.BaseDelay, o.Retry.MaxDelay, maxRetrierDelaySeconds)
	}
	return nil
}

// maxRetrierDelaySeconds is the largest MaxDelaySeconds of a Retrier
// (ASL spec § Retrying after error).
const maxRetrierDelaySeconds = 31622401

// loop is one budgeted way into a target: the counter it charges and the
// pair of states that check and charge it.
type loop struct {
	counter string // member of $.loops
	budget  int
	target  string // node id
	check   string // "<counter>.budget[.<target>]"
	charge  string // "<counter>.count[.<target>]"
	global  bool   // also checks and charges the global backstop
}

type compiler struct {
	f   *flow.Flow
	opt Options

	resume, init, done, failed, manual string // fixed state names, renamed on collision

	counters []string            // sorted
	loops    map[[2]string]*loop // (counter, target) → loop

	global       string // $.loops member of the global backstop; "" when none
	globalBudget int

	// Decomposition; region is nil in a flow without one.
	region      map[string]bool   // decomposition.sub_flow
	regionEntry string            // the sub_flow node proposed_by enters
	exits       map[string]string // an exit edge's own entry state → its "decompose.more" state
	resets      []string          // counters "decompose.reset" zeroes, sorted
}

// The naming rules live in internal/flow, so that flow.Validate reports
// what Compile would reject (a counter collision, a state name too long)
// by the same rule: counterName (flow.CounterName), counterOf
// (flow.EdgeCounter), hitlGrant (flow.AsksHuman), hitlCounter
// (flow.HITLCounter), globalBudgetName (flow.GlobalBudgetName) and the
// loop states' names (flow.LoopStateNames).
func counterName(s string) string { return flow.CounterName(s) }

func counterOf(e flow.Edge) (counter, source string) { return flow.EdgeCounter(e) }

func hitlGrant(n *flow.Node) bool { return flow.AsksHuman(n) }

func hitlCounter(id string) string { return flow.HITLCounter(id) }

func globalBudgetName(f *flow.Flow) string { return flow.GlobalBudgetName(f) }

// plan names the fixed states, the loop states and the decomposition
// region.
func (c *compiler) plan() error {
	f := c.f
	name := func(base string) string {
		if f.Node(base) != nil {
			return "run." + base
		}
		return base
	}
	c.resume, c.init, c.done, c.failed, c.manual = name(ResumeState), name("init"), name("done"), name("failed"), name("manual_action_required")

	sources := map[string]string{}   // counter → what it stands for
	targets := map[string][]string{} // counter → distinct targets, in edge order
	inside := map[string]bool{}      // counter → every edge charging it lies inside the region
	claim := func(counter, source string) error {
		if prev, ok := sources[counter]; ok && prev != source {
			return stratus.Errorf(stratus.EINVALID, "flow %q: %s and %s both count in $.loops.%s; rename one", f.Name, prev, source, counter)
		}
		sources[counter] = source
		return nil
	}
	if d := f.Decomposition; d != nil {
		c.region = map[string]bool{}
		for _, id := range d.SubFlow {
			c.region[id] = true
		}
		for _, e := range f.Out(d.ProposedBy) {
			if c.region[e.To] {
				c.regionEntry = e.To
				break
			}
		}
		if c.regionEntry == "" {
			return stratus.Errorf(stratus.EINVALID, "flow %q: decomposition.proposed_by %q has no edge into decomposition.sub_flow %v; a subtask would have nowhere to start",
				f.Name, d.ProposedBy, d.SubFlow)
		}
	}
	if g := globalBudgetName(f); g != "" {
		c.global, c.globalBudget = counterName(g), f.Budgets[g]
		if err := claim(c.global, fmt.Sprintf("loop %q", g)); err != nil {
			return err
		}
	}
	c.loops = map[[2]string]*loop{}
	add := func(counter, target string, budget int, global, in bool) {
		if !slices.Contains(targets[counter], target) {
			targets[counter] = append(targets[counter], target)
		}
		if prev, ok := inside[counter]; ok {
			in = in && prev
		}
		inside[counter] = in
		c.loops[[2]string{counter, target}] = &loop{counter: counter, budget: budget, target: target, global: global}
	}
	for _, e := range f.Edges {
		counter, source := counterOf(e)
		if counter == "" {
			continue
		}
		if err := claim(counter, source); err != nil {
			return err
		}
		budget := f.Budgets[e.Loop]
		if e.Budget != nil {
			budget = *e.Budget
		}
		if c.opt.MaxFixCycles > 0 && budget > c.opt.MaxFixCycles {
			budget = c.opt.MaxFixCycles
		}
		add(counter, e.To, budget, c.global != "" && counter != c.global, c.region[e.From] && c.region[e.To])
	}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if !hitlGrant(n) {
			continue
		}
		counter := hitlCounter(n.ID)
		if err := claim(counter, fmt.Sprintf("the hitl rounds of node %q", n.ID)); err != nil {
			return err
		}
		add(counter, n.ID, HITLRounds, false, c.region[n.ID])
	}
	for counter := range sources {
		c.counters = append(c.counters, counter)
	}
	slices.Sort(c.counters)
	for _, l := range c.loops {
		l.check, l.charge = flow.LoopStateNames(l.counter, l.target, len(targets[l.counter]))
	}
	if c.region != nil {
		shared := counterName(f.Decomposition.SharedBudget)
		for _, k := range c.counters {
			if inside[k] && k != c.global && k != shared {
				c.resets = append(c.resets, k)
			}
		}
		c.exits = map[string]string{}
		var keys []string
		for _, e := range f.Edges {
			if c.region[e.From] && !c.region[e.To] {
				if t := c.target(e); !slices.Contains(keys, t) {
					keys = append(keys, t)
				}
			}
		}
		for _, k := range keys {
			c.exits[k] = "decompose.more"
			if len(keys) > 1 {
				c.exits[k] += "." + k
			}
		}
	}
	return nil
}

// target returns the state an edge leads to, leaving the decomposition
// region aside: its target, or the budget check in front of the target
// when the edge is budgeted.
func (c *compiler) target(e flow.Edge) string {
	if counter, _ := counterOf(e); counter != "" {
		return c.loops[[2]string{counter, e.To}].check
	}
	return e.To
}

// entry returns the state an edge leads to: an edge leaving the
// decomposition region first asks whether another subtask is due.
func (c *compiler) entry(e flow.Edge) string {
	t := c.target(e)
	if c.region[e.From] && !c.region[e.To] {
		return c.exits[t]
	}
	return t
}

func (c *compiler) machine() machine {
	f := c.f
	m := machine{
		Comment: fmt.Sprintf("Stratus flow %s (task_type %s)", f.Name, f.TaskType),
		StartAt: c.resume,
	}
	m.States = append(m.States, member{c.resume, nil}) // filled in last: it lists every dispatch state
	result := make(object, 0, len(c.counters))
	for _, k := range c.counters {
		result = append(result, member{k, 0})
	}
	first := f.Entry().ID
	if c.region != nil {
		m.States = append(m.States, member{c.init, initState{Type: "Pass", Result: result, ResultPath: "$.loops", Next: "init.subtask"}})
		m.States = append(m.States, member{"init.subtask", initState{Type: "Pass",
			Result: object{{"order", 0}, {"count", 0}}, ResultPath: "$.subtask", Next: first}})
	} else {
		m.States = append(m.States, member{c.init, initState{Type: "Pass", Result: result, ResultPath: "$.loops", Next: first}})
	}

	emitted := map[string]bool{}
	// loopStates emits the budget and count states of one loop, once.
	loopStates := func(l *loop) {
		if emitted[l.check] {
			return
		}
		emitted[l.check] = true
		rules := []any{numericRule{Variable: "$.loops." + l.counter, NumericGreaterThanEquals: l.budget, Next: c.manual}}
		if l.global {
			rules = append(rules, numericRule{Variable: "$.loops." + c.global, NumericGreaterThanEquals: c.globalBudget, Next: c.manual})
		}
		m.States = append(m.States,
			member{l.check, choiceState{Type: "Choice", Choices: rules, Default: l.charge}},
			member{l.charge, c.count(l)})
	}
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
		// next is what follows the node's own outcome; each stage below
		// puts a state in front of it.
		// A gate without edges (terminalGate) ends done on its pass
		// outcome only: it routes too (fail closed).
		next := c.done
		terminalGate := len(out) == 0 && flow.PassOutcome(n) != ""
		switch {
		case n.Kind == flow.KindPublish || (len(out) == 0 && !terminalGate):
		case len(routed) > 0 || terminalGate:
			next = n.ID + ".route"
		default:
			next = c.entry(*uncond)
		}
		afterOutcome := next
		var after []member // states following the Task, in order
		if d := f.Decomposition; d != nil && d.ProposedBy == n.ID {
			dec := n.ID + ".decompose"
			after = append(after,
				member{dec, choiceState{Type: "Choice", Choices: []any{andRule{And: []any{
					presentCond{Variable: "$.last.subtasks", IsPresent: true},
					numericTypeCond{Variable: "$.last.subtasks", IsNumeric: true},
					greaterThanCond{Variable: "$.last.subtasks", NumericGreaterThan: 1},
				}, Next: "decompose.start"}}, Default: next}},
				member{"decompose.start", passState{Type: "Pass",
					Parameters: object{{"order", 1}, {"count.$", "$.last.subtasks"}}, ResultPath: "$.subtask", Next: c.regionEntry}})
			next = dec
		}
		var hitlLoop *loop
		if hitlGrant(n) {
			ask, wait := n.ID+".human_input", n.ID+HITLSuffix
			hitlLoop = c.loops[[2]string{hitlCounter(n.ID), n.ID}]
			route := choiceState{Type: "Choice", Default: c.manual}
			if n.HITL.AllowApproval {
				route.Choices = append(route.Choices, stringRule{Variable: "$.human.outcome", StringEquals: OutcomeApprove, Next: next})
			}
			if n.HITL.AllowQuestion {
				route.Choices = append(route.Choices, stringRule{Variable: "$.human.outcome", StringEquals: OutcomeAnswered, Next: hitlLoop.check})
			}
			if n.HITL.AllowApproval {
				route.Choices = append(route.Choices, stringRule{Variable: "$.human.outcome", StringEquals: OutcomeDeny, Next: hitlLoop.check})
			}
			waitState := c.taskState(n.ID, KindHITL, c.hitlDeadline(n), false, c.manual, "$.human", wait+".route")
			after = append([]member{
				{ask, choiceState{Type: "Choice", Choices: []any{stringRule{Variable: "$.last.outcome", StringEquals: OutcomeHumanInput, Next: wait}}, Default: next}},
				{wait, waitState},
				{wait + ".route", route},
			}, after...)
			next = ask
		}
		task := c.task(n, next, uncond, len(out) == 0)
		if n.Kind == flow.KindPublish {
			task.Catch = append([]catcher{{ErrorEquals: []string{ErrMergeBlocked}, ResultPath: "$.error", Next: c.manual}}, task.Catch...)
		}
		if isWorker(n.Kind) {
			stop, park, wait := n.ID+StopSuffix, n.ID+ParkSuffix, n.ID+WaitSuffix
			target := task.Catch[0].Next
			st := c.stopState(n.ID, target)
			task.Catch[0].Next = stop
			if target == c.failed || target == c.manual {
				task.Catch = append([]catcher{{ErrorEquals: []string{ErrInfrastructure, ErrCapReached}, ResultPath: "$.error", Next: c.manual}}, task.Catch...)
			} else {
				task.Catch = append([]catcher{{ErrorEquals: []string{ErrCapReached}, ResultPath: "$.error", Next: c.manual}}, task.Catch...)
			}
			// A parked step waits, then enters the state again; one
			// parked too long parks the run.
			task.Catch = append([]catcher{
				{ErrorEquals: []string{ErrBlocked}, ResultPath: "$.last", Next: park},
				{ErrorEquals: []string{ErrBlockedTimeout}, ResultPath: "$.error", Next: c.manual},
			}, task.Catch...)
			if r := c.opt.Retry.TransientRetrier(); r.MaxAttempts > 0 {
				task.Retry = append([]retrier{{
					ErrorEquals:     []string{ErrProviderUnavailable, ErrRateLimited, ErrNetworkUnavailable},
					IntervalSeconds: r.IntervalSeconds, BackoffRate: r.BackoffRate, MaxDelaySeconds: r.MaxDelaySeconds, MaxAttempts: r.MaxAttempts,
				}}, task.Retry...)
			}
			m.States = append(m.States, member{n.ID, task}, member{stop, st},
				member{park, passState{Type: "Pass",
					Parameters: object{{"parked", n.ID}, {"wait.$", "States.StringToJson($.last.Cause)"}}, ResultPath: "$.last", Next: wait}},
				member{wait, waitState{Type: "Wait", SecondsPath: "$.last.wait.wait_s", Next: n.ID}})
		} else {
			m.States = append(m.States, member{n.ID, task})
		}
		if hitlLoop != nil {
			m.States = append(m.States, after[:3]...)
			loopStates(hitlLoop)
			after = after[3:]
		}
		m.States = append(m.States, after...)

		if afterOutcome == n.ID+".route" {
			ch := choiceState{Type: "Choice", Default: c.manual}
			for _, e := range routed {
				ch.Choices = append(ch.Choices, stringRule{Variable: "$.last.outcome", StringEquals: e.Outcome, Next: c.entry(e)})
			}
			if uncond != nil {
				ch.Default = c.entry(*uncond)
			}
			if terminalGate {
				ch.Choices = []any{stringRule{Variable: "$.last.outcome", StringEquals: flow.PassOutcome(n), Next: c.done}}
			}
			m.States = append(m.States, member{n.ID + ".route", ch})
		}
		if n.Kind == flow.KindPublish {
			continue
		}
		for _, e := range out {
			if counter, _ := counterOf(e); counter != "" {
				loopStates(c.loops[[2]string{counter, e.To}])
			}
		}
		for _, e := range out {
			if !c.region[e.From] || c.region[e.To] {
				continue
			}
			t := c.target(e)
			more := c.exits[t]
			if emitted[more] {
				continue
			}
			emitted[more] = true
			m.States = append(m.States, member{more, choiceState{Type: "Choice",
				Choices: []any{lessThanPathRule{Variable: "$.subtask.order", NumericLessThanPath: "$.subtask.count", Next: "decompose.next"}},
				Default: t}})
			if !emitted["decompose.next"] {
				emitted["decompose.next"] = true
				m.States = append(m.States, c.nextSubtask()...)
			}
		}
	}
	// The resume entry: a fresh execution goes on to init; one started with
	// $.resume_at enters that dispatch state with the input it carries.
	entry := entryState{Type: "Choice", Choices: []any{notRule{Not: presentCond{Variable: "$." + ResumeAtField, IsPresent: true}, Next: c.init}}}
	for _, s := range m.States {
		if t, ok := s.Value.(taskState); ok && t.Resource == DispatchResource {
			entry.Choices = append(entry.Choices, stringRule{Variable: "$." + ResumeAtField, StringEquals: s.Key, Next: s.Key})
		}
	}
	m.States[0].Value = entry
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

// nextSubtask builds "decompose.next" (the cursor moves on) and, when some
// loop lies inside the region, "decompose.reset" (its counters start
// afresh for the new subtask).
func (c *compiler) nextSubtask() []member {
	next := c.regionEntry
	if len(c.resets) > 0 {
		next = "decompose.reset"
	}
	out := []member{{"decompose.next", passState{Type: "Pass",
		Parameters: object{{"order.$", "States.MathAdd($.subtask.order, 1)"}, {"count.$", "$.subtask.count"}},
		ResultPath: "$.subtask", Next: next}}}
	if len(c.resets) > 0 {
		params := make(object, 0, len(c.counters))
		for _, k := range c.counters {
			if slices.Contains(c.resets, k) {
				params = append(params, member{k, 0})
			} else {
				params = append(params, member{k + ".$", "$.loops." + k})
			}
		}
		out = append(out, member{"decompose.reset", passState{Type: "Pass", Parameters: params, ResultPath: "$.loops", Next: c.regionEntry}})
	}
	return out
}

// hitlDeadline is how long a node's human is waited for: the hitl node's
// timeout_s, else the configured default (reference.md § hitl node).
func (c *compiler) hitlDeadline(n *flow.Node) int {
	if n.Kind == flow.KindHITL && n.TimeoutS != nil {
		return *n.TimeoutS
	}
	return c.opt.HITLTimeoutSeconds
}

// task builds a node's Task state. uncond is its unconditional edge (nil
// when none); terminal says it has no edges at all.
func (c *compiler) task(n *flow.Node, next string, uncond *flow.Edge, terminal bool) taskState {
	deadline := c.opt.DefaultTimeoutSeconds
	catch := c.failed
	heartbeat := true
	switch n.Kind {
	case flow.KindAgent, flow.KindTool:
		if n.TimeoutSeconds != nil {
			deadline = *n.TimeoutSeconds
		}
	case flow.KindHITL:
		deadline = c.hitlDeadline(n)
		heartbeat = false
	}
	switch {
	case n.Kind == flow.KindHITL, n.Kind == flow.KindTool, n.Kind == flow.KindChecks:
		catch = c.manual
	case n.Kind == flow.KindAgent && n.BestEffort && uncond != nil:
		catch = c.entry(*uncond)
	case n.Kind == flow.KindAgent && n.BestEffort && terminal:
		catch = c.done
	}
	return c.taskState(n.ID, n.Kind, deadline, heartbeat, catch, "$.last", next)
}

// isWorker reports whether a node kind runs a worker (an ECS task on AWS,
// a `stratus runner` process in embedded mode).
func isWorker(kind string) bool {
	switch kind {
	case flow.KindAgent, flow.KindEvaluator, flow.KindChecks, flow.KindTool:
		return true
	}
	return false
}

// stopState builds "<node>.stop": it tells the dispatch side to stop the
// node's worker, then goes on to next, the Catch's original target.
func (c *compiler) stopState(node, next string) stopState {
	return stopState{
		Type:     "Task",
		Resource: StopResource,
		Parameters: stopParameters{
			QueueURL:    c.opt.QueueURL,
			MessageBody: stopBody{RunID: "$.run_id", Node: node, Kind: KindStop, Error: "$.error"},
		},
		ResultPath:     nil,
		TimeoutSeconds: StopTimeoutSeconds,
		Retry:          []retrier{infrastructureRetrier()},
		Catch:          []stopCatcher{{ErrorEquals: []string{"States.ALL"}, ResultPath: nil, Next: next}},
		Next:           next,
	}
}

func (c *compiler) taskState(node, kind string, deadline int, heartbeat bool, catch, resultPath, next string) taskState {
	st := taskState{
		Type:     "Task",
		Resource: DispatchResource,
		Parameters: taskParameters{
			QueueURL: c.opt.QueueURL,
			MessageBody: messageBody{
				RunID:      "$.run_id",
				Node:       node,
				Kind:       kind,
				TaskToken:  "$$.Task.Token",
				State:      "$",
				RetryCount: "$$.State.RetryCount",
			},
		},
		ResultPath:     resultPath,
		TimeoutSeconds: deadline + TimeoutGraceSeconds,
		Retry:          []retrier{infrastructureRetrier()},
		Catch:          []catcher{{ErrorEquals: []string{"States.ALL"}, ResultPath: "$.error", Next: catch}},
		Next:           next,
	}
	if heartbeat {
		st.HeartbeatSeconds = c.opt.HeartbeatSeconds
	}
	if c.region != nil {
		st.Parameters.MessageBody.SubtaskOrder = "$.subtask.order"
	}
	return st
}

// TaskFailure returns what a worker fails a worker state's task with
// (SendTaskFailure) to carry out a retry decision, so that the compiled
// Retry and Catch do what the decision says: for Retry and Hop, the
// transient error name of the attempt's class (ErrProviderUnavailable,
// ErrRateLimited, ErrNetworkUnavailable), which the transient Retrier
// retries after the decision's Delay; for Park, ErrBlocked with
// retry.BlockedCause as the cause; for GiveUp, ErrBlockedTimeout with
// the reason. ok is false for NotTransient: the failure is not the
// policy's, the caller names it.
func TaskFailure(d retry.Decision) (errName, cause string, ok bool) {
	switch d.Action {
	case retry.Retry, retry.Hop:
		switch d.Class {
		case retry.RateLimited:
			return ErrRateLimited, d.Reason, true
		case retry.NetworkUnavailable:
			return ErrNetworkUnavailable, d.Reason, true
		}
		return ErrProviderUnavailable, d.Reason, true
	case retry.Park:
		return ErrBlocked, d.Cause(), true
	case retry.GiveUp:
		return ErrBlockedTimeout, d.Reason, true
	}
	return "", "", false
}

// infrastructureRetrier is every Task state's Retrier of infrastructure
// errors: stratus.InfrastructureFailed (the worker could not be started
// for want of capacity or under throttling) and the SQS integration's
// own errors (the dispatch queue throttled or unreachable), with
// retry.InfrastructureRetrier's numbers.
func infrastructureRetrier() retrier {
	r := retry.InfrastructureRetrier
	return retrier{ErrorEquals: []string{ErrInfrastructure, ErrSQSClient, ErrSQSAWS},
		IntervalSeconds: r.IntervalSeconds, BackoffRate: r.BackoffRate, MaxDelaySeconds: r.MaxDelaySeconds, MaxAttempts: r.MaxAttempts}
}

// count builds the Pass state that charges one loop: it rewrites $.loops
// whole, copying every counter and adding one to this loop's (and to the
// global backstop's when the loop charges it).
func (c *compiler) count(l *loop) countState {
	params := make(object, 0, len(c.counters))
	for _, k := range c.counters {
		v := "$.loops." + k
		if k == l.counter || (l.global && k == c.global) {
			v = "States.MathAdd($.loops." + k + ", 1)"
		}
		params = append(params, member{k + ".$", v})
	}
	return countState{Type: "Pass", Parameters: params, ResultPath: "$.loops", Next: l.target}
}
