package embedded

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// TaskHandler performs a Task state's Resource in-process. For a
// request-response (or .sync) resource its return value, JSON, is the
// task's result (empty means null). For a .waitForTaskToken resource the
// return value is only recorded (TaskSubmitted) and the state waits for
// SendTaskSuccess or SendTaskFailure on call.Token. A returned error
// fails the task: with the error's name when it is a TaskError, else
// States.TaskFailed with the error text as cause.
//
// ctx ends when the task times out or the execution stops.
type TaskHandler func(ctx context.Context, call TaskCall) (json.RawMessage, error)

// TaskCall is one invocation of a Task state's resource.
type TaskCall struct {
	Execution  string          // execution ARN
	State      string          // state name
	Resource   string          // the Resource as written, suffix included
	Parameters json.RawMessage // the evaluated Parameters, $$.Task.Token resolved
	Token      string          // the task token, for .waitForTaskToken resources
	RetryCount int             // $$.State.RetryCount: 0 on the first attempt
}

// TaskError is a task failure with an error name for Retry and Catch to
// match, as a Lambda function's exception or SendTaskFailure's error.
type TaskError struct {
	Name  string // empty: States.TaskFailed
	Cause string
}

func (e TaskError) Error() string {
	if e.Name == "" {
		return asl.ErrTaskFailed + ": " + e.Cause
	}
	return e.Name + ": " + e.Cause
}

// Options configures an Executor.
type Options struct {
	// Resources maps a resource ARN, without its .waitForTaskToken, .sync
	// or .sync:2 suffix (e.g. "arn:aws:states:::sqs:sendMessage"), to its
	// handler. A Task whose resource has none fails with States.Runtime.
	Resources map[string]TaskHandler
	// Substitutions are applied to "${Name}" in every definition before it
	// is parsed, like a state machine's DefinitionSubstitutions. Values
	// are inserted JSON-escaped, since placeholders sit inside strings.
	Substitutions map[string]string
	// OnEvent, when set, receives every history event in order, from the
	// goroutine that produced it (the execution's, or the caller of
	// StartExecution/StopExecution). It must return promptly and must not
	// stop or wait for the execution the event belongs to.
	OnEvent func(executor.HistoryEvent)
	// Clock defaults to SystemClock.
	Clock Clock
}

// The account and region of the ARNs the embedded executor makes up for
// state machines given by bare name.
const (
	LocalRegion  = "local"
	LocalAccount = "000000000000"
)

// Executor is the in-process implementation of executor.Executor: each
// execution runs in its own goroutine, interpreting the definition with
// internal/asl. It is safe for concurrent use.
type Executor struct {
	opts  Options
	clock Clock

	mu     sync.Mutex
	byARN  map[string]*execution
	byName map[string]*execution // state machine ARN + "\x00" + execution name
	defs   map[[32]byte]*asl.StateMachine

	tokMu  sync.Mutex
	tokens map[string]*task
}

var _ executor.Executor = (*Executor)(nil)

// maxCachedDefinitions bounds the parsed-definition cache.
const maxCachedDefinitions = 256

// New returns an Executor.
func New(opts Options) *Executor {
	clock := opts.Clock
	if clock == nil {
		clock = SystemClock{}
	}
	return &Executor{
		opts:   opts,
		clock:  clock,
		byARN:  map[string]*execution{},
		byName: map[string]*execution{},
		defs:   map[[32]byte]*asl.StateMachine{},
		tokens: map[string]*task{},
	}
}

// StartExecution parses the definition (after Substitutions), checks the
// input and name, and starts the execution in its own goroutine. Errors:
// InvalidDefinition (every problem, by state and field), InvalidName,
// InvalidArn, InvalidExecutionInput (EINVALID); ExecutionAlreadyExists
// (ECONFLICT) when the name is taken, unless, as on AWS, the execution of
// that name is still running with the same input, in which case it is
// returned again.
func (e *Executor) StartExecution(_ context.Context, in executor.StartInput) (executor.Execution, error) {
	smARN, smName, err := stateMachineARN(in.StateMachine)
	if err != nil {
		return executor.Execution{}, err
	}
	name := in.Name
	if name == "" {
		name = newUUID()
	} else if err := checkName("Name", name); err != nil {
		return executor.Execution{}, err
	}
	sm, err := e.parse(in.Definition)
	if err != nil {
		return executor.Execution{}, err
	}
	raw := in.Input
	if len(strings.TrimSpace(string(raw))) == 0 {
		raw = json.RawMessage("{}")
	}
	input, err := asl.Decode(raw)
	if err != nil {
		return executor.Execution{}, executor.APIError(executor.ErrInvalidExecutionInput, "Input", "%v", err)
	}

	e.mu.Lock()
	key := smARN + "\x00" + name
	if prev, ok := e.byName[key]; ok {
		e.mu.Unlock()
		d := prev.describe()
		if d.Status == executor.StatusRunning && string(d.Input) == string(raw) {
			return d, nil
		}
		return executor.Execution{}, executor.APIError(executor.ErrExecutionAlreadyExists, "Name",
			"state machine %s already has an execution named %q (status %s); execution names are unique per state machine", smARN, name, d.Status)
	}
	x := e.newExecution(sm, smARN, smName, name, raw, input)
	e.byName[key] = x
	e.byARN[x.arn] = x
	e.mu.Unlock()

	x.emit(executor.HistoryEvent{Type: executor.EventExecutionStarted, Input: cloneRaw(raw)})
	if sm.TimeoutSeconds > 0 {
		x.setTimer(e.clock.AfterFunc(time.Duration(sm.TimeoutSeconds)*time.Second, func() {
			x.finish(executor.StatusTimedOut, nil, "", "")
		}))
	}
	go x.run()
	return x.describe(), nil
}

// parse applies Substitutions and parses, caching by content.
func (e *Executor) parse(def []byte) (*asl.StateMachine, error) {
	def = substitute(def, e.opts.Substitutions)
	sum := sha256.Sum256(def)
	e.mu.Lock()
	sm, ok := e.defs[sum]
	e.mu.Unlock()
	if ok {
		return sm, nil
	}
	sm, err := asl.Parse(def)
	if err != nil {
		return nil, executor.APIError(executor.ErrInvalidDefinition, "Definition", "%v", err)
	}
	e.mu.Lock()
	if len(e.defs) >= maxCachedDefinitions {
		clear(e.defs)
	}
	e.defs[sum] = sm
	e.mu.Unlock()
	return sm, nil
}

// substitute replaces ${Name} placeholders, JSON-escaping the values.
func substitute(def []byte, subs map[string]string) []byte {
	if len(subs) == 0 || !strings.Contains(string(def), "${") {
		return def
	}
	keys := make([]string, 0, len(subs))
	for k := range subs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		quoted := asl.EncodeString(subs[k])
		pairs = append(pairs, "${"+k+"}", quoted[1:len(quoted)-1])
	}
	return []byte(strings.NewReplacer(pairs...).Replace(string(def)))
}

func (e *Executor) lookup(arn string) (*execution, error) {
	e.mu.Lock()
	x, ok := e.byARN[arn]
	e.mu.Unlock()
	if !ok {
		return nil, executor.APIError(executor.ErrExecutionDoesNotExist, "ARN", "no execution %q", arn)
	}
	return x, nil
}

// DescribeExecution returns the execution's current state.
func (e *Executor) DescribeExecution(_ context.Context, arn string) (executor.Execution, error) {
	x, err := e.lookup(arn)
	if err != nil {
		return executor.Execution{}, err
	}
	return x.describe(), nil
}

// WaitExecution blocks until the execution closes or ctx ends; in the
// latter case it returns the running execution and ctx.Err().
func (e *Executor) WaitExecution(ctx context.Context, arn string) (executor.Execution, error) {
	x, err := e.lookup(arn)
	if err != nil {
		return executor.Execution{}, err
	}
	select {
	case <-x.done:
		return x.describe(), nil
	case <-ctx.Done():
		return x.describe(), ctx.Err()
	}
}

// StopExecution aborts a running execution (status ABORTED, with errName
// and cause); its open task tokens expire and its running handlers see
// their context end. Stopping a closed execution does nothing.
func (e *Executor) StopExecution(_ context.Context, arn, errName, cause string) error {
	x, err := e.lookup(arn)
	if err != nil {
		return err
	}
	x.finish(executor.StatusAborted, nil, errName, cause)
	return nil
}

// History returns a copy of an execution's history so far, or nil for an
// unknown ARN.
// GetExecutionHistory is History on the port: ENOTFOUND
// (ExecutionDoesNotExist) for an unknown ARN.
func (e *Executor) GetExecutionHistory(_ context.Context, arn string) ([]executor.HistoryEvent, error) {
	if _, err := e.lookup(arn); err != nil {
		return nil, err
	}
	return e.History(arn), nil
}

func (e *Executor) History(arn string) []executor.HistoryEvent {
	x, err := e.lookup(arn)
	if err != nil {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]executor.HistoryEvent(nil), x.history...)
}

// stateMachineARN accepts a state machine ARN or a bare name.
func stateMachineARN(s string) (arn, name string, err error) {
	if strings.HasPrefix(s, "arn:") {
		parts := strings.SplitN(s, ":", 7)
		if len(parts) != 7 || parts[2] != "states" || parts[5] != "stateMachine" || parts[6] == "" {
			return "", "", executor.APIError(executor.ErrInvalidArn, "StateMachine",
				"%q is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)", s)
		}
		return s, parts[6], nil
	}
	if err := checkName("StateMachine", s); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", LocalRegion, LocalAccount, s), s, nil
}

// executionARN derives an execution's ARN from its state machine's.
func executionARN(smARN, smName, name string) string {
	parts := strings.SplitN(smARN, ":", 7)
	return fmt.Sprintf("arn:%s:states:%s:%s:execution:%s:%s", parts[1], parts[3], parts[4], smName, name)
}

// checkName applies Step Functions' naming rules: 1 to 80 characters, no
// whitespace, brackets, wildcards, the characters " # % \ ^ | ~ ` $ & , ; : /
// or control characters.
func checkName(field, name string) error {
	if n := len([]rune(name)); n < 1 || n > 80 {
		return executor.APIError(executor.ErrInvalidName, field, "%q must be 1 to 80 characters long", name)
	}
	for _, r := range name {
		if r <= 0x20 || (r >= 0x7f && r <= 0x9f) || strings.ContainsRune("<>{}[]?*\"#%\\^|~`$&,;:/", r) || r == '\u00a0' || r == '\u2028' || r == '\u2029' {
			return executor.APIError(executor.ErrInvalidName, field,
				"%q contains %q; names may not contain whitespace, brackets, wildcards, control characters or \" # %% \\ ^ | ~ ` $ & , ; : /", name, r)
		}
	}
	return nil
}

// newUUID returns a random version-4 UUID, as AWS names unnamed executions.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func cloneRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
