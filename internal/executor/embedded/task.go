package embedded

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// task is one attempt of a .waitForTaskToken Task state, known by its
// token. Its status moves once, under Executor.tokMu, from open to
// completed (SendTaskSuccess/Failure) or expired (timeout, heartbeat
// lapse, execution closed); the completion travels on done.
type task struct {
	token     string
	x         *execution
	state     string
	heartbeat time.Duration // 0: no HeartbeatSeconds

	status   int       // guarded by Executor.tokMu
	lastBeat time.Time // guarded by Executor.tokMu
	done     chan completion
}

const (
	taskOpen = iota
	taskCompleted
	taskExpired
)

type completion struct {
	failed  bool
	output  json.RawMessage
	errName string
	cause   string
}

// tokenPrefix marks the tokens this executor issues; anything else is an
// InvalidToken.
const tokenPrefix = "stratus-embedded-"

func (e *Executor) newTask(x *execution, st *asl.State) *task {
	var b [24]byte
	_, _ = rand.Read(b[:])
	t := &task{
		token: tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]),
		x:     x, state: st.Name,
		heartbeat: time.Duration(st.HeartbeatSeconds) * time.Second,
		lastBeat:  e.clock.Now(),
		done:      make(chan completion, 1),
	}
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	e.tokens[t.token] = t
	x.mu.Lock()
	if x.tasks != nil {
		x.tasks[t] = true
	} else {
		t.status = taskExpired // the execution closed meanwhile
	}
	x.mu.Unlock()
	return t
}

// expire closes an open task. It returns false when the task was already
// completed: its completion is waiting on done and wins over the timeout.
func (e *Executor) expire(t *task) bool {
	if t == nil {
		return true
	}
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	if t.status == taskCompleted {
		return false
	}
	t.status = taskExpired
	t.x.mu.Lock()
	delete(t.x.tasks, t)
	t.x.mu.Unlock()
	return true
}

func (e *Executor) expireAll(tasks map[*task]bool) {
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	for t := range tasks {
		if t.status == taskOpen {
			t.status = taskExpired
		}
	}
}

// heartbeatDue reports whether HeartbeatSeconds have passed since the
// last heartbeat (expiring the task if so), else how long remains. A task
// no longer open is never due.
func (e *Executor) heartbeatDue(t *task) (due bool, remaining time.Duration) {
	now := e.clock.Now()
	e.tokMu.Lock()
	if t.status != taskOpen {
		e.tokMu.Unlock()
		return false, -1
	}
	deadline := t.lastBeat.Add(t.heartbeat)
	if now.Before(deadline) {
		e.tokMu.Unlock()
		return false, deadline.Sub(now)
	}
	e.tokMu.Unlock()
	return e.expire(t), 0
}

// openTask finds the open task of a token, or the API error AWS returns.
// Callers hold tokMu.
func (e *Executor) openTask(token string) (*task, error) {
	t, ok := e.tokens[token]
	switch {
	case !ok && !wellFormedToken(token):
		return nil, executor.APIError(executor.ErrInvalidToken, "token", "%q is not a task token issued by this executor", abbreviate(token))
	case !ok:
		return nil, executor.APIError(executor.ErrTaskDoesNotExist, "token", "no task has the token %q", abbreviate(token))
	case t.status == taskCompleted:
		return nil, executor.APIError(executor.ErrTaskTimedOut, "token", "the task of state %q was already completed; a task token is single-use", t.state)
	case t.status == taskExpired:
		return nil, executor.APIError(executor.ErrTaskTimedOut, "token", "the task of state %q has timed out, or its execution has closed", t.state)
	}
	return t, nil
}

func wellFormedToken(token string) bool {
	rest, ok := strings.CutPrefix(token, tokenPrefix)
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil && len(b) == 24
}

func abbreviate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func (e *Executor) complete(token string, c completion) error {
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	t, err := e.openTask(token)
	if err != nil {
		return err
	}
	t.status = taskCompleted
	t.done <- c // buffered, and only one completion per task
	t.x.mu.Lock()
	delete(t.x.tasks, t)
	t.x.mu.Unlock()
	return nil
}

// SendTaskSuccess completes the task of token with output. Errors:
// InvalidOutput or InvalidToken (EINVALID), TaskDoesNotExist (ENOTFOUND),
// TaskTimedOut (ECONFLICT) for a token expired, already used, or of a
// closed execution.
func (e *Executor) SendTaskSuccess(_ context.Context, token string, output json.RawMessage) error {
	if _, err := asl.Decode(output); err != nil {
		return executor.APIError(executor.ErrInvalidOutput, "output", "the task output must be JSON: %v", err)
	}
	return e.complete(token, completion{output: cloneRaw(output)})
}

// SendTaskFailure fails the task of token with errName and cause, which
// the state's Retry and Catch then match. Errors as SendTaskSuccess.
func (e *Executor) SendTaskFailure(_ context.Context, token, errName, cause string) error {
	return e.complete(token, completion{failed: true, errName: errName, cause: cause})
}

// SendTaskHeartbeat restarts the task's HeartbeatSeconds clock. Errors as
// SendTaskSuccess.
func (e *Executor) SendTaskHeartbeat(_ context.Context, token string) error {
	now := e.clock.Now()
	e.tokMu.Lock()
	defer e.tokMu.Unlock()
	t, err := e.openTask(token)
	if err != nil {
		return err
	}
	t.lastBeat = now
	return nil
}

// after returns a channel that receives once d has elapsed.
func (x *execution) after(d time.Duration) (<-chan struct{}, Timer) {
	ch := make(chan struct{}, 1)
	return ch, x.e.clock.AfterFunc(d, func() { ch <- struct{}{} })
}

// sleep waits d; false when the execution closed first.
func (x *execution) sleep(d time.Duration) bool {
	ch, t := x.after(d)
	select {
	case <-ch:
		return true
	case <-x.ctx.Done():
		t.Stop()
		return false
	}
}

// task runs a Task state: attempts, Retry and Catch (ASL spec § Task
// State, § Errors). ok is false when the execution was closed from
// outside meanwhile.
func (x *execution) task(st *asl.State, raw asl.Value, entered time.Time) (out asl.Value, next string, f *asl.Failure, ok bool) {
	counts := make([]int, len(st.Retry)) // retries made by each Retrier
	retries := 0                         // $$.State.RetryCount
	for {
		var result asl.Value
		if result, f, ok = x.attempt(st, raw, entered, retries); !ok {
			return nil, "", nil, false
		}
		if f == nil {
			if out, f = st.ApplyResult(raw, result, x.context(st.Name, entered, retries)); f == nil {
				// OutputPath failures (States.Runtime) are not retried.
				out, f = st.ApplyOutputPath(out)
				return out, st.Next, f, true
			}
		}
		if asl.Uncatchable(f.Error) {
			return nil, "", f, true
		}
		if i := st.MatchRetrier(f.Error); i >= 0 && counts[i] < st.Retry[i].MaxAttempts {
			r := &st.Retry[i]
			d := r.Delay(counts[i])
			if r.JitterStrategy == "FULL" && d > 0 {
				d = time.Duration(mrand.Int64N(int64(d) + 1))
			}
			counts[i]++
			retries++
			if !x.sleep(d) {
				return nil, "", nil, false
			}
			continue
		}
		if c := st.MatchCatcher(f.Error); c != nil {
			out, f2 := c.Output(raw, f)
			if f2 != nil {
				return nil, "", f2, true
			}
			return out, c.Next, nil, true
		}
		return nil, "", f, true
	}
}

type handlerResult struct {
	out json.RawMessage
	err error
}

// attempt performs one try of a Task state and returns its result (the
// raw result, before ResultSelector) or its failure.
func (x *execution) attempt(st *asl.State, raw asl.Value, entered time.Time, retries int) (asl.Value, *asl.Failure, bool) {
	e := x.e
	ctx := x.context(st.Name, entered, retries)
	var t *task
	if st.Pattern == asl.WaitForTaskToken {
		t = e.newTask(x, st) // a retried state gets a new token
		ctx.TaskToken = t.token
	}
	eff, f := st.EffectiveInput(raw, ctx)
	if f != nil {
		e.expire(t)
		return nil, f, true
	}
	handler, found := e.opts.Resources[st.ResourceBase]
	if !found {
		e.expire(t)
		return nil, &asl.Failure{Error: asl.ErrRuntime, Cause: fmt.Sprintf("the resource %q of state %q has no handler in the embedded executor (resources are keyed without .waitForTaskToken/.sync)", st.Resource, st.Name)}, true
	}
	params := asl.Encode(eff)
	taskEvent := func(typ string) executor.HistoryEvent {
		return executor.HistoryEvent{Type: typ, State: st.Name, Resource: st.Resource}
	}
	ev := taskEvent(executor.EventTaskScheduled)
	ev.Input = params
	if !x.emit(ev) || !x.emit(taskEvent(executor.EventTaskStarted)) {
		return nil, nil, false
	}
	failed := func(typ string, name, cause string) (asl.Value, *asl.Failure, bool) {
		ev := taskEvent(typ)
		ev.Error, ev.Cause = name, cause
		if !x.emit(ev) {
			return nil, nil, false
		}
		return nil, &asl.Failure{Error: name, Cause: cause}, true
	}

	var timeoutC, beatC <-chan struct{}
	if st.TimeoutSeconds > 0 {
		var tm Timer
		timeoutC, tm = x.after(time.Duration(st.TimeoutSeconds) * time.Second)
		defer tm.Stop()
	}
	var beatTimer Timer
	if t != nil && t.heartbeat > 0 {
		e.tokMu.Lock()
		t.lastBeat = e.clock.Now()
		e.tokMu.Unlock()
		beatC, beatTimer = x.after(t.heartbeat)
		defer func() { beatTimer.Stop() }()
	}

	actx, cancel := context.WithCancel(x.ctx)
	defer cancel()
	call := TaskCall{Execution: x.arn, State: st.Name, Resource: st.Resource, Parameters: params, RetryCount: retries}
	if t != nil {
		call.Token = t.token
	}
	resC := make(chan handlerResult, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				resC <- handlerResult{err: fmt.Errorf("the handler of %s panicked: %v", st.ResourceBase, r)}
			}
		}()
		out, err := handler(actx, call)
		resC <- handlerResult{out: out, err: err}
	}()

	var doneC <-chan completion // set once a callback handler has returned
	for {
		select {
		case r := <-resC:
			resC = nil
			if r.err != nil {
				e.expire(t)
				name, cause := taskFailure(r.err)
				return failed(executor.EventTaskFailed, name, cause)
			}
			if t == nil {
				return x.succeeded(taskEvent, r.out)
			}
			ev := taskEvent(executor.EventTaskSubmitted)
			ev.Output = cloneRaw(r.out)
			if !x.emit(ev) {
				return nil, nil, false
			}
			doneC = t.done
		case c := <-doneC:
			if c.failed {
				return failed(executor.EventTaskFailed, c.errName, c.cause)
			}
			return x.succeeded(taskEvent, c.output)
		case <-timeoutC:
			if !e.expire(t) {
				timeoutC = nil // completed just now; take the completion
				doneC = t.done
				continue
			}
			// AWS's TaskTimedOut has no cause; the error output's Cause is "".
			return failed(executor.EventTaskTimedOut, asl.ErrTimeout, "")
		case <-beatC:
			due, remaining := e.heartbeatDue(t)
			switch {
			case due:
				return failed(executor.EventTaskTimedOut, asl.ErrHeartbeatTimeout, "")
			case remaining > 0:
				beatC, beatTimer = x.after(remaining)
			default:
				beatC = nil // completed meanwhile
				doneC = t.done
			}
		case <-x.ctx.Done():
			return nil, nil, false
		}
	}
}

// succeeded records a task's result, which must be JSON.
func (x *execution) succeeded(taskEvent func(string) executor.HistoryEvent, out json.RawMessage) (asl.Value, *asl.Failure, bool) {
	var v asl.Value
	if len(out) > 0 {
		var err error
		if v, err = asl.Decode(out); err != nil {
			ev := taskEvent(executor.EventTaskFailed)
			ev.Error, ev.Cause = asl.ErrTaskFailed, "the task returned invalid JSON: "+err.Error()
			if !x.emit(ev) {
				return nil, nil, false
			}
			return nil, &asl.Failure{Error: ev.Error, Cause: ev.Cause}, true
		}
	}
	ev := taskEvent(executor.EventTaskSucceeded)
	ev.Output = asl.Encode(v)
	if !x.emit(ev) {
		return nil, nil, false
	}
	return v, nil, true
}

// taskFailure names a handler's error: a TaskError's name, else
// States.TaskFailed.
func taskFailure(err error) (name, cause string) {
	var te TaskError
	var tp *TaskError
	switch {
	case errors.As(err, &te):
	case errors.As(err, &tp) && tp != nil:
		te = *tp
	default:
		return asl.ErrTaskFailed, err.Error()
	}
	if te.Name == "" {
		te.Name = asl.ErrTaskFailed
	}
	return te.Name, te.Cause
}
