package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/trace"
	"sync"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// execution is one run of a state machine. The interpreter goroutine
// (run) owns the walk through the states; mu guards what API calls read
// or change; emitMu keeps history appends and OnEvent calls in one order.
type execution struct {
	e      *Executor
	sm     *asl.StateMachine
	arn    string
	smARN  string
	smName string
	name   string
	input  json.RawMessage // as given
	inVal  asl.Value
	start  time.Time

	ctx    context.Context // ends when the execution closes
	cancel context.CancelFunc
	done   chan struct{} // closed when the execution closes

	emitMu sync.Mutex

	mu      sync.Mutex
	status  string
	output  json.RawMessage
	errName string
	cause   string
	stop    time.Time
	history []executor.HistoryEvent
	tasks   map[*task]bool // open task tokens
	timer   Timer          // execution TimeoutSeconds
}

func (e *Executor) newExecution(sm *asl.StateMachine, smARN, smName, name string, raw json.RawMessage, input asl.Value) *execution {
	ctx, cancel := context.WithCancel(context.Background())
	return &execution{
		e: e, sm: sm,
		arn: executionARN(smARN, smName, name), smARN: smARN, smName: smName, name: name,
		input: cloneRaw(raw), inVal: input, start: e.clock.Now(),
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
		status: executor.StatusRunning,
		tasks:  map[*task]bool{},
	}
}

func (x *execution) describe() executor.Execution {
	x.mu.Lock()
	defer x.mu.Unlock()
	return executor.Execution{
		ARN: x.arn, StateMachine: x.smARN, Name: x.name, Status: x.status,
		Input: cloneRaw(x.input), Output: cloneRaw(x.output),
		Error: x.errName, Cause: x.cause,
		StartDate: x.start, StopDate: x.stop,
	}
}

func (x *execution) setTimer(t Timer) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.status != executor.StatusRunning {
		t.Stop()
		return
	}
	x.timer = t
}

// emit appends an event and hands it to OnEvent. Once the execution is
// closed it drops the event and returns false: an interpreter that lost
// a race with StopExecution or the execution timeout stops there.
func (x *execution) emit(ev executor.HistoryEvent) bool {
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	x.mu.Lock()
	if x.status != executor.StatusRunning {
		x.mu.Unlock()
		return false
	}
	ev.ID = int64(len(x.history) + 1)
	ev.Timestamp = x.e.clock.Now()
	x.history = append(x.history, ev)
	x.mu.Unlock()
	if x.e.opts.OnEvent != nil {
		x.e.opts.OnEvent(ev)
	}
	return true
}

var closingEvents = map[string]string{
	executor.StatusSucceeded: executor.EventExecutionSucceeded,
	executor.StatusFailed:    executor.EventExecutionFailed,
	executor.StatusTimedOut:  executor.EventExecutionTimedOut,
	executor.StatusAborted:   executor.EventExecutionAborted,
}

// finish closes the execution once: the first caller (the interpreter,
// the execution timer or StopExecution) wins, later calls do nothing.
// Open task tokens expire; running handlers see their context end.
func (x *execution) finish(status string, output json.RawMessage, errName, cause string) bool {
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	x.mu.Lock()
	if x.status != executor.StatusRunning {
		x.mu.Unlock()
		return false
	}
	now := x.e.clock.Now()
	x.status, x.output, x.errName, x.cause, x.stop = status, output, errName, cause, now
	ev := executor.HistoryEvent{ID: int64(len(x.history) + 1), Timestamp: now, Type: closingEvents[status], Output: cloneRaw(output), Error: errName, Cause: cause}
	if status == executor.StatusTimedOut {
		// As on AWS: the execution reports no error or cause, its
		// ExecutionTimedOut event carries States.Timeout.
		ev.Error = asl.ErrTimeout
	}
	x.history = append(x.history, ev)
	tasks := x.tasks
	x.tasks = nil
	timer := x.timer
	x.mu.Unlock()

	if timer != nil {
		timer.Stop()
	}
	x.cancel()
	x.e.expireAll(tasks)
	if x.e.opts.OnEvent != nil {
		x.e.opts.OnEvent(ev)
	}
	close(x.done)
	return true
}

func (x *execution) fail(f *asl.Failure) {
	x.finish(executor.StatusFailed, nil, f.Error, f.Cause)
}

// context returns the context object of one state visit.
func (x *execution) context(state string, entered time.Time, retries int) *asl.Context {
	return &asl.Context{
		ExecutionID: x.arn, ExecutionName: x.name, ExecutionInput: x.inVal, ExecutionStartTime: x.start,
		StateName: state, StateEnteredTime: entered, StateRetryCount: retries,
		StateMachineID: x.smARN, StateMachineName: x.smName,
	}
}

// run walks the states from StartAt until one ends the execution, a
// failure is not caught, or the execution is closed from outside.
func (x *execution) run() {
	defer func() {
		if r := recover(); r != nil {
			x.fail(&asl.Failure{Error: asl.ErrRuntime, Cause: fmt.Sprintf("internal error in the embedded executor: %v", r)})
		}
	}()
	name, input := x.sm.StartAt, x.inVal
	for {
		st := x.sm.States[name]
		// One region per state (runtime/trace; STRATUS_TRACE): a Task
		// state's is its step's wall time. A state that ends the
		// execution leaves its region open to the goroutine's end.
		region := trace.StartRegion(context.Background(), "state "+string(st.Type))
		entered := x.e.clock.Now()
		if !x.emit(executor.HistoryEvent{Type: executor.StateEntered(string(st.Type)), State: name, Input: asl.Encode(input)}) {
			return
		}
		var (
			out  asl.Value
			next string
			f    *asl.Failure
		)
		switch st.Type {
		case asl.TypePass:
			out, f = x.pass(st, input, entered)
			next = st.Next
		case asl.TypeTask:
			var ok bool
			if out, next, f, ok = x.task(st, input, entered); !ok {
				return // closed from outside
			}
		case asl.TypeChoice:
			ctx := x.context(name, entered, 0)
			var eff asl.Value
			if eff, f = st.EffectiveInput(input, ctx); f == nil {
				if next, f = st.Choose(eff, ctx); f == nil {
					out, f = st.ApplyOutputPath(eff)
				}
			}
		case asl.TypeWait:
			var ok bool
			if out, f, ok = x.wait(st, input, entered); !ok {
				return // closed from outside while waiting
			}
			next = st.Next
		case asl.TypeSucceed:
			var eff asl.Value
			if eff, f = st.EffectiveInput(input, x.context(name, entered, 0)); f == nil {
				out, f = st.ApplyOutputPath(eff)
			}
		case asl.TypeFail:
			x.finish(executor.StatusFailed, nil, st.Error, st.Cause)
			return
		}
		if f != nil {
			x.fail(f)
			return
		}
		if !x.emit(executor.HistoryEvent{Type: executor.StateExited(string(st.Type)), State: name, Output: asl.Encode(out)}) {
			return
		}
		if st.Type == asl.TypeSucceed || st.End {
			x.finish(executor.StatusSucceeded, asl.Encode(out), "", "")
			return
		}
		region.End()
		name, input = next, out
	}
}

// pass runs a Pass state (ASL spec § Pass State).
func (x *execution) pass(st *asl.State, raw asl.Value, entered time.Time) (asl.Value, *asl.Failure) {
	ctx := x.context(st.Name, entered, 0)
	eff, f := st.EffectiveInput(raw, ctx)
	if f != nil {
		return nil, f
	}
	out, f := st.ApplyResult(raw, st.PassResult(eff), ctx)
	if f != nil {
		return nil, f
	}
	return st.ApplyOutputPath(out)
}

// wait runs a Wait state (ASL spec § Wait State): its output is its
// effective input, filtered by OutputPath, once the time it names has
// come. ok is false when the execution was closed meanwhile — stopped,
// timed out — which ends the wait at once.
func (x *execution) wait(st *asl.State, raw asl.Value, entered time.Time) (out asl.Value, f *asl.Failure, ok bool) {
	eff, f := st.EffectiveInput(raw, x.context(st.Name, entered, 0))
	if f != nil {
		return nil, f, true
	}
	until, f := st.WaitUntil(eff, entered)
	if f != nil {
		return nil, f, true
	}
	if d := until.Sub(x.e.clock.Now()); d > 0 && !x.sleep(d) {
		return nil, nil, false
	}
	out, f = st.ApplyOutputPath(eff)
	return out, f, true
}
