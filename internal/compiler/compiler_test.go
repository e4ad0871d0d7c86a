package compiler

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/testenv"
)

// peerFlows loads worc's packaged flows by task type; it skips t when they
// are not beside the checkout (internal/testenv).
func peerFlows(t *testing.T) map[string]*flow.Flow {
	t.Helper()
	return loadFlows(t, testenv.Peers(t, "worc", "flows"))
}

// corpus is every flow at hand: the built-in flows, named "builtin <name>",
// and worc's peer flows when they are beside the checkout (a test over the
// corpus still runs without them, and says what it left out).
func corpus(t *testing.T) map[string]*flow.Flow {
	t.Helper()
	out := map[string]*flow.Flow{}
	for name, f := range loadFlows(t, builtinFlowsDir) {
		out["builtin "+name] = f
	}
	if dir, ok := testenv.PeersIfPresent(t, "worc", "flows"); ok {
		for name, f := range loadFlows(t, dir) {
			out[name] = f
		}
	}
	return out
}

// builtinFlowsDir holds the flows `stratus install` writes.
var builtinFlowsDir = filepath.Join("..", "builtin", "flows")

// loadFlows loads every DIR/*.yaml by its stem; it fails t when there is none.
func loadFlows(t *testing.T, dir string) map[string]*flow.Flow {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no flows in %s: %v", dir, err)
	}
	out := map[string]*flow.Flow{}
	for _, file := range files {
		stem := strings.TrimSuffix(filepath.Base(file), ".yaml")
		f, err := flow.Load(dir, stem)
		if err != nil {
			t.Fatal(err)
		}
		out[stem] = f
	}
	return out
}

const header = `flow:
  name: t
  task_type: t
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
`

func parse(t *testing.T, yaml string) *flow.Flow {
	t.Helper()
	f, err := flow.Parse("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func compile(t *testing.T, f *flow.Flow, opt Options) []byte {
	t.Helper()
	out, err := Compile(f, opt)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// definition is the compiled JSON decoded for checks: state names in
// order and each state as a generic object.
type definition struct {
	StartAt string
	Names   []string
	States  map[string]map[string]any
}

func decode(t *testing.T, out []byte) definition {
	t.Helper()
	var d definition
	var raw struct {
		StartAt string
		States  json.RawMessage
	}
	if err := json.Unmarshal(out, &raw); err != nil {
		t.Fatalf("compiled output is not JSON: %v", err)
	}
	d.StartAt = raw.StartAt
	if err := json.Unmarshal(raw.States, &d.States); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw.States))
	dec.Token() // {
	for dec.More() {
		tok, _ := dec.Token()
		d.Names = append(d.Names, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// successors lists the states a state can move to.
func successors(s map[string]any) []string {
	var out []string
	for _, k := range []string{"Next", "Default"} {
		if v, ok := s[k].(string); ok {
			out = append(out, v)
		}
	}
	for _, k := range []string{"Choices", "Catch"} {
		list, _ := s[k].([]any)
		for _, it := range list {
			if v, ok := it.(map[string]any)["Next"].(string); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// checkWellFormed asserts what every compiled flow must hold: each
// transition names a state, each node has a Task state named by its id,
// and every state but the Fail terminals is reachable from StartAt.
func checkWellFormed(t *testing.T, f *flow.Flow, d definition) {
	t.Helper()
	for name, s := range d.States {
		for _, next := range successors(s) {
			if _, ok := d.States[next]; !ok {
				t.Errorf("state %q moves to %q, which does not exist", name, next)
			}
		}
	}
	// Compile § Retry (worc configuration.md § agents.retry): every Task state retries infrastructure
	// errors; a worker state first retries the transient ones (checkPark).
	for _, name := range d.Names {
		if s := d.States[name]; s["Type"] == "Task" {
			retry, _ := s["Retry"].([]any)
			if len(retry) == 0 {
				t.Errorf("Task state %q has no Retry", name)
				continue
			}
			checkInfraRetrier(t, name, retry[len(retry)-1])
			if body, ok := s["Parameters"].(map[string]any)["MessageBody"].(map[string]any); ok && s["Resource"] == DispatchResource && body["retry_count.$"] != "$$.State.RetryCount" {
				t.Errorf("Task state %q: message body %v lacks retry_count.$", name, body)
			}
		}
	}
	for _, n := range f.Nodes {
		s := d.States[n.ID]
		if s["Type"] != "Task" || s["Resource"] != DispatchResource {
			t.Errorf("node %q: state %v", n.ID, s)
		}
		body := s["Parameters"].(map[string]any)["MessageBody"].(map[string]any)
		if body["node"] != n.ID || body["kind"] != n.Kind || body["task_token.$"] != "$$.Task.Token" || body["run_id.$"] != "$.run_id" {
			t.Errorf("node %q: message body %v", n.ID, body)
		}
		checkStop(t, d, n)
	}
	seen := map[string]bool{d.StartAt: true}
	stack := []string{d.StartAt}
	for len(stack) > 0 {
		name := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, next := range successors(d.States[name]) {
			if !seen[next] {
				seen[next] = true
				stack = append(stack, next)
			}
		}
	}
	for _, name := range d.Names {
		if !seen[name] && d.States[name]["Type"] != "Fail" {
			t.Errorf("state %q is unreachable from %q", name, d.StartAt)
		}
	}
}

// allCatch is a state's States.ALL catcher: its last.
func allCatch(s map[string]any) map[string]any {
	list := s["Catch"].([]any)
	return list[len(list)-1].(map[string]any)
}

// checkStop asserts docs/architecture.md § The path of one step, 10 (a state
// that fails or times out passes "<node>.stop", which stops the worker before
// the failure routes): a worker node's States.ALL Catch goes to "<id>.stop", a
// plain sqs:sendMessage of {run_id, node, kind: stop, error} that passes the
// state through (ResultPath null) and goes on to where the Catch would have
// gone; a node without a worker has no stop state. And unless the failure
// continues the run (best_effort), an infrastructure failure
// (ErrInfrastructure) is caught first, straight to manual_action_required: no
// worker to stop, no loop charged; so is a reached cap (ErrCapReached),
// best_effort or not.
func checkStop(t *testing.T, d definition, n flow.Node) {
	t.Helper()
	stop, ok := d.States[n.ID+StopSuffix]
	catches := d.States[n.ID]["Catch"].([]any)
	catch := allCatch(d.States[n.ID])
	if !isWorker(n.Kind) {
		if ok || strings.HasSuffix(catch["Next"].(string), StopSuffix) {
			t.Errorf("node %q (kind %s runs no worker) has a stop state %v, catch %v", n.ID, n.Kind, stop, catch)
		}
		return
	}
	if !ok || catch["Next"] != n.ID+StopSuffix || catch["ResultPath"] != "$.error" || catch["ErrorEquals"].([]any)[0] != "States.ALL" {
		t.Errorf("worker node %q: catch %v, want States.ALL to %q with ResultPath $.error", n.ID, catch, n.ID+StopSuffix)
		return
	}
	// README.md § Cost and token caps: a reached cost or token cap parks the
	// run from every worker state, best_effort or not.
	parks := stop["Next"] == "failed" || stop["Next"] == "manual_action_required" || stop["Next"] == "run.failed" || stop["Next"] == "run.manual_action_required"
	want := []any{ErrInfrastructure, ErrCapReached}
	if !parks {
		want = []any{ErrCapReached}
	}
	if len(catches) != 4 {
		t.Errorf("worker node %q: catches %v, want Blocked, BlockedTimeout, %v, then States.ALL", n.ID, catches, want)
	} else if first := catches[2].(map[string]any); !slices.Equal(first["ErrorEquals"].([]any), want) || first["ResultPath"] != "$.error" ||
		!strings.HasSuffix(first["Next"].(string), "manual_action_required") {
		t.Errorf("worker node %q: third catch %v, want %v → manual_action_required", n.ID, first, want)
	} else {
		checkPark(t, d, n, catches[0].(map[string]any), catches[1].(map[string]any))
	}
	if stop["Type"] != "Task" || stop["Resource"] != "arn:aws:states:::sqs:sendMessage" || stop["ResultPath"] != nil ||
		stop["TimeoutSeconds"] != float64(StopTimeoutSeconds) || stop["HeartbeatSeconds"] != nil {
		t.Errorf("%s.stop: %v", n.ID, stop)
	}
	if _, present := stop["ResultPath"]; !present {
		t.Errorf("%s.stop: ResultPath must be null (present), not absent", n.ID)
	}
	body := stop["Parameters"].(map[string]any)["MessageBody"].(map[string]any)
	if len(body) != 4 || body["run_id.$"] != "$.run_id" || body["node"] != n.ID || body["kind"] != KindStop || body["error.$"] != "$.error" {
		t.Errorf("%s.stop: message body %v, want exactly run_id, node, kind stop, error", n.ID, body)
	}
	stopCatch := stop["Catch"].([]any)[0].(map[string]any)
	if stopCatch["Next"] != stop["Next"] || stopCatch["ResultPath"] != nil {
		t.Errorf("%s.stop: catch %v, want the stop's own Next %v with ResultPath null", n.ID, stopCatch, stop["Next"])
	}
}

// checkPark asserts the park shape (worc configuration.md §
// agents.retry: a blocked step parks, resumable) on a worker state: its
// first two catchers send stratus.Blocked (ResultPath $.last) to
// "<id>.park" and stratus.BlockedTimeout to manual_action_required; the
// park Pass parses the cause into $.last.wait and goes to "<id>.wait",
// which waits $.last.wait.wait_s seconds and enters the node again. Its
// Retry holds the transient Retrier, then the infrastructure one, and
// its message carries $$.State.RetryCount.
func checkPark(t *testing.T, d definition, n flow.Node, blocked, timeout map[string]any) {
	t.Helper()
	park, wait := n.ID+ParkSuffix, n.ID+WaitSuffix
	if !slices.Equal(blocked["ErrorEquals"].([]any), []any{ErrBlocked}) || blocked["ResultPath"] != "$.last" || blocked["Next"] != park {
		t.Errorf("worker node %q: first catch %v, want stratus.Blocked → %s with ResultPath $.last", n.ID, blocked, park)
	}
	if !slices.Equal(timeout["ErrorEquals"].([]any), []any{ErrBlockedTimeout}) || timeout["ResultPath"] != "$.error" || !strings.HasSuffix(timeout["Next"].(string), "manual_action_required") {
		t.Errorf("worker node %q: second catch %v, want stratus.BlockedTimeout → manual_action_required", n.ID, timeout)
	}
	p, w := d.States[park], d.States[wait]
	params, _ := p["Parameters"].(map[string]any)
	if p["Type"] != "Pass" || p["ResultPath"] != "$.last" || p["Next"] != wait || len(params) != 2 ||
		params["parked"] != n.ID || params["wait.$"] != "States.StringToJson($.last.Cause)" {
		t.Errorf("%s: %v", park, p)
	}
	if w["Type"] != "Wait" || w["SecondsPath"] != "$.last.wait.wait_s" || w["Next"] != n.ID || len(w) != 3 {
		t.Errorf("%s: %v", wait, w)
	}
	retry, _ := d.States[n.ID]["Retry"].([]any)
	if len(retry) != 2 {
		t.Fatalf("worker node %q: Retry %v, want the transient and the infrastructure Retriers", n.ID, retry)
	}
	transient := retry[0].(map[string]any)
	if !slices.Equal(transient["ErrorEquals"].([]any), []any{ErrProviderUnavailable, ErrRateLimited, ErrNetworkUnavailable}) ||
		transient["IntervalSeconds"] != 2.0 || transient["BackoffRate"] != 2.0 || transient["MaxDelaySeconds"] != 30.0 || transient["MaxAttempts"] != 8.0 {
		t.Errorf("worker node %q: transient Retrier %v, want worc's defaults (2 s, ×2, 30 s, 3 × 3 − 1)", n.ID, transient)
	}
	checkInfraRetrier(t, n.ID, retry[1])
	if body := d.States[n.ID]["Parameters"].(map[string]any)["MessageBody"].(map[string]any); body["retry_count.$"] != "$$.State.RetryCount" {
		t.Errorf("worker node %q: message body %v lacks retry_count.$", n.ID, body)
	}
}

// checkInfraRetrier asserts the infrastructure Retrier every Task state
// has: stratus.InfrastructureFailed and the SQS integration's errors, 5 s
// doubling to 60 s, three retries.
func checkInfraRetrier(t *testing.T, state string, r any) {
	t.Helper()
	infra, _ := r.(map[string]any)
	if !slices.Equal(infra["ErrorEquals"].([]any), []any{ErrInfrastructure, ErrSQSClient, ErrSQSAWS}) ||
		infra["IntervalSeconds"] != 5.0 || infra["BackoffRate"] != 2.0 || infra["MaxDelaySeconds"] != 60.0 || infra["MaxAttempts"] != 3.0 {
		t.Errorf("%s: infrastructure Retrier %v", state, infra)
	}
}

// caught returns where a node's failure routes to: its Catch's target,
// past the "<id>.stop" state of a worker node.
func caught(d definition, node string) string {
	next := allCatch(d.States[node])["Next"].(string)
	if next == node+StopSuffix {
		return d.States[next]["Next"].(string)
	}
	return next
}

const small = `flow:
  name: small
  task_type: small
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: planning, kind: agent, role_file: small/planning.md, permission_profile: read-only }
    - { id: implementation, kind: agent, role_file: small/implementation.md, session_scope: editing_lineage }
    - { id: review, kind: evaluator, role: review, role_file: small/review.md }
    - { id: fixing, kind: agent, role_file: small/fixing.md, session_scope: editing_lineage, lineage_affinity: implementation }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: planning, to: implementation }
    - { from: implementation, to: review }
    - { from: review, to: publish, outcome: accept }
    - { from: review, to: fixing, outcome: rework, loop: review_fix }
    - { from: fixing, to: review }
  budgets:
    review_fix: 3
`

// infraRetryJSON is every Task state's infrastructure Retrier.
const infraRetryJSON = `        {
          "ErrorEquals": [
            "stratus.InfrastructureFailed",
            "SQS.SdkClientException",
            "SQS.AmazonSQSException"
          ],
          "IntervalSeconds": 5,
          "BackoffRate": 2,
          "MaxDelaySeconds": 60,
          "MaxAttempts": 3
        }
`

// taskJSON is the Task state every node of the small flow compiles to,
// followed by its stop, park and wait states when the node runs a worker
// (Compile's Retry and park shape, with worc's agents.retry defaults).
func taskJSON(id, kind, next string) string {
	catch, after, transient, parkCatch := "failed", "", "", ""
	if kind == "publish" {
		// A refused merge ends manual_action_required, the pull request open.
		parkCatch = `        {
          "ErrorEquals": [
            "stratus.MergeBlocked"
          ],
          "ResultPath": "$.error",
          "Next": "manual_action_required"
        },
`
	} else {
		catch = id + ".stop"
		transient = `        {
          "ErrorEquals": [
            "stratus.ProviderUnavailable",
            "stratus.RateLimited",
            "stratus.NetworkUnavailable"
          ],
          "IntervalSeconds": 2,
          "BackoffRate": 2,
          "MaxDelaySeconds": 30,
          "MaxAttempts": 8
        },
`
		parkCatch = `        {
          "ErrorEquals": [
            "stratus.Blocked"
          ],
          "ResultPath": "$.last",
          "Next": "` + id + `.park"
        },
        {
          "ErrorEquals": [
            "stratus.BlockedTimeout"
          ],
          "ResultPath": "$.error",
          "Next": "manual_action_required"
        },
        {
          "ErrorEquals": [
            "stratus.InfrastructureFailed",
            "stratus.CapReached"
          ],
          "ResultPath": "$.error",
          "Next": "manual_action_required"
        },
`
		after = `    "` + id + `.stop": {
      "Type": "Task",
      "Resource": "arn:aws:states:::sqs:sendMessage",
      "Parameters": {
        "QueueUrl": "${DispatchQueueUrl}",
        "MessageBody": {
          "run_id.$": "$.run_id",
          "node": "` + id + `",
          "kind": "stop",
          "error.$": "$.error"
        }
      },
      "ResultPath": null,
      "TimeoutSeconds": 60,
      "Retry": [
` + infraRetryJSON + `      ],
      "Catch": [
        {
          "ErrorEquals": [
            "States.ALL"
          ],
          "ResultPath": null,
          "Next": "failed"
        }
      ],
      "Next": "failed"
    },
    "` + id + `.park": {
      "Type": "Pass",
      "Parameters": {
        "parked": "` + id + `",
        "wait.$": "States.StringToJson($.last.Cause)"
      },
      "ResultPath": "$.last",
      "Next": "` + id + `.wait"
    },
    "` + id + `.wait": {
      "Type": "Wait",
      "SecondsPath": "$.last.wait.wait_s",
      "Next": "` + id + `"
    },
`
	}
	return `    "` + id + `": {
      "Type": "Task",
      "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken",
      "Parameters": {
        "QueueUrl": "${DispatchQueueUrl}",
        "MessageBody": {
          "run_id.$": "$.run_id",
          "node": "` + id + `",
          "kind": "` + kind + `",
          "task_token.$": "$$.Task.Token",
          "state.$": "$",
          "retry_count.$": "$$.State.RetryCount"
        }
      },
      "ResultPath": "$.last",
      "TimeoutSeconds": 21600,
      "HeartbeatSeconds": 300,
      "Retry": [
` + transient + infraRetryJSON + `      ],
      "Catch": [
` + parkCatch + `        {
          "ErrorEquals": [
            "States.ALL"
          ],
          "ResultPath": "$.error",
          "Next": "` + catch + `"
        }
      ],
      "Next": "` + next + `"
    },
` + after
}

func TestCompile_GoldenSmallFlow(t *testing.T) { // docs/architecture.md § The path of one step, § The compiled state machines
	t.Parallel()
	want := `{
  "Comment": "Stratus flow small (task_type small)",
  "StartAt": "resume",
  "States": {
    "resume": {
      "Type": "Choice",
      "Choices": [
        {
          "Not": {
            "Variable": "$.resume_at",
            "IsPresent": true
          },
          "Next": "init"
        },
        {
          "Variable": "$.resume_at",
          "StringEquals": "planning",
          "Next": "planning"
        },
        {
          "Variable": "$.resume_at",
          "StringEquals": "implementation",
          "Next": "implementation"
        },
        {
          "Variable": "$.resume_at",
          "StringEquals": "review",
          "Next": "review"
        },
        {
          "Variable": "$.resume_at",
          "StringEquals": "fixing",
          "Next": "fixing"
        },
        {
          "Variable": "$.resume_at",
          "StringEquals": "publish",
          "Next": "publish"
        }
      ]
    },
    "init": {
      "Type": "Pass",
      "Result": {
        "review_fix": 0
      },
      "ResultPath": "$.loops",
      "Next": "planning"
    },
` + taskJSON("planning", "agent", "implementation") +
		taskJSON("implementation", "agent", "review") +
		taskJSON("review", "evaluator", "review.route") + `    "review.route": {
      "Type": "Choice",
      "Choices": [
        {
          "Variable": "$.last.outcome",
          "StringEquals": "accept",
          "Next": "publish"
        },
        {
          "Variable": "$.last.outcome",
          "StringEquals": "rework",
          "Next": "review_fix.budget"
        }
      ],
      "Default": "manual_action_required"
    },
    "review_fix.budget": {
      "Type": "Choice",
      "Choices": [
        {
          "Variable": "$.loops.review_fix",
          "NumericGreaterThanEquals": 3,
          "Next": "manual_action_required"
        }
      ],
      "Default": "review_fix.count"
    },
    "review_fix.count": {
      "Type": "Pass",
      "Parameters": {
        "review_fix.$": "States.MathAdd($.loops.review_fix, 1)"
      },
      "ResultPath": "$.loops",
      "Next": "fixing"
    },
` + taskJSON("fixing", "agent", "review") +
		taskJSON("publish", "publish", "done") + `    "done": {
      "Type": "Succeed"
    },
    "failed": {
      "Type": "Fail",
      "Error": "stratus.Failed",
      "Cause": "a step failed or timed out"
    },
    "manual_action_required": {
      "Type": "Fail",
      "Error": "stratus.ManualActionRequired",
      "Cause": "a budget ran out, a gate could not decide, or an infrastructure step failed"
    }
  }
}
`
	got := string(compile(t, parse(t, small), Options{}))
	if got != want {
		t.Errorf("compiled small flow differs from the golden definition.\ngot:\n%s", got)
	}
}

func TestCompile_EveryPeerFlow(t *testing.T) { // peers/worc/README.md: Stratus must load these flows unchanged
	t.Parallel()
	for name, f := range peerFlows(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out := compile(t, f, Options{})
			if !bytes.HasSuffix(out, []byte("}\n")) || !json.Valid(out) {
				t.Fatalf("not JSON ending in a newline:\n%s", out)
			}
			checkWellFormed(t, f, decode(t, out))
		})
	}
}

func TestCompile_IsDeterministic(t *testing.T) { // docs/architecture.md § Layout: statemachine/ is checked in and a test fails when stale
	t.Parallel()
	for name, f := range corpus(t) {
		first := compile(t, f, Options{})
		for range 3 {
			if again := compile(t, f, Options{}); !bytes.Equal(first, again) {
				t.Fatalf("%s: two compiles differ", name)
			}
		}
		// A fresh parse of the same file compiles to the same bytes too.
		reloaded, err := flow.Load(filepath.Dir(f.File), f.TaskType)
		if err != nil {
			t.Fatal(err)
		}
		if again := compile(t, reloaded, Options{}); !bytes.Equal(first, again) {
			t.Fatalf("%s: compile after a fresh Load differs", name)
		}
	}
}

func TestCompile_StateNamesReadLikeTheFlow(t *testing.T) { // docs/architecture.md § The compiled state machines: review, review.route, review_fix.budget
	t.Parallel()
	d := decode(t, compile(t, peerFlows(t)["implementation"], Options{}))
	want := []string{
		"resume", "init", "init.subtask",
		"refinement", "refinement.stop", "refinement.park", "refinement.wait", "refinement.human_input", "refinement.hitl", "refinement.hitl.route", "refinement_hitl.budget", "refinement_hitl.count",
		"planning", "planning.stop", "planning.park", "planning.wait", "planning.human_input", "planning.hitl", "planning.hitl.route", "planning_hitl.budget", "planning_hitl.count",
		"planning.decompose", "decompose.start",
		"implementation", "implementation.stop", "implementation.park", "implementation.wait", "testing", "testing.stop", "testing.park", "testing.wait", "testing.route", "test_fix.budget", "test_fix.count",
		"review", "review.stop", "review.park", "review.wait", "review.route", "review_fix.budget", "review_fix.count", "decompose.more", "decompose.next", "decompose.reset",
		"fixing", "fixing.stop", "fixing.park", "fixing.wait", "documentation", "documentation.stop", "documentation.park", "documentation.wait", "publish", "done", "failed", "manual_action_required",
	}
	if !slices.Equal(d.Names, want) {
		t.Errorf("state names\n%q\nwant\n%q", d.Names, want)
	}
	// Each count state copies every counter and adds one to its own (and
	// to the global backstop's).
	params := d.States["test_fix.count"]["Parameters"].(map[string]any)
	if params["test_fix.$"] != "States.MathAdd($.loops.test_fix, 1)" || params["global_fix_iterations.$"] != "States.MathAdd($.loops.global_fix_iterations, 1)" ||
		params["review_fix.$"] != "$.loops.review_fix" || params["planning_hitl.$"] != "$.loops.planning_hitl" || len(params) != 5 {
		t.Errorf("test_fix.count parameters %v", params)
	}
	if r := d.States["init"]["Result"].(map[string]any); len(r) != 5 || r["test_fix"] != 0.0 || r["review_fix"] != 0.0 || r["global_fix_iterations"] != 0.0 {
		t.Errorf("init result %v: want one counter per loop, per hitl agent and the global backstop", r)
	}
}

func TestCompile_TerminalsKeepClearOfNodeIDs(t *testing.T) { // peers/worc/flows/merge.yaml names its publish node "done"
	t.Parallel()
	f := peerFlows(t)["merge"]
	d := decode(t, compile(t, f, Options{}))
	if d.States["done"]["Type"] != "Task" || d.States["done"]["Next"] != "run.done" || d.States["run.done"]["Type"] != "Succeed" {
		t.Errorf("done: %v, run.done: %v", d.States["done"], d.States["run.done"])
	}
	if d.States["testing.route"]["Choices"].([]any)[0].(map[string]any)["Next"] != "done" {
		t.Errorf("testing pass should route to the publish node: %v", d.States["testing.route"])
	}
	checkWellFormed(t, f, d)
}

// The tool-routes-back-to-a-fixer example of flow-authoring.md, bounded
// (as written there its fail edge has no budget, which validation rejects).
const mdCheck = header + `  nodes:
    - { id: draft, kind: agent, role_file: t/draft.md }
    - id: md-check
      kind: tool
      tool: md-check
      args: { min_chars: 500, max_chars: 4000 }
      timeout_seconds: 120
    - { id: fix, kind: agent, role_file: roles/fix.md, timeout_seconds: 7200 }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: draft, to: md-check }
    - { from: md-check, to: publish, outcome: pass }
    - { from: md-check, to: fix, outcome: fail, budget: 4 }
    - { from: fix, to: md-check }
`

func TestCompile_InlineExampleFlows(t *testing.T) { // ../shared/peers/worc/docs/flow-authoring.md § Example — a tool check that routes back to a fixer
	t.Parallel()
	f := parse(t, mdCheck)
	d := decode(t, compile(t, f, Options{}))
	checkWellFormed(t, f, d)
	want := []string{"resume", "init", "draft", "draft.stop", "draft.park", "draft.wait", "md-check", "md-check.stop", "md-check.park", "md-check.wait", "md-check.route",
		"md_check_fail.budget", "md_check_fail.count", "fix", "fix.stop", "fix.park", "fix.wait", "publish", "done", "failed", "manual_action_required"}
	if !slices.Equal(d.Names, want) {
		t.Errorf("state names %q\nwant %q", d.Names, want)
	}
	if r := d.States["init"]["Result"].(map[string]any); len(r) != 1 || r["md_check_fail"] != 0.0 {
		t.Errorf("inline budget counter: %v", r)
	}
	budget := d.States["md_check_fail.budget"]["Choices"].([]any)[0].(map[string]any)
	if budget["Variable"] != "$.loops.md_check_fail" || budget["NumericGreaterThanEquals"] != 4.0 {
		t.Errorf("budget rule %v", budget)
	}

	// As written in the doc, the fail edge is unbounded: a compile error.
	unbounded := parse(t, strings.Replace(mdCheck, ", budget: 4", "", 1))
	_, err := Compile(unbounded, Options{})
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "edge md-check -> fix on fail is unbounded") {
		t.Errorf("unbounded example: %v", err)
	}
}

func TestCompile_TimeoutsHeartbeatsAndCatches(t *testing.T) { // reference.md § tool node, § hitl node: timeouts park at manual_action_required
	t.Parallel()
	f := parse(t, header+`  nodes:
    - { id: ask, kind: hitl, signal: approval, timeout_s: 3600 }
    - { id: build, kind: agent, role_file: t/b.md, timeout_seconds: 7200 }
    - { id: testing, kind: checks, checker: command_profile }
    - { id: lint, kind: tool, tool: lint }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: ask, to: build, outcome: route:approve }
    - { from: ask, to: publish, outcome: route:deny }
    - { from: build, to: testing }
    - { from: testing, to: lint, outcome: pass }
    - { from: testing, to: build, outcome: fail, budget: 2 }
    - { from: lint, to: publish }
`)
	d := decode(t, compile(t, f, Options{DefaultTimeoutSeconds: 1000, HeartbeatSeconds: 60, QueueURL: "https://sqs.local/q?a=1&b=2"}))
	checkWellFormed(t, f, d)
	cases := []struct {
		node      string
		timeout   float64
		heartbeat any
		catch     string
	}{
		{"ask", 3900, nil, "manual_action_required"},
		{"build", 7500, 60.0, "failed"},
		{"testing", 1300, 60.0, "manual_action_required"},
		{"lint", 1300, 60.0, "manual_action_required"},
		{"publish", 1300, 60.0, "failed"},
	}
	for _, c := range cases {
		s := d.States[c.node]
		if s["TimeoutSeconds"] != c.timeout || s["HeartbeatSeconds"] != c.heartbeat || caught(d, c.node) != c.catch {
			t.Errorf("%s: timeout %v heartbeat %v catch %v; want %v %v %v", c.node, s["TimeoutSeconds"], s["HeartbeatSeconds"], caught(d, c.node), c.timeout, c.heartbeat, c.catch)
		}
		if q := s["Parameters"].(map[string]any)["QueueUrl"]; q != "https://sqs.local/q?a=1&b=2" {
			t.Errorf("%s: QueueUrl %v", c.node, q)
		}
	}
	for _, node := range []string{"build", "testing", "lint"} {
		if q := d.States[node+StopSuffix]["Parameters"].(map[string]any)["QueueUrl"]; q != "https://sqs.local/q?a=1&b=2" {
			t.Errorf("%s.stop: QueueUrl %v", node, q)
		}
	}
	if d.States["lint"]["Next"] != "publish" {
		t.Errorf("lint with one unconditional edge: Next %v", d.States["lint"]["Next"])
	}
}

func TestCompile_RouteDefaultIsTheUnconditionalEdge(t *testing.T) { // docs/contracts.md § Tools: route:<label> drives an explicit edge
	t.Parallel()
	f := parse(t, header+`  nodes:
    - { id: triage, kind: tool, tool: triage }
    - { id: docs, kind: agent, role_file: t/d.md }
    - { id: code, kind: agent, role_file: t/c.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: triage, to: docs, outcome: route:docs }
    - { from: triage, to: code }
    - { from: docs, to: publish }
    - { from: code, to: publish }
`)
	d := decode(t, compile(t, f, Options{}))
	route := d.States["triage.route"]
	rules := route["Choices"].([]any)
	if len(rules) != 1 || rules[0].(map[string]any)["StringEquals"] != "route:docs" || route["Default"] != "code" {
		t.Errorf("triage.route %v", route)
	}
}

func TestCompile_OneLoopFeedingSeveralTargetsGetsSuffixedStates(t *testing.T) { // docs/architecture.md § The path of one step: rework edges pass through a budget counter
	t.Parallel()
	f := parse(t, header+`  nodes:
    - { id: write, kind: agent, role_file: t/w.md }
    - { id: check, kind: tool, tool: lint }
    - { id: critic, kind: evaluator, role: critic, role_file: t/c.md }
    - { id: fix_lint, kind: agent, role_file: t/fl.md }
    - { id: fix_style, kind: agent, role_file: t/fs.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: write, to: check }
    - { from: check, to: critic, outcome: pass }
    - { from: check, to: fix_lint, outcome: fail, loop: fixes }
    - { from: critic, to: publish, outcome: accept }
    - { from: critic, to: fix_style, outcome: rework, loop: fixes }
    - { from: fix_lint, to: check }
    - { from: fix_style, to: check }
  budgets: { fixes: 5, unused: 1 }
`)
	d := decode(t, compile(t, f, Options{}))
	checkWellFormed(t, f, d)
	for _, name := range []string{"fixes.budget.fix_lint", "fixes.count.fix_lint", "fixes.budget.fix_style", "fixes.count.fix_style"} {
		if _, ok := d.States[name]; !ok {
			t.Errorf("missing state %q in %q", name, d.Names)
		}
	}
	if d.States["fixes.count.fix_style"]["Next"] != "fix_style" || d.States["fixes.budget.fix_lint"]["Default"] != "fixes.count.fix_lint" {
		t.Errorf("loop states: %v %v", d.States["fixes.count.fix_style"], d.States["fixes.budget.fix_lint"])
	}
	if r := d.States["init"]["Result"].(map[string]any); len(r) != 1 {
		t.Errorf("both edges charge the one counter fixes: %v", r)
	}
}

func TestCompile_Errors(t *testing.T) {
	t.Parallel()
	twoUncond := parse(t, header+`  nodes:
    - { id: a, kind: agent, role_file: t/a.md }
    - { id: b, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: a, to: b }
    - { from: a, to: publish }
    - { from: b, to: publish }
`)
	collide := parse(t, header+`  nodes:
    - { id: s, kind: agent, role_file: t/s.md }
    - { id: a, kind: tool, tool: x }
    - { id: t, kind: tool, tool: y }
    - { id: b, kind: agent, role_file: t/b.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: s, to: a }
    - { from: a, to: t, outcome: pass }
    - { from: a, to: b, outcome: fail, budget: 2 }
    - { from: t, to: publish, outcome: pass }
    - { from: t, to: b, outcome: fail, loop: a_fail }
    - { from: b, to: a }
  budgets: { a_fail: 3 }
`)
	cases := []struct {
		name string
		f    *flow.Flow
		opt  Options
		want string
	}{
		{"nil flow", nil, Options{}, "no flow"},
		{"fatal validation problems are listed", parse(t, header+"  nodes:\n    - { id: a, kind: agent }\n    - { id: B, kind: tool, tool: x }\n  edges:\n    - { from: a, to: B }\n"), Options{},
			"flow \"t\" cannot be compiled: 2 fatal problem(s):\nt.yaml:8:9: node \"a\" (agent) requires role_file\nt.yaml:9:9: node id \"B\" must match"},
		{"two unconditional edges name the node", twoUncond, Options{}, `node "a" already has an unconditional edge (edges[0], to "b")`},
		{"counter names collide", collide, Options{}, `the inline budget of edge a -> b (fail) and loop "a_fail" both count in $.loops.a_fail; rename one`},
		{"negative timeout", parse(t, small), Options{DefaultTimeoutSeconds: -1}, "DefaultTimeoutSeconds: -1; want a positive number"},
		{"heartbeat not below the timeout", parse(t, small), Options{DefaultTimeoutSeconds: 100, HeartbeatSeconds: 400}, "HeartbeatSeconds: 400 must be less than"},
		{"negative hitl timeout", parse(t, small), Options{HITLTimeoutSeconds: -1}, "HITLTimeoutSeconds: -1; want a positive number"},
		{"negative max_fix_cycles", parse(t, small), Options{MaxFixCycles: -2}, "MaxFixCycles: -2; want a cap > 0"},
		{"decomposition region without an entry from proposed_by", parse(t, strings.Replace(small, "  budgets:", "  decomposition: { proposed_by: fixing, sub_flow: [implementation] }\n  budgets:", 1)), Options{},
			`decomposition.sub_flow is not entered from proposed_by "fixing"`},
		{"a loop named like an agent's hitl counter", parse(t, strings.NewReplacer("loop: review_fix", "loop: fixing_hitl", "review_fix: 3", "fixing_hitl: 3",
			"lineage_affinity: implementation }", "lineage_affinity: implementation, hitl: { allow_question: true } }").Replace(small)), Options{},
			`loop "fixing_hitl" and the hitl rounds of node "fixing" both count in $.loops.fixing_hitl; rename one`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out, err := Compile(c.f, c.opt)
			var se *stratus.Error
			if out != nil || !errors.As(err, &se) || se.Code != stratus.EINVALID {
				t.Fatalf("Compile = %d bytes, %v; want EINVALID", len(out), err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error:\n%s\nwant it to contain:\n%s", err, c.want)
			}
		})
	}
}

func TestCompile_LongStateNamesAreRejected(t *testing.T) { // Step Functions: a state name has at most 80 characters
	t.Parallel()
	loopName := strings.Repeat("l", 75)
	f := parse(t, header+`  nodes:
    - { id: s, kind: agent, role_file: t/s.md }
    - { id: a, kind: agent, role_file: t/a.md }
    - { id: r, kind: evaluator, role: review, role_file: t/r.md }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: s, to: a }
    - { from: a, to: r }
    - { from: r, to: publish, outcome: accept }
    - { from: r, to: a, outcome: rework, loop: `+loopName+` }
  budgets: { `+loopName+`: 2 }
`)
	_, err := Compile(f, Options{})
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), `state name "`+loopName+`.budget" is longer than 80 characters`) {
		t.Errorf("err %v", err)
	}
}
