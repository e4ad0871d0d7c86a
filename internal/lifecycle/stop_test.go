package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

const loopFlow = `flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: draft, kind: agent, role_file: f/draft.md }
    - { id: write, kind: agent, role_file: f/write.md }
    - { id: judge, kind: evaluator, role: review, role_file: f/judge.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: draft, to: write }
    - { from: write, to: judge }
    - { from: judge, to: publish, outcome: accept }
    - { from: judge, to: write, outcome: rework, loop: fix }
  budgets: BUDGETS
`

// execute compiles the flow and runs it on the embedded executor (the one
// `stratus run` uses), answering each worker Task from outcome(node,
// visit); "!" + name fails the Task with that error. It returns the
// execution, its history and its definition.
func execute(t *testing.T, src string, outcome func(node string, visit int) string) (executor.Execution, []executor.HistoryEvent, []byte, *flow.Flow) {
	t.Helper()
	return executeWith(t, src, compiler.Options{}, outcome)
}

// silent is the outcome of a worker that never answers nor beats: its
// Task times out on its heartbeat.
const silent = "(silent)"

// executeWith is execute with the compiler's options.
func executeWith(t *testing.T, src string, opts compiler.Options, outcome func(node string, visit int) string) (executor.Execution, []executor.HistoryEvent, []byte, *flow.Flow) {
	t.Helper()
	fl, err := flow.Parse("f.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	def, err := compiler.Compile(fl, opts)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		visits = map[string]int{}
		x      *embedded.Executor
	)
	x = embedded.New(embedded.Options{
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
				if call.Resource == compiler.StopResource {
					return json.RawMessage(`{"MessageId":"stop"}`), nil
				}
				var p struct {
					MessageBody struct {
						Node string `json:"node"`
					}
				}
				json.Unmarshal(call.Parameters, &p)
				node := p.MessageBody.Node
				mu.Lock()
				visits[node]++
				v := visits[node]
				mu.Unlock()
				out := outcome(node, v)
				if out == silent {
					return json.RawMessage(`{"MessageId":"test"}`), nil
				}
				go func() {
					if name, ok := cutPrefix(out, "!"); ok {
						x.SendTaskFailure(context.Background(), call.Token, name, "the fake worker failed")
						return
					}
					b, _ := json.Marshal(map[string]any{"node": node, "step_ref": fmt.Sprintf("%s#%d", node, v), "outcome": out})
					x.SendTaskSuccess(context.Background(), call.Token, b)
				}()
				return json.RawMessage(`{"MessageId":"test"}`), nil
			},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := x.StartExecution(ctx, executor.StartInput{StateMachine: "f", Definition: def, Name: "r-1", Input: json.RawMessage(`{"run_id":"r-1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if ex, err = x.WaitExecution(ctx, ex.ARN); err != nil {
		t.Fatal(err)
	}
	return ex, x.History(ex.ARN), def, fl
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}

// The end of a parked run is read from the execution, so a spent budget
// (named, with its size) and an outcome no edge takes (named, with its node)
// are told apart; and what each budget spent is known on every terminal, not
// only from a done run's output.
func TestReadStop_BudgetSpentVersusNoEdgeTakesTheOutcome(t *testing.T) {
	t.Parallel()
	always := func(review string) func(string, int) string {
		return func(node string, _ int) string {
			if node == "judge" {
				return review
			}
			return "done"
		}
	}
	for _, tc := range []struct {
		name, budgets string
		answer        func(string, int) string
		want          report.Stop
		spent         map[string]int
	}{
		{"loop budget spent", "{ fix: 2 }", always("rework"),
			report.Stop{Error: compiler.ErrManualActionRequired, StepRef: "judge#3", Outcome: "rework", Budget: `loop "fix"`, Limit: 2},
			map[string]int{"fix": 2}},
		{"global backstop spent first", "{ fix: 5, global_fix_iterations: 1 }", always("rework"),
			report.Stop{Error: compiler.ErrManualActionRequired, StepRef: "judge#2", Outcome: "rework", Budget: `the global backstop "global_fix_iterations"`, Limit: 1},
			map[string]int{"fix": 1, "global_fix_iterations": 1}},
		{"no edge takes the outcome", "{ fix: 2 }", always("maybe"),
			report.Stop{Error: compiler.ErrManualActionRequired, StepRef: "judge#1", Outcome: "maybe", Node: "judge"},
			map[string]int{"fix": 0}},
		{"a caught failure", "{ fix: 2 }", func(node string, _ int) string {
			if node == "write" {
				return "!stratus.WorkerFailed"
			}
			return "done"
		}, report.Stop{Error: "stratus.WorkerFailed", Cause: "the fake worker failed"}, map[string]int{"fix": 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := loopFlow[:len(loopFlow)-len("BUDGETS\n")] + tc.budgets + "\n"
			ex, hist, def, fl := execute(t, src, tc.answer)
			got := ReadStop(hist, def, fl, ex.Error, ex.Cause)
			if got == nil {
				t.Fatalf("no stop read from %s", ex.Status)
			}
			// The execution's own cause is kept only when no Catch caught an error.
			if tc.want.Cause == "" {
				tc.want.Cause = ex.Cause
			}
			if *got != tc.want {
				t.Errorf("stop\n got %+v\nwant %+v", *got, tc.want)
			}
			if spent := SpentBudgets(hist); !maps.Equal(spent, tc.spent) {
				t.Errorf("spent = %v, want %v", spent, tc.spent)
			}
		})
	}
	// A done run: no stop, and its spend is known too.
	ex, hist, def, fl := execute(t, loopFlow[:len(loopFlow)-len("BUDGETS\n")]+"{ fix: 3 }\n", func(node string, v int) string {
		if node == "judge" && v == 1 {
			return "rework"
		}
		if node == "judge" {
			return "accept"
		}
		return "done"
	})
	if s := ReadStop(hist, def, fl, ex.Error, ex.Cause); s != nil || ex.Status != executor.StatusSucceeded {
		t.Errorf("done run: status %s, stop %+v", ex.Status, s)
	}
	if spent := SpentBudgets(hist); !maps.Equal(spent, map[string]int{"fix": 1}) {
		t.Errorf("done run spent %v", spent)
	}
}

// A decomposition's per-subtask reset zeroes a loop's counter; what the
// run spent is the sum of the charges, not the counter's last value
// ("budgets spent shows review_fix 0 after a rework").
func TestSpentBudgets_CountsChargesAcrossAReset(t *testing.T) {
	t.Parallel()
	ev := func(typ, state, loops string) executor.HistoryEvent {
		e := executor.HistoryEvent{Type: typ, State: state}
		data := json.RawMessage(`{"run_id":"r","loops":` + loops + `}`)
		if e.IsStateEntered() {
			e.Input = data
		} else {
			e.Output = data
		}
		return e
	}
	hist := []executor.HistoryEvent{
		{Type: executor.EventPassStateEntered, State: "init", Input: json.RawMessage(`{"run_id":"r"}`)},
		ev(executor.EventPassStateExited, "init", `{"fix":0,"global_fix_iterations":0}`),
		ev(executor.EventPassStateExited, "fix.count", `{"fix":1,"global_fix_iterations":1}`),
		ev(executor.EventPassStateExited, "decompose.reset", `{"fix":0,"global_fix_iterations":1}`),
		ev(executor.EventPassStateExited, "fix.count", `{"fix":1,"global_fix_iterations":2}`),
		ev(executor.EventTaskStateEntered, "review", `{"fix":1,"global_fix_iterations":2}`),
	}
	if got, want := SpentBudgets(hist), map[string]int{"fix": 2, "global_fix_iterations": 2}; !maps.Equal(got, want) {
		t.Errorf("spent = %v, want %v", got, want)
	}
	if got := SpentBudgets(nil); got != nil {
		t.Errorf("no history: %v", got)
	}
}
