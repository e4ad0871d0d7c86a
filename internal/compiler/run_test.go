package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/retry"
)

// sent is one dispatch message a compiled Task state sent, as the worker
// receives it.
type sent struct {
	State        string          `json:"-"`     // the Task state that sent it
	Input        json.RawMessage `json:"state"` // the state's input, as the message carries it
	Node         string          `json:"node"`
	Kind         string          `json:"kind"`
	SubtaskOrder *int            `json:"subtask_order"`
	Visit        int             // how many times this Task state was entered so far
	RetryCount   int             `json:"retry_count"`
	// Error is what a "<node>.stop" message carries: the caught error.
	Error *struct{ Error, Cause string } `json:"error"`
}

// reply is what the fake worker completes a Task with: a step value
// (outcome plus extra members), or a failure.
type reply struct {
	outcome string
	extra   map[string]any
	fail    string // SendTaskFailure with this error name
	cause   string // and this cause ("the fake worker failed" when empty)
	hang    bool   // never complete: the state times out
}

// runFlow compiles f and executes it on the embedded executor — the same
// interpreter `stratus run` uses — completing every Task with answer. It
// returns the execution and the messages in order; the stop messages of
// "<node>.stop" states (no task token, nothing to answer) are left out
// (runFlowStops has them).
func runFlow(t *testing.T, f *flow.Flow, opt Options, answer func(m sent) reply) (executor.Execution, []sent) {
	t.Helper()
	x, msgs, _ := runFlowStops(t, f, opt, answer)
	return x, msgs
}

// runFlowStops is runFlow that also returns the stop messages in order.
func runFlowStops(t *testing.T, f *flow.Flow, opt Options, answer func(m sent) reply) (executor.Execution, []sent, []sent) {
	t.Helper()
	return runFlowInput(t, f, opt, `{"run_id":"r-1"}`, answer)
}

// runFlowInput is runFlowStops with the execution's input given.
func runFlowInput(t *testing.T, f *flow.Flow, opt Options, input string, answer func(m sent) reply) (executor.Execution, []sent, []sent) {
	t.Helper()
	def := compile(t, f, opt)
	var (
		mu     sync.Mutex
		msgs   []sent
		stops  []sent
		visits = map[string]int{}
		x      *embedded.Executor
	)
	x = embedded.New(embedded.Options{
		Clock:         fastClock{},
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
				var p struct {
					MessageBody sent
				}
				if err := json.Unmarshal(call.Parameters, &p); err != nil {
					return nil, err
				}
				m := p.MessageBody
				if call.Resource == StopResource {
					m.State = call.State
					mu.Lock()
					stops = append(stops, m)
					mu.Unlock()
					return json.RawMessage(`{"MessageId":"stop"}`), nil
				}
				mu.Lock()
				visits[call.State]++
				m.State, m.Visit = call.State, visits[call.State]
				msgs = append(msgs, m)
				mu.Unlock()
				r := answer(m)
				if r.hang {
					return json.RawMessage(`{"MessageId":"test"}`), nil
				}
				go func() {
					if r.fail != "" {
						cause := r.cause
						if cause == "" {
							cause = "the fake worker failed"
						}
						x.SendTaskFailure(context.Background(), call.Token, r.fail, cause)
						return
					}
					v := map[string]any{"node": m.Node, "outcome": r.outcome}
					for k, e := range r.extra {
						v[k] = e
					}
					b, _ := json.Marshal(v)
					x.SendTaskSuccess(context.Background(), call.Token, b)
				}()
				return json.RawMessage(`{"MessageId":"test"}`), nil
			},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := x.StartExecution(ctx, executor.StartInput{StateMachine: f.TaskType, Definition: def, Name: "r-1", Input: json.RawMessage(input)})
	if err != nil {
		t.Fatalf("start: %v\n%s", err, def)
	}
	ex, err = x.WaitExecution(ctx, ex.ARN)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return ex, msgs, stops
}

// fastClock runs the machine's timers a hundred times faster: a
// Retrier's 5 s wait takes 50 ms, a 1 s heartbeat 10 ms (no test here
// asserts a duration; each asserts what happens when a timer fires).
type fastClock struct{}

func (fastClock) Now() time.Time { return time.Now() }

func (fastClock) AfterFunc(d time.Duration, f func()) embedded.Timer { return time.AfterFunc(d/100, f) }

// trail renders messages as "<state>" or "<state>@<subtask order>".
func trail(msgs []sent) string {
	var out []string
	for _, m := range msgs {
		s := m.State
		if m.SubtaskOrder != nil {
			s += fmt.Sprintf("@%d", *m.SubtaskOrder)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// outcomes answers each state from a list per state, visit by visit (the
// last entry repeats); a state not listed answers "done".
func outcomes(per map[string][]reply) func(m sent) reply {
	return func(m sent) reply {
		list := per[m.State]
		if len(list) == 0 {
			return reply{outcome: "done"}
		}
		if m.Visit > len(list) {
			return list[len(list)-1]
		}
		return list[m.Visit-1]
	}
}

func out(o string) reply { return reply{outcome: o} }

// ending says how an execution ended: "done", or its error name.
func ending(x executor.Execution) string {
	if x.Status == executor.StatusSucceeded {
		return "done"
	}
	return x.Error
}

const fixLoops = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: review, kind: evaluator, role: review, role_file: t/r.md }
    - { id: fixing, kind: agent, role_file: t/f.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: testing }
    - { from: testing, to: review, outcome: pass }
    - { from: testing, to: fixing, outcome: fail, loop: test_fix }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: fixing, outcome: rework, loop: review_fix }
    - { from: fixing, to: testing }
`

// The global backstop (worc configuration.md § agents: a hard global fix
// cap across the whole task): every loop edge also charges
// global_fix_iterations, and a budget state parks the run when either the
// loop's own counter or the global one is spent.
func TestCompile_GlobalBackstopChargedByEveryLoopEdge(t *testing.T) {
	t.Parallel()
	f := parse(t, fixLoops+"  budgets: { test_fix: 5, review_fix: 5, global_fix_iterations: 3 }\n")
	d := decode(t, compile(t, f, Options{}))
	checkWellFormed(t, f, d)
	for _, loop := range []string{"test_fix", "review_fix"} {
		rules := d.States[loop+".budget"]["Choices"].([]any)
		if len(rules) != 2 || rules[1].(map[string]any)["Variable"] != "$.loops.global_fix_iterations" || rules[1].(map[string]any)["NumericGreaterThanEquals"] != 3.0 {
			t.Errorf("%s.budget rules %v: want its own counter, then the global backstop", loop, rules)
		}
		params := d.States[loop+".count"]["Parameters"].(map[string]any)
		if params["global_fix_iterations.$"] != "States.MathAdd($.loops.global_fix_iterations, 1)" || params[loop+".$"] != "States.MathAdd($.loops."+loop+", 1)" {
			t.Errorf("%s.count %v: want both counters charged", loop, params)
		}
	}

	cases := []struct {
		name    string
		budgets string
		answers map[string][]reply
		want    string // states dispatched
		end     string
	}{
		{"the global counter runs out across two loops", "{ test_fix: 5, review_fix: 5, global_fix_iterations: 3 }",
			map[string][]reply{"testing": {out("fail"), out("pass")}, "review": {out("rework")}},
			"build testing fixing testing review fixing testing review fixing testing review", ErrManualActionRequired},
		{"the loop's own counter runs out first", "{ test_fix: 1, review_fix: 5, global_fix_iterations: 9 }",
			map[string][]reply{"testing": {out("fail")}},
			"build testing fixing testing", ErrManualActionRequired},
		{"within both budgets the run ends done", "{ test_fix: 5, review_fix: 5, global_fix_iterations: 3 }",
			map[string][]reply{"testing": {out("fail"), out("pass")}, "review": {out("rework"), out("accept")}},
			"build testing fixing testing review fixing testing review publish", "done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := parse(t, fixLoops+"  budgets: "+c.budgets+"\n")
			x, msgs := runFlow(t, f, Options{}, outcomes(c.answers))
			if got := trail(msgs); got != c.want || ending(x) != c.end {
				t.Errorf("got %s → %s\nwant %s → %s", got, ending(x), c.want, c.end)
			}
		})
	}
}

// decomposition.shared_budget names the budget of the backstop when
// global_fix_iterations is not declared.
func TestCompile_SharedBudgetIsTheGlobalBackstop(t *testing.T) {
	t.Parallel()
	f := parse(t, fixLoops+`  budgets: { test_fix: 5, review_fix: 5, fixes_total: 2 }
  decomposition: { proposed_by: build, sub_flow: [testing, review, fixing], shared_budget: fixes_total }
`)
	d := decode(t, compile(t, f, Options{}))
	rules := d.States["review_fix.budget"]["Choices"].([]any)
	if len(rules) != 2 || rules[1].(map[string]any)["Variable"] != "$.loops.fixes_total" {
		t.Errorf("review_fix.budget %v: want the shared budget as the backstop", rules)
	}
	// Without either, loop edges charge only their own counter.
	d = decode(t, compile(t, parse(t, fixLoops+"  budgets: { test_fix: 5, review_fix: 5 }\n"), Options{}))
	if rules := d.States["review_fix.budget"]["Choices"].([]any); len(rules) != 1 {
		t.Errorf("no backstop declared, yet review_fix.budget has %d rules", len(rules))
	}
}

// agents.max_fix_cycles caps every loop budget: the machine checks
// min(flow, cap) (reference.md § Flow-level fields: budgets;
// docs/contracts.md § Fatal validation: "the cap always wins"). The global
// backstop is the cap across loops, not one loop, and keeps its own budget.
func TestCompile_MaxFixCyclesClampsEveryLoopBudget(t *testing.T) {
	t.Parallel()
	f := parse(t, fixLoops+"  budgets: { test_fix: 15, review_fix: 1, global_fix_iterations: 30 }\n")
	d := decode(t, compile(t, f, Options{MaxFixCycles: 2}))
	for loop, want := range map[string]float64{"test_fix": 2, "review_fix": 1} {
		rules := d.States[loop+".budget"]["Choices"].([]any)
		if got := rules[0].(map[string]any)["NumericGreaterThanEquals"]; got != want {
			t.Errorf("%s budget %v, want min(flow, cap) = %v", loop, got, want)
		}
		if got := rules[1].(map[string]any)["NumericGreaterThanEquals"]; got != 30.0 {
			t.Errorf("%s: global backstop %v, want the flow's 30", loop, got)
		}
	}
	x, msgs := runFlow(t, f, Options{MaxFixCycles: 2}, outcomes(map[string][]reply{"testing": {out("fail")}}))
	if got, want := trail(msgs), "build testing fixing testing fixing testing"; got != want || ending(x) != ErrManualActionRequired {
		t.Errorf("got %s → %s, want %s → manual", got, ending(x), want)
	}
	// No cap: the flow's budget.
	d = decode(t, compile(t, f, Options{}))
	if got := d.States["test_fix.budget"]["Choices"].([]any)[0].(map[string]any)["NumericGreaterThanEquals"]; got != 15.0 {
		t.Errorf("uncapped test_fix budget %v, want 15", got)
	}
}

// A best_effort agent tolerates an infrastructure failure and the task
// continues (reference.md § agent node: best_effort;
// docs/contracts.md § Per-node overrides): its Catch goes to its
// unconditional successor, $.error still records the failure. Without
// best_effort the same failure fails the run.
func TestCompile_BestEffortAgentFailureContinues(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: summary, kind: agent, role_file: t/s.md, best_effort: true }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: summary }
    - { from: summary, to: publish }
`
	fails := outcomes(map[string][]reply{"summary": {{fail: "stratus.WorkerFailed"}}})
	x, msgs, stops := runFlowStops(t, parse(t, yaml), Options{}, fails)
	if got := trail(msgs); got != "build summary publish" || ending(x) != "done" {
		t.Errorf("best_effort: %s → %s, want build summary publish → done", got, ending(x))
	}
	if len(stops) != 1 || stops[0].State != "summary.stop" || stops[0].Node != "summary" || stops[0].Error == nil || stops[0].Error.Error != "stratus.WorkerFailed" {
		t.Errorf("best_effort failure: stop messages %+v, want one from summary.stop carrying stratus.WorkerFailed", stops)
	}
	if !strings.Contains(string(x.Output), `"error":{"Error":"stratus.WorkerFailed"`) {
		t.Errorf("output %s: the failure is not recorded in $.error", x.Output)
	}
	// A reached cap is no infrastructure failure to tolerate: even a
	// best_effort agent parks the run (README.md § Cost and token caps), and
	// no stop is sent (no worker was started).
	capped := outcomes(map[string][]reply{"summary": {{fail: ErrCapReached}}})
	x, msgs, stops = runFlowStops(t, parse(t, yaml), Options{}, capped)
	if got := trail(msgs); got != "build summary" || ending(x) != ErrManualActionRequired || len(stops) != 0 {
		t.Errorf("best_effort at the cap: %s → %s, stops %+v; want build summary → %s, none", got, ending(x), stops, ErrManualActionRequired)
	}
	x, msgs = runFlow(t, parse(t, strings.Replace(yaml, ", best_effort: true", "", 1)), Options{}, fails)
	if got := trail(msgs); got != "build summary" || ending(x) != ErrFailed {
		t.Errorf("not best_effort: %s → %s, want build summary → %s", got, ending(x), ErrFailed)
	}
	// A best_effort agent with no edges is a terminal: its failure ends
	// done, an infrastructure failure included (it passes the stop state).
	terminal := parse(t, header+`  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: summary, kind: agent, role_file: t/s.md, best_effort: true }
  edges:
    - { from: build, to: summary }
`)
	d := decode(t, compile(t, terminal, Options{}))
	checkWellFormed(t, terminal, d)
	if c := allCatch(d.States["summary"]); caught(d, "summary") != "done" || c["ResultPath"] != "$.error" {
		t.Errorf("terminal best_effort catch %v → %s", c, caught(d, "summary"))
	}
}

// A hitl node (reference.md § hitl node): no heartbeat, timeout_s else the
// configured default, a failure or timeout parks the run; approval
// branches on route:approve / route:deny, a question proceeds on "done".
func TestCompile_HITLNodeWaitsAndRoutes(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: ask, kind: hitl, signal: question }
    - { id: gate, kind: hitl, signal: approval, timeout_s: 60 }
    - { id: revise, kind: agent, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: ask }
    - { from: ask, to: gate }
    - { from: gate, to: publish, outcome: route:approve }
    - { from: gate, to: revise, outcome: route:deny }
    - { from: revise, to: publish }
`
	f := parse(t, yaml)
	d := decode(t, compile(t, f, Options{HITLTimeoutSeconds: 1000}))
	checkWellFormed(t, f, d)
	for node, want := range map[string]float64{"ask": 1000 + TimeoutGraceSeconds, "gate": 60 + TimeoutGraceSeconds} {
		s := d.States[node]
		if s["TimeoutSeconds"] != want || s["HeartbeatSeconds"] != nil || s["Catch"].([]any)[0].(map[string]any)["Next"] != "manual_action_required" {
			t.Errorf("%s: %v", node, s)
		}
	}
	if s := decode(t, compile(t, f, Options{})).States["ask"]; s["TimeoutSeconds"] != float64(DefaultHITLTimeoutSeconds+TimeoutGraceSeconds) {
		t.Errorf("default hitl deadline %v, want %d", s["TimeoutSeconds"], DefaultHITLTimeoutSeconds+TimeoutGraceSeconds)
	}
	cases := []struct {
		name, gate, want, end string
		fail                  bool
	}{
		{"approve", "route:approve", "build ask gate publish", "done", false},
		{"deny", "route:deny", "build ask gate revise publish", "done", false},
		{"an answer the flow does not route parks", "maybe", "build ask gate", ErrManualActionRequired, false},
		{"a timeout or transport error parks", "", "build ask gate", ErrManualActionRequired, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := out(c.gate)
			if c.fail {
				r = reply{fail: "States.Timeout"}
			}
			x, msgs := runFlow(t, f, Options{}, outcomes(map[string][]reply{"gate": {r}}))
			if got := trail(msgs); got != c.want || ending(x) != c.end {
				t.Errorf("got %s → %s, want %s → %s", got, ending(x), c.want, c.end)
			}
			for _, m := range msgs {
				if m.State == "gate" && (m.Kind != "hitl" || m.Node != "gate") {
					t.Errorf("gate message %+v", m)
				}
			}
		})
	}
}

// An agent with `hitl: {allow_question, allow_approval}` (reference.md §
// agent node: hitl; flow-authoring.md § What a node returns: the
// human_input contract): outcome human_input waits in "<node>.hitl"
// (kind hitl, node = the agent); "answered" and "deny" send the agent back
// to work through <node>_hitl (HITLRounds rounds), "approve" goes on. An
// agent that asks nothing takes its edges as before.
func TestCompile_AgentHITLAsksThenResumes(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: draft, kind: agent, role_file: t/p.md, hitl: { allow_question: true, allow_approval: true } }
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: draft, to: build }
    - { from: build, to: publish }
`
	f := parse(t, yaml)
	d := decode(t, compile(t, f, Options{HITLTimeoutSeconds: 600}))
	checkWellFormed(t, f, d)
	wait := d.States["draft.hitl"]
	body := wait["Parameters"].(map[string]any)["MessageBody"].(map[string]any)
	if body["node"] != "draft" || body["kind"] != "hitl" || wait["HeartbeatSeconds"] != nil || wait["TimeoutSeconds"] != 900.0 ||
		wait["ResultPath"] != "$.human" || wait["Catch"].([]any)[0].(map[string]any)["Next"] != "manual_action_required" {
		t.Errorf("draft.hitl %v", wait)
	}
	if r := d.States["draft_hitl.budget"]["Choices"].([]any)[0].(map[string]any); r["NumericGreaterThanEquals"] != float64(HITLRounds) {
		t.Errorf("draft_hitl.budget %v, want %d rounds", r, HITLRounds)
	}

	ask := reply{outcome: OutcomeHumanInput}
	cases := []struct {
		name   string
		plan   []reply
		human  []reply
		want   string
		end    string
		allows string // hitl grant, default both
	}{
		{"no request: the normal edge", []reply{out("done")}, nil, "draft build publish", "done", ""},
		{"a question answered re-runs the agent", []reply{ask, out("done")}, []reply{out(OutcomeAnswered)}, "draft draft.hitl draft build publish", "done", ""},
		{"an approval given goes on", []reply{ask}, []reply{out(OutcomeApprove)}, "draft draft.hitl build publish", "done", ""},
		{"an approval denied re-runs the agent", []reply{ask, out("done")}, []reply{out(OutcomeDeny)}, "draft draft.hitl draft build publish", "done", ""},
		{"a fourth request parks the run", []reply{ask}, []reply{out(OutcomeAnswered)},
			"draft draft.hitl draft draft.hitl draft draft.hitl draft draft.hitl", ErrManualActionRequired, ""},
		{"a question-only grant cannot be approved", []reply{ask}, []reply{out(OutcomeApprove)}, "draft draft.hitl", ErrManualActionRequired, "{ allow_question: true }"},
		{"the human's wait timing out parks", []reply{ask}, []reply{{fail: "States.Timeout"}}, "draft draft.hitl", ErrManualActionRequired, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			y := yaml
			if c.allows != "" {
				y = strings.Replace(y, "{ allow_question: true, allow_approval: true }", c.allows, 1)
			}
			x, msgs := runFlow(t, parse(t, y), Options{}, outcomes(map[string][]reply{"draft": c.plan, "draft.hitl": c.human}))
			if got := trail(msgs); got != c.want || ending(x) != c.end {
				t.Errorf("got %s → %s\nwant %s → %s", got, ending(x), c.want, c.end)
			}
		})
	}
}

const decomposed = header + `  nodes:
    - { id: planning, kind: agent, role_file: t/p.md }
    - { id: implementation, kind: agent, role_file: t/i.md }
    - { id: review, kind: evaluator, role: review, role_file: t/r.md }
    - { id: fixing, kind: agent, role_file: t/f.md }
    - { id: documentation, kind: agent, role_file: t/d.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: planning, to: implementation }
    - { from: implementation, to: review }
    - { from: review, to: documentation, outcome: accept }
    - { from: review, to: fixing, outcome: rework, loop: review_fix }
    - { from: fixing, to: review }
    - { from: documentation, to: publish }
  budgets: { review_fix: 1, global_fix_iterations: 2 }
  decomposition: { proposed_by: planning, sub_flow: [implementation, review, fixing], shared_budget: global_fix_iterations }
`

// Decomposition (reference.md § decomposition;
// docs/contracts.md § Template variables: {subtask_order}): when the
// proposed_by node's value carries subtasks > 1 the sub_flow region runs once
// per subtask, every message carrying its subtask_order; the region's own
// loop budgets start afresh per subtask while the shared budget counts across
// all of them.
func TestCompile_DecompositionRunsTheRegionPerSubtask(t *testing.T) {
	t.Parallel()
	f := parse(t, decomposed)
	d := decode(t, compile(t, f, Options{}))
	checkWellFormed(t, f, d)
	if r := d.States["decompose.reset"]["Parameters"].(map[string]any); r["review_fix"] != 0.0 || r["global_fix_iterations.$"] != "$.loops.global_fix_iterations" {
		t.Errorf("decompose.reset %v: want review_fix reset, the shared budget kept", r)
	}
	split := func(n int) []reply { return []reply{{outcome: "done", extra: map[string]any{"subtasks": n}}} }
	cases := []struct {
		name     string
		planning []reply
		review   []reply
		want     string
		end      string
	}{
		{"three subtasks", split(3), []reply{out("accept")},
			"planning@0 implementation@1 review@1 implementation@2 review@2 implementation@3 review@3 documentation@3 publish@3", "done"},
		{"no subtasks: the region runs once", []reply{out("done")}, []reply{out("accept")},
			"planning@0 implementation@0 review@0 documentation@0 publish@0", "done"},
		{"one subtask is no split", split(1), []reply{out("accept")},
			"planning@0 implementation@0 review@0 documentation@0 publish@0", "done"},
		{"each subtask gets its own loop budget", split(2), []reply{out("rework"), out("accept"), out("rework"), out("accept")},
			"planning@0 implementation@1 review@1 fixing@1 review@1 implementation@2 review@2 fixing@2 review@2 documentation@2 publish@2", "done"},
		{"the shared budget runs out across subtasks", split(3), []reply{out("rework"), out("accept"), out("rework"), out("accept"), out("rework")},
			"planning@0 implementation@1 review@1 fixing@1 review@1 implementation@2 review@2 fixing@2 review@2 implementation@3 review@3", ErrManualActionRequired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, msgs := runFlow(t, f, Options{}, outcomes(map[string][]reply{"planning": c.planning, "review": c.review}))
			if got := trail(msgs); got != c.want || ending(x) != c.end {
				t.Errorf("got %s → %s\nwant %s → %s", got, ending(x), c.want, c.end)
			}
		})
	}
	// A flow without decomposition sends no subtask_order.
	_, msgs := runFlow(t, parse(t, small), Options{}, outcomes(map[string][]reply{"review": {out("accept")}}))
	for _, m := range msgs {
		if m.SubtaskOrder != nil {
			t.Errorf("%s sent subtask_order %d without decomposition", m.State, *m.SubtaskOrder)
		}
	}
}

// The proposer may itself ask a human: an approval given keeps the
// proposer's value in $.last (the human's lands in $.human), so its
// subtasks still split the task.
func TestCompile_DecompositionAfterAnApprovedPlan(t *testing.T) {
	t.Parallel()
	f := parse(t, strings.Replace(decomposed, "{ id: planning, kind: agent, role_file: t/p.md }",
		"{ id: planning, kind: agent, role_file: t/p.md, hitl: { allow_approval: true } }", 1))
	x, msgs := runFlow(t, f, Options{}, outcomes(map[string][]reply{
		"planning":      {{outcome: OutcomeHumanInput, extra: map[string]any{"subtasks": 2}}},
		"planning.hitl": {out(OutcomeApprove)},
		"review":        {out("accept")},
	}))
	want := "planning@0 planning.hitl@0 implementation@1 review@1 implementation@2 review@2 documentation@2 publish@2"
	if got := trail(msgs); got != want || ending(x) != "done" {
		t.Errorf("got %s → %s\nwant %s → done", got, ending(x), want)
	}
}

// DESIGN.md § The path of one step, 5: "A Catch on a timed-out or failed
// worker state stops its ECS task before routing". A worker state that
// times out (no heartbeat) or fails passes "<node>.stop", which sends a
// stop message naming the node and carrying the caught error, and then
// routes where its Catch always did; a publish failure (no worker) sends
// none, a run without failures sends none, and an infrastructure failure
// (the worker never started) parks the run without one.
func TestCompile_CatchStopsTheWorkerBeforeRouting(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: lint, kind: tool, tool: lint }
    - { id: review, kind: evaluator, role: review, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: testing }
    - { from: testing, to: lint }
    - { from: lint, to: review }
    - { from: review, to: publish, outcome: accept }
`
	f := parse(t, yaml)
	cases := []struct {
		name      string
		answers   map[string][]reply
		trail     string
		stop      string // the one stop state expected, "" for none
		errName   string // the error it carries
		ending    string
		heartbeat int
	}{
		{"no failure", map[string][]reply{"review": {out("accept")}}, "build testing lint review publish", "", "", "done", 0},
		{"agent times out", map[string][]reply{"build": {{hang: true}}}, "build", "build.stop", "States.HeartbeatTimeout", ErrFailed, 1},
		{"checks fail", map[string][]reply{"testing": {{fail: "stratus.WorkerFailed"}}}, "build testing", "testing.stop", "stratus.WorkerFailed", ErrManualActionRequired, 0},
		{"tool fails", map[string][]reply{"lint": {{fail: "stratus.LaunchFailed"}}}, "build testing lint", "lint.stop", "stratus.LaunchFailed", ErrManualActionRequired, 0},
		{"evaluator fails", map[string][]reply{"review": {{fail: "stratus.WorkerFailed"}}}, "build testing lint review", "review.stop", "stratus.WorkerFailed", ErrFailed, 0},
		{"publish fails", map[string][]reply{"review": {out("accept")}, "publish": {{fail: "stratus.PublishFailed"}}}, "build testing lint review publish", "", "", ErrFailed, 0},
		// A worker that could not be started for want of capacity parks the
		// run (no worker to stop, no loop charged). The infrastructure
		// Retrier tries three more times first.
		{"agent infrastructure failure", map[string][]reply{"build": {{fail: ErrInfrastructure}}}, "build build build build", "", "", ErrManualActionRequired, 0},
		{"evaluator infrastructure failure", map[string][]reply{"review": {{fail: ErrInfrastructure}}}, "build testing lint review review review review", "", "", ErrManualActionRequired, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, msgs, stops := runFlowStops(t, f, Options{HeartbeatSeconds: c.heartbeat}, outcomes(c.answers))
			if got := trail(msgs); got != c.trail || ending(x) != c.ending {
				t.Errorf("%s → %s, want %s → %s", got, ending(x), c.trail, c.ending)
			}
			if c.stop == "" {
				if len(stops) != 0 {
					t.Errorf("stop messages %+v, want none", stops)
				}
				return
			}
			if len(stops) != 1 || stops[0].State != c.stop || stops[0].Kind != KindStop || stops[0].Node+StopSuffix != c.stop ||
				stops[0].Error == nil || stops[0].Error.Error != c.errName {
				t.Errorf("stop messages %+v, want one from %s carrying %s", stops, c.stop, c.errName)
			}
		})
	}
}

// README.md § Durable runs: every dispatch message carries its state's input,
// and an execution whose input names a dispatch state in resume_at enters the
// machine there with that input (its loop counters included), where a fresh
// one starts at init.
func TestCompile_ResumeEntryEntersTheNamedStateWithItsInput(t *testing.T) {
	t.Parallel()
	f := parse(t, fixLoops+"  budgets: { test_fix: 2, review_fix: 2 }\n")
	answers := outcomes(map[string][]reply{"testing": {out("pass")}, "review": {out("rework"), out("accept")}})
	_, fresh, _ := runFlowInput(t, f, Options{}, `{"run_id":"r-1"}`, answers)
	var first struct {
		RunID string         `json:"run_id"`
		Loops map[string]int `json:"loops"`
	}
	if len(fresh) == 0 || json.Unmarshal(fresh[0].Input, &first) != nil || first.RunID != "r-1" || first.Loops == nil {
		t.Fatalf("first message's state %s: want the state's input with run_id and loops", fresh[0].Input)
	}
	// Resumed at review with review_fix already at 1: one rework round is
	// left, then accept; the states before review are not entered.
	x, msgs, _ := runFlowInput(t, f, Options{}, `{"run_id":"r-1","resume_at":"review","loops":{"test_fix":0,"review_fix":1}}`, answers)
	if got := trail(msgs); got != "review fixing testing review publish" || ending(x) != "done" {
		t.Errorf("resumed at review: %s → %s, want review fixing testing review publish → done", got, ending(x))
	}
	var fixing struct {
		Loops map[string]int `json:"loops"`
	}
	if json.Unmarshal(msgs[1].Input, &fixing) != nil || fixing.Loops["review_fix"] != 2 {
		t.Errorf("fixing's state %s: want the resumed counter charged once more (review_fix 2)", msgs[1].Input)
	}
	// With that counter spent, the rework parks the run.
	x, msgs, _ = runFlowInput(t, f, Options{}, `{"run_id":"r-1","resume_at":"review","loops":{"test_fix":0,"review_fix":2}}`, answers)
	if got := trail(msgs); got != "review" || ending(x) != ErrManualActionRequired {
		t.Errorf("resumed with review_fix spent: %s → %s, want review → %s", got, ending(x), ErrManualActionRequired)
	}
	// A state the entry does not list fails the execution.
	x, msgs, _ = runFlowInput(t, f, Options{}, `{"run_id":"r-1","resume_at":"review.route"}`, answers)
	if len(msgs) != 0 || x.Error != "States.NoChoiceMatched" {
		t.Errorf("resume_at a Choice: %s → %s %s, want nothing dispatched and States.NoChoiceMatched", trail(msgs), x.Error, x.Cause)
	}
}

// A node named "resume" keeps its name; the entry becomes "run.resume".
func TestCompile_ResumeEntryKeepsClearOfNodeIDs(t *testing.T) {
	t.Parallel()
	f := parse(t, header+`  nodes:
    - { id: resume, kind: agent, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: resume, to: publish }
`)
	d := decode(t, compile(t, f, Options{}))
	if d.Names[0] != "run.resume" || d.States["run.resume"]["Type"] != "Choice" || d.States["resume"]["Type"] != "Task" {
		t.Errorf("states %q", d.Names)
	}
	if !slices.Contains(flow.StateNames(f), "run.resume") {
		t.Errorf("flow.StateNames %q lacks run.resume", flow.StateNames(f))
	}
	x, msgs, _ := runFlowInput(t, f, Options{}, `{"run_id":"r-1","resume_at":"publish"}`, outcomes(nil))
	if trail(msgs) != "publish" || ending(x) != "done" {
		t.Errorf("resumed at publish: %s → %s", trail(msgs), ending(x))
	}
}

// worc configuration.md § agents.retry, as compiled (Compile § Retry),
// run on the embedded executor: a worker
// state failing transiently is retried by its first Retrier (the same
// dispatch state again, $$.State.RetryCount one up); stratus.Blocked
// parks the step — "<node>.park" reads the wait from the cause,
// "<node>.wait" waits it — and enters the state again afresh (retry
// count 0); stratus.BlockedTimeout parks the run at
// manual_action_required; an infrastructure failure is retried three
// times, then parks the run too; a transient error past the Retrier's
// MaxAttempts fails the step as any other error does.
func TestCompile_TransientFailuresRetryParkAndGiveUp(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: publish }
`
	f := parse(t, yaml)
	blocked := reply{fail: ErrBlocked, cause: `{"wait_s":1,"retry_at":"2026-03-01T09:00:01Z","reason":"every provider unavailable"}`}
	one := retry.Default()
	one.MaxAttempts, one.MaxStageAttempts = 1, 1 // MaxAttempts 1: one retry a park cycle
	none := retry.Default()
	none.MaxAttempts, none.MaxStageAttempts = 0, 1 // no transient Retrier at all
	cases := []struct {
		name    string
		opt     Options
		build   []reply
		trail   string
		retries string // retry_count of each build message
		ending  string
	}{
		{"retried, then done", Options{}, []reply{{fail: ErrProviderUnavailable}, {fail: ErrRateLimited}, {fail: ErrNetworkUnavailable}, out("done")},
			"build build build build publish", "0 1 2 3", "done"},
		{"parked, then entered afresh", Options{}, []reply{{fail: ErrProviderUnavailable}, blocked, {fail: ErrProviderUnavailable}, out("done")},
			"build build build build publish", "0 1 0 1", "done"},
		{"parked too long", Options{}, []reply{blocked, {fail: ErrBlockedTimeout, cause: "parked 21600 s in all"}},
			"build build", "0 0", ErrManualActionRequired},
		{"infrastructure: three retries, then the run parks", Options{}, []reply{{fail: ErrInfrastructure}},
			"build build build build", "0 1 2 3", ErrManualActionRequired},
		{"a transient error past MaxAttempts fails the step", Options{Retry: &one}, []reply{{fail: ErrProviderUnavailable}},
			"build build", "0 1", ErrFailed},
		{"no transient Retrier", Options{Retry: &none}, []reply{{fail: ErrProviderUnavailable}},
			"build", "0", ErrFailed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			x, msgs := runFlow(t, f, c.opt, outcomes(map[string][]reply{"build": c.build}))
			var counts []string
			for _, m := range msgs {
				if m.State == "build" {
					counts = append(counts, fmt.Sprint(m.RetryCount))
				}
			}
			if got := trail(msgs); got != c.trail || ending(x) != c.ending || strings.Join(counts, " ") != c.retries {
				t.Errorf("%s → %s with retry counts %v, want %s → %s with %s", got, ending(x), counts, c.trail, c.ending, c.retries)
			}
		})
	}
	// The state a parked step enters again carries the park's reading of
	// the cause in $.last (recorded on the step as its input).
	_, msgs := runFlow(t, f, Options{}, outcomes(map[string][]reply{"build": {blocked, out("done")}}))
	if len(msgs) < 2 || !strings.Contains(string(msgs[1].Input), `"last":{"parked":"build","wait":{"wait_s":1,"retry_at":"2026-03-01T09:00:01Z","reason":"every provider unavailable"}}`) {
		t.Errorf("the state entered again after the park: %s", msgs[1].Input)
	}
}

// What the worker sends for each retry decision is what the compiled
// machine retries, parks or ends on: the run above, driven by the
// policy's own decisions (an engine that fails at once on every
// provider), parks until the blocked budget is spent and ends
// manual_action_required.
func TestTaskFailure_DrivesTheCompiledMachine(t *testing.T) {
	t.Parallel()
	const yaml = header + `  nodes:
    - { id: build, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: build, to: publish }
`
	p := retry.Default("claude", "codex")
	p.MaxBlocked = 90 * time.Second // parks of 30 s and up to 60 s, then give up
	var mu sync.Mutex
	var history []retry.Attempt
	var names []string
	start := time.Now()
	x, msgs := runFlow(t, parse(t, yaml), Options{Retry: &p}, func(m sent) reply {
		mu.Lock()
		defer mu.Unlock()
		now := start.Add(time.Since(start) * 100) // fastClock's time
		history = append(history, retry.Attempt{Provider: p.Provider("", history, now), Class: retry.ProviderUnavailable, Started: now, Ended: now})
		d := p.Decide("", history, now)
		name, cause, ok := TaskFailure(d)
		if !ok {
			t.Errorf("decision %v: no task failure", d.Action)
		}
		names = append(names, name)
		return reply{fail: name, cause: cause}
	})
	counts := map[string]int{}
	for _, n := range names {
		counts[n]++
	}
	// Each entry of the state: 2 providers × 3 attempts, the last one
	// parking (or, the blocked budget spent, giving up). How many parks
	// the 90 s take depends on the machine's speed, not their shape.
	entries := counts[ErrBlocked] + 1
	if ending(x) != ErrManualActionRequired || counts[ErrBlocked] < 1 || counts[ErrBlockedTimeout] != 1 ||
		len(msgs) != entries*6 || counts[ErrProviderUnavailable] != entries*5 {
		t.Errorf("%d attempts → %s, failures sent %v; want %d entries of 6 attempts (5 retried, then a park or the give-up) → %s",
			len(msgs), ending(x), counts, entries, ErrManualActionRequired)
	}
	for _, d := range []retry.Decision{{Action: retry.Retry, Class: retry.RateLimited}, {Action: retry.Hop, Class: retry.NetworkUnavailable}} {
		if name, _, _ := TaskFailure(d); name != map[retry.Class]string{retry.RateLimited: ErrRateLimited, retry.NetworkUnavailable: ErrNetworkUnavailable}[d.Class] {
			t.Errorf("%v of %s: %s", d.Action, d.Class, name)
		}
	}
	if _, _, ok := TaskFailure(retry.Decision{Action: retry.NotTransient}); ok {
		t.Error("a failure that is not transient has a transient name")
	}
}
