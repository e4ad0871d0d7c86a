package lifecycle

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/report"
)

// ResumeOptions change where a run resumes.
type ResumeOptions struct {
	// ResetFixBudget sets every loop counter ($.loops: each rework loop's,
	// the global backstop's, each agent's hitl rounds) back to 0 before
	// the run goes on, so a run parked because a budget ran out continues
	// into the loop it was refused.
	ResetFixBudget bool
}

// ResumePoint is where a stopped run goes on.
type ResumePoint struct {
	// State is the dispatch state (a node's Task, or an agent's
	// "<node>.hitl") the new execution enters through the resume entry.
	State string
	// Input is the new execution's input: the state's input with
	// resume_at = State.
	Input json.RawMessage
	// From is the step_ref of the step that stopped the run; Rerun says it
	// runs again (as a new visit of its node) rather than being continued
	// after.
	From  string
	Rerun bool
	// Reset lists the $.loops counters ResetFixBudget set back to 0, with
	// what they stood at.
	Reset map[string]int
}

// BudgetSpentError is PlanResume's answer for a run parked because a loop
// budget ran out, resumed without ResetFixBudget: going on would park it
// again at once.
type BudgetSpentError struct {
	Step    string // the step whose outcome was refused its loop
	Check   string // the budget state that refused it: "<counter>.budget[...]"
	Counter string
	Spent   int
}

func (e *BudgetSpentError) Error() string {
	return fmt.Sprintf("the run stopped after %s because budget %q is spent (%d rounds, state %s): resuming would stop there again; pass --reset-fix-budget to give every loop its budget back",
		e.Step, e.Counter, e.Spent, e.Check)
}

// PlanResume says where a run that stopped resumes
// (README.md § Durable runs): from the step that stopped it, its last one.
// Finished steps are never run again; their files, budget counters and costs
// stay.
//
//   - A step that did not complete (failed, canceled by an interrupt, still
//     running or waiting when the owner died) runs again: the run enters
//     its state with the input it was dispatched with.
//   - A completed step is continued after: its value is applied to its
//     state's input (ResultPath) and the machine's Choice and Pass states
//     that follow are walked, as the executor would, to the next dispatch
//     state — unless that walk ends in a Fail: then a loop budget that
//     ran out needs ResetFixBudget (else *BudgetSpentError), and any other
//     refusal (a gate whose outcome no edge takes) runs the step again.
//
// The supervisor's turns are not flow steps and are passed over. A run
// without steps starts over (State ""). def is the run's compiled
// definition; steps are its steps in creation order. Errors: EINVALID for
// a definition that does not parse, a step recorded before steps kept
// their state input, or a run that already reached its Succeed state;
// *BudgetSpentError.
func PlanResume(def []byte, runID, taskID string, steps []stratus.Step, o ResumeOptions) (*ResumePoint, error) {
	sm, err := asl.Parse(def)
	if err != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "the run's compiled definition: %v", err)
	}
	// The supervisor's turns are steps too, but of no state: the run
	// resumes from its last flow step.
	steps = slices.DeleteFunc(slices.Clone(steps), func(s stratus.Step) bool { return s.Kind == report.Kind })
	if len(steps) == 0 {
		in, _ := json.Marshal(map[string]string{"run_id": runID, "task_id": taskID})
		return &ResumePoint{Input: in}, nil
	}
	last := steps[len(steps)-1]
	state := sm.States[last.Node]
	if state == nil || state.Type != asl.TypeTask {
		return nil, stratus.Errorf(stratus.EINVALID, "step %s: the run's definition has no dispatch state %q", last.StepRef, last.Node)
	}
	if len(last.Input) == 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "step %s was recorded without its state input (a run started before this version of Stratus) and cannot be resumed; run the task again", last.StepRef)
	}
	input, err := asl.Decode(last.Input)
	if err != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "step %s: state input: %v", last.StepRef, err)
	}
	rerun := func() (*ResumePoint, error) { return point(last.Node, input, last.StepRef, true, nil) }
	if last.Status != stratus.StepCompleted {
		return rerun()
	}
	value, err := asl.Decode(last.Value)
	if err != nil || len(last.Value) == 0 {
		return rerun()
	}
	ctx := &asl.Context{ExecutionName: runID}
	out, f := state.ApplyResult(input, value, ctx)
	if f == nil {
		out, f = state.ApplyOutputPath(out)
	}
	if f != nil {
		return rerun()
	}
	var reset map[string]int
	if o.ResetFixBudget {
		out, reset = resetLoops(out)
	}
	next, v, check, f := walk(sm, state.Next, out, ctx)
	switch {
	case f != nil:
		return rerun()
	case next == nil:
		return nil, stratus.Errorf(stratus.EINVALID, "run %s already went past its last step %s to the end of its flow: nothing to resume", runID, last.StepRef)
	case next.Type == asl.TypeTask:
		return point(next.Name, v, last.StepRef, false, reset)
	case check != "":
		counter, _, _ := strings.Cut(check, ".")
		spent := 0
		if loops, ok := objectMember(out, "loops"); ok {
			if n, ok := objectMember(loops, counter); ok {
				spent = number(n)
			}
		}
		return nil, &BudgetSpentError{Step: last.StepRef, Check: check, Counter: counter, Spent: spent}
	}
	return rerun() // a gate could not decide: its step runs again
}

// walk follows the Pass and Choice states from name with raw input v, as
// the executor would, to the first Task (returned with its input), Succeed
// (nil) or Fail state (returned). check is the loop budget state that
// chose the Fail, if one did.
func walk(sm *asl.StateMachine, name string, v asl.Value, ctx *asl.Context) (st *asl.State, in asl.Value, check string, f *asl.Failure) {
	for range len(sm.States) + 1 {
		s := sm.States[name]
		if s == nil {
			return nil, nil, "", &asl.Failure{Error: "States.Runtime", Cause: "no state " + name}
		}
		switch s.Type {
		case asl.TypeTask:
			return s, v, "", nil
		case asl.TypeSucceed:
			return nil, v, "", nil
		case asl.TypeFail:
			return s, v, check, nil
		case asl.TypePass:
			eff, f := s.EffectiveInput(v, ctx)
			if f != nil {
				return nil, nil, "", f
			}
			if v, f = s.ApplyResult(v, s.PassResult(eff), ctx); f == nil {
				v, f = s.ApplyOutputPath(v)
			}
			if f != nil {
				return nil, nil, "", f
			}
			name = s.Next
		case asl.TypeWait:
			// A wait changes nothing but the time: it passes its input on.
			eff, f := s.EffectiveInput(v, ctx)
			if f == nil {
				v, f = s.ApplyOutputPath(eff)
			}
			if f != nil {
				return nil, nil, "", f
			}
			name = s.Next
		case asl.TypeChoice:
			eff, f := s.EffectiveInput(v, ctx)
			if f != nil {
				return nil, nil, "", f
			}
			next, f := s.Choose(eff, ctx)
			if f != nil {
				return nil, nil, "", f
			}
			check = ""
			if isBudgetCheck(s.Name) {
				check = s.Name
			}
			if v, f = s.ApplyOutputPath(v); f != nil {
				return nil, nil, "", f
			}
			name = next
		default:
			return nil, nil, "", &asl.Failure{Error: "States.Runtime", Cause: "state " + name + " has type " + string(s.Type)}
		}
	}
	return nil, nil, "", &asl.Failure{Error: "States.Runtime", Cause: "the machine loops without reaching a Task"}
}

// isBudgetCheck reports whether a state name is a loop's budget check,
// "<counter>.budget" or "<counter>.budget.<target>" (flow.LoopStateNames):
// counters and node ids never hold a '.'.
func isBudgetCheck(name string) bool {
	parts := strings.SplitN(name, ".", 3)
	return len(parts) >= 2 && parts[1] == "budget"
}

// resetLoops sets every member of v's $.loops to 0 and returns what they
// were.
func resetLoops(v asl.Value) (asl.Value, map[string]int) {
	loops, ok := objectMember(v, "loops")
	obj, isObj := loops.(*asl.Object)
	if !ok || !isObj {
		return v, nil
	}
	was := map[string]int{}
	zeroed := obj
	for _, m := range obj.Members() {
		was[m.Key] = number(m.Value)
		zeroed = zeroed.With(m.Key, json.Number("0"))
	}
	return v.(*asl.Object).With("loops", zeroed), was
}

// number reads a JSON number as an int; 0 for anything else.
func number(v asl.Value) int {
	if n, ok := v.(json.Number); ok {
		i, _ := n.Int64()
		return int(i)
	}
	return 0
}

func objectMember(v asl.Value, key string) (asl.Value, bool) {
	o, ok := v.(*asl.Object)
	if !ok {
		return nil, false
	}
	return o.Get(key)
}

// point builds the resume point entering state with input in.
func point(state string, in asl.Value, from string, rerun bool, reset map[string]int) (*ResumePoint, error) {
	o, ok := in.(*asl.Object)
	if !ok {
		return nil, stratus.Errorf(stratus.EINVALID, "the input of state %s is not a JSON object", state)
	}
	return &ResumePoint{State: state, Input: asl.Encode(o.With(compiler.ResumeAtField, state)), From: from, Rerun: rerun, Reset: reset}, nil
}
