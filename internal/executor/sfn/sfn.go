package sfn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/executor"
)

// API is the part of the Step Functions client the Executor calls;
// *sfn.Client satisfies it.
type API interface {
	StartExecution(ctx context.Context, in *awssfn.StartExecutionInput, optFns ...func(*awssfn.Options)) (*awssfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *awssfn.DescribeExecutionInput, optFns ...func(*awssfn.Options)) (*awssfn.DescribeExecutionOutput, error)
	StopExecution(ctx context.Context, in *awssfn.StopExecutionInput, optFns ...func(*awssfn.Options)) (*awssfn.StopExecutionOutput, error)
	SendTaskSuccess(ctx context.Context, in *awssfn.SendTaskSuccessInput, optFns ...func(*awssfn.Options)) (*awssfn.SendTaskSuccessOutput, error)
	SendTaskFailure(ctx context.Context, in *awssfn.SendTaskFailureInput, optFns ...func(*awssfn.Options)) (*awssfn.SendTaskFailureOutput, error)
	SendTaskHeartbeat(ctx context.Context, in *awssfn.SendTaskHeartbeatInput, optFns ...func(*awssfn.Options)) (*awssfn.SendTaskHeartbeatOutput, error)
	CreateStateMachine(ctx context.Context, in *awssfn.CreateStateMachineInput, optFns ...func(*awssfn.Options)) (*awssfn.CreateStateMachineOutput, error)
	DescribeStateMachine(ctx context.Context, in *awssfn.DescribeStateMachineInput, optFns ...func(*awssfn.Options)) (*awssfn.DescribeStateMachineOutput, error)
	UpdateStateMachine(ctx context.Context, in *awssfn.UpdateStateMachineInput, optFns ...func(*awssfn.Options)) (*awssfn.UpdateStateMachineOutput, error)
	GetExecutionHistory(ctx context.Context, in *awssfn.GetExecutionHistoryInput, optFns ...func(*awssfn.Options)) (*awssfn.GetExecutionHistoryOutput, error)
}

var _ API = (*awssfn.Client)(nil)

// finalErrors are the callback answers no retry can change.
var finalErrors = map[string]bool{
	executor.ErrTaskTimedOut:     true,
	executor.ErrInvalidToken:     true,
	executor.ErrTaskDoesNotExist: true,
	executor.ErrInvalidOutput:    true,
}

// NewClient returns a Step Functions client on cfg whose retryer is the
// SDK's standard one (throttling and 5xx retried with exponential backoff
// and jitter, cfg.RetryMaxAttempts attempts when set, else the SDK's
// default) except that TaskTimedOut, InvalidToken, TaskDoesNotExist and
// InvalidOutput are never retried: they are final answers.
func NewClient(cfg aws.Config, optFns ...func(*awssfn.Options)) *awssfn.Client {
	fns := append([]func(*awssfn.Options){func(o *awssfn.Options) {
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			if cfg.RetryMaxAttempts > 0 {
				so.MaxAttempts = cfg.RetryMaxAttempts
			}
			so.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(noRetryFinal)}, so.Retryables...)
		})
	}}, optFns...)
	return awssfn.NewFromConfig(cfg, fns...)
}

func noRetryFinal(err error) aws.Ternary {
	var ae smithy.APIError
	if errors.As(err, &ae) && finalErrors[ae.ErrorCode()] {
		return aws.FalseTernary
	}
	return aws.UnknownTernary
}

// Options configures an Executor.
type Options struct {
	// RoleARN, when set, makes StartExecution deploy the definition it is
	// given: the state machine named by StartInput.StateMachine is created
	// with this execution role when absent, and updated when its deployed
	// definition differs. When empty the deployed state machine runs as it
	// is and StartInput.Definition is not used (a stack deployed by SAM).
	RoleARN string
	// Substitutions are applied to "${Name}" in a definition before it is
	// deployed, as DefinitionSubstitutions would be (values JSON-escaped).
	Substitutions map[string]string
	// PollInterval is WaitExecution's longest wait between two
	// DescribeExecution calls (it starts at 50 ms and doubles); default 2 s.
	PollInterval time.Duration
}

// Executor is executor.Executor on AWS Step Functions. It is safe for
// concurrent use.
type Executor struct {
	api  API
	opts Options

	mu       sync.Mutex
	deployed map[string]string // state machine ARN → definition deployed by this Executor
}

var _ executor.Executor = (*Executor)(nil)

// New returns an Executor calling api (NewClient's client in production).
func New(api API, opts Options) *Executor {
	if opts.PollInterval <= 0 {
		opts.PollInterval = 2 * time.Second
	}
	return &Executor{api: api, opts: opts, deployed: map[string]string{}}
}

// StartExecution starts an execution of the state machine in.StateMachine
// (an ARN) named in.Name — a fresh UUID when empty, since Step Functions
// stand-ins collide on unnamed executions — with in.Input ({} when
// empty). With Options.RoleARN it first deploys in.Definition (see
// Options). Errors: ExecutionAlreadyExists (ECONFLICT) for a name taken
// by another input or a closed execution (the same name and input of a
// running one returns it again, as AWS does), InvalidArn / InvalidName /
// InvalidExecutionInput / InvalidDefinition (EINVALID),
// StateMachineDoesNotExist (ENOTFOUND).
func (e *Executor) StartExecution(ctx context.Context, in executor.StartInput) (executor.Execution, error) {
	if !strings.HasPrefix(in.StateMachine, "arn:") {
		return executor.Execution{}, executor.APIError(executor.ErrInvalidArn, "StateMachine",
			"%q is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)", in.StateMachine)
	}
	if e.opts.RoleARN != "" && len(in.Definition) > 0 {
		if err := e.Deploy(ctx, in.StateMachine, in.Definition); err != nil {
			return executor.Execution{}, err
		}
	}
	name := in.Name
	if name == "" {
		name = newUUID()
	}
	input := string(in.Input)
	if strings.TrimSpace(input) == "" {
		input = "{}"
	}
	out, err := e.api.StartExecution(ctx, &awssfn.StartExecutionInput{StateMachineArn: aws.String(in.StateMachine), Name: aws.String(name), Input: aws.String(input)})
	if err != nil {
		return executor.Execution{}, mapError("StartExecution", "Name", err)
	}
	return executor.Execution{
		ARN: aws.ToString(out.ExecutionArn), StateMachine: in.StateMachine, Name: name, Status: executor.StatusRunning,
		Input: json.RawMessage(input), StartDate: aws.ToTime(out.StartDate),
	}, nil
}

// MachineARN is the ARN of a stack's state machine of compiled definition
// def of flow taskType (docs/architecture.md § The run lifecycle: what runs
// is what was validated): "<prefix><task type>-<first 12 hex of the
// definition's SHA-256>" (the name cut to Step Functions' 80 characters),
// in the account of the execution role roleARN and region. An edited flow
// gets a new machine; the same one is reused. Errors: EINVALID (field
// state_machine_role) when roleARN is not an IAM role ARN.
func MachineARN(roleARN, region, prefix, taskType string, def []byte) (string, error) {
	role := strings.Split(roleARN, ":")
	if len(role) < 6 || role[0] != "arn" || role[4] == "" {
		return "", stratus.FieldErrorf(stratus.EINVALID, "state_machine_role", "%q is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)", roleARN)
	}
	sum := sha256.Sum256(def)
	hash := hex.EncodeToString(sum[:])[:12]
	name := prefix + taskType
	if max := 80 - len(hash) - 1; len(name) > max {
		name = name[:max]
	}
	return fmt.Sprintf("arn:%s:states:%s:%s:stateMachine:%s-%s", role[1], region, role[4], name, hash), nil
}

// Deploy makes the state machine at arn run definition (after
// Substitutions) with Options.RoleARN: created when absent, updated when it
// differs; what StartExecution does first when given a definition, for a
// run that starts later (`stratus submit`: the claim function starts it and
// may not create state machines). Errors: EINVALID for an ARN that is not a
// state machine's; the API's, mapped.
func (e *Executor) Deploy(ctx context.Context, arn string, definition []byte) error {
	def := string(substitute(definition, e.opts.Substitutions))
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deployed[arn] == def {
		return nil
	}
	d, err := e.api.DescribeStateMachine(ctx, &awssfn.DescribeStateMachineInput{StateMachineArn: aws.String(arn)})
	switch {
	case apiCode(err) == "StateMachineDoesNotExist":
		parts := strings.SplitN(arn, ":", 7)
		if len(parts) != 7 || parts[5] != "stateMachine" || parts[6] == "" {
			return executor.APIError(executor.ErrInvalidArn, "StateMachine", "%q is not a state machine ARN (arn:aws:states:REGION:ACCOUNT:stateMachine:NAME)", arn)
		}
		out, err := e.api.CreateStateMachine(ctx, &awssfn.CreateStateMachineInput{
			Name: aws.String(parts[6]), Definition: aws.String(def), RoleArn: aws.String(e.opts.RoleARN), Type: types.StateMachineTypeStandard,
		})
		if err != nil {
			return mapError("CreateStateMachine", "Definition", err)
		}
		if got := aws.ToString(out.StateMachineArn); got != arn {
			return stratus.FieldErrorf(stratus.EINVALID, "StateMachine", "%q: the state machine was created as %q; use that ARN (account and region come from the endpoint)", arn, got)
		}
	case err != nil:
		return mapError("DescribeStateMachine", "StateMachine", err)
	case aws.ToString(d.Definition) != def:
		if _, err := e.api.UpdateStateMachine(ctx, &awssfn.UpdateStateMachineInput{StateMachineArn: aws.String(arn), Definition: aws.String(def)}); err != nil {
			return mapError("UpdateStateMachine", "Definition", err)
		}
	}
	e.deployed[arn] = def
	return nil
}

// DescribeExecution returns the execution's current state; ENOTFOUND
// (ExecutionDoesNotExist) for an unknown ARN.
func (e *Executor) DescribeExecution(ctx context.Context, arn string) (executor.Execution, error) {
	out, err := e.api.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil {
		if apiCode(err) == "StateMachineDoesNotExist" {
			return executor.Execution{}, executor.APIError(executor.ErrExecutionDoesNotExist, "ARN", "no execution %q: its state machine does not exist", arn)
		}
		return executor.Execution{}, mapError("DescribeExecution", "ARN", err)
	}
	x := executor.Execution{
		ARN: aws.ToString(out.ExecutionArn), StateMachine: aws.ToString(out.StateMachineArn), Name: aws.ToString(out.Name),
		Status: string(out.Status), Error: aws.ToString(out.Error), Cause: aws.ToString(out.Cause),
		StartDate: aws.ToTime(out.StartDate), StopDate: aws.ToTime(out.StopDate),
	}
	if x.Status == string(types.ExecutionStatusPendingRedrive) {
		x.Status = executor.StatusRunning // a redrive is about to run it again
	}
	if out.Input != nil {
		x.Input = json.RawMessage(*out.Input)
	}
	if out.Output != nil {
		x.Output = json.RawMessage(*out.Output)
	}
	return x, nil
}

// WaitExecution polls DescribeExecution until the execution is no longer
// RUNNING or ctx ends; in the latter case it returns the last state seen
// and ctx.Err().
func (e *Executor) WaitExecution(ctx context.Context, arn string) (executor.Execution, error) {
	wait := 50 * time.Millisecond
	for {
		x, err := e.DescribeExecution(ctx, arn)
		if err != nil {
			if ctx.Err() != nil {
				return x, ctx.Err()
			}
			return x, err
		}
		if x.Done() {
			return x, nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return x, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, e.opts.PollInterval)
	}
}

// StopExecution aborts a running execution with errName and cause;
// stopping a closed execution does nothing. ENOTFOUND for an unknown ARN.
func (e *Executor) StopExecution(ctx context.Context, arn, errName, cause string) error {
	_, err := e.api.StopExecution(ctx, &awssfn.StopExecutionInput{ExecutionArn: aws.String(arn), Error: aws.String(errName), Cause: aws.String(cause)})
	if err == nil {
		return nil
	}
	mapped := mapError("StopExecution", "ARN", err)
	if code := stratus.ErrorCode(mapped); code == stratus.ENOTFOUND || code == stratus.EINVALID {
		return mapped
	}
	if x, derr := e.DescribeExecution(ctx, arn); derr == nil && x.Done() {
		return nil
	}
	return mapped
}

// SendTaskSuccess completes the task of token with output (JSON).
// TaskTimedOut (ECONFLICT), InvalidToken (EINVALID), TaskDoesNotExist
// (ENOTFOUND) and InvalidOutput (EINVALID) are final: never retried.
func (e *Executor) SendTaskSuccess(ctx context.Context, token string, output json.RawMessage) error {
	out := string(output)
	if strings.TrimSpace(out) == "" {
		out = "null"
	}
	_, err := e.api.SendTaskSuccess(ctx, &awssfn.SendTaskSuccessInput{TaskToken: aws.String(token), Output: aws.String(out)})
	return mapError("SendTaskSuccess", "token", err)
}

// Step Functions' limits on SendTaskFailure (API reference): error at most
// 256 characters, cause at most 32768.
const (
	MaxErrorChars = 256
	MaxCauseChars = 32768
)

// SendTaskFailure fails the task of token with errName and cause; errors
// as SendTaskSuccess. A longer errName or cause than Step Functions takes
// is cut to MaxErrorChars / MaxCauseChars (ending in "…") rather than
// refused, so a long failure reason still fails the task.
func (e *Executor) SendTaskFailure(ctx context.Context, token, errName, cause string) error {
	_, err := e.api.SendTaskFailure(ctx, &awssfn.SendTaskFailureInput{TaskToken: aws.String(token),
		Error: aws.String(clip(errName, MaxErrorChars)), Cause: aws.String(clip(cause, MaxCauseChars))})
	return mapError("SendTaskFailure", "token", err)
}

// clip cuts s to at most n characters, the last one "…" when cut.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// SendTaskHeartbeat resets the task's HeartbeatSeconds clock; errors as
// SendTaskSuccess.
func (e *Executor) SendTaskHeartbeat(ctx context.Context, token string) error {
	_, err := e.api.SendTaskHeartbeat(ctx, &awssfn.SendTaskHeartbeatInput{TaskToken: aws.String(token)})
	return mapError("SendTaskHeartbeat", "token", err)
}

// apiCode is the AWS error code err carries, or "".
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// notFound are error names mapped to ENOTFOUND beyond executor's own.
var notFound = map[string]bool{"StateMachineDoesNotExist": true, "ActivityDoesNotExist": true, "ResourceNotFound": true}

// mapError maps an SDK error to a *stratus.Error (see the package doc);
// nil stays nil.
func mapError(op, field string, err error) error {
	if err == nil {
		return nil
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return stratus.Errorf(stratus.EINTERNAL, "Step Functions %s: %v", op, err)
	}
	name, msg := ae.ErrorCode(), ae.ErrorMessage()
	switch {
	case executor.APIErrorName(executor.APIError(name, "", "")) != "":
		return executor.APIError(name, field, "%s (Step Functions %s)", msg, op)
	case notFound[name]:
		return stratus.FieldErrorf(stratus.ENOTFOUND, field, "%s: %s (Step Functions %s)", name, msg, op)
	case isThrottle(name):
		return stratus.Errorf(stratus.EINTERNAL, "%s: Step Functions throttled %s and the SDK's retries ran out; retry later: %s", name, op, msg)
	}
	return stratus.Errorf(stratus.EINTERNAL, "%s: Step Functions %s: %s", name, op, msg)
}

func isThrottle(code string) bool {
	_, ok := retry.DefaultThrottleErrorCodes[code]
	return ok
}

// substitute replaces ${Name} placeholders, JSON-escaping the values (as
// internal/executor/embedded does for Options.Substitutions).
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

// newUUID returns a random version-4 UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("%s-%s-%s-%s-%s", h[0:8], h[8:12], h[12:16], h[16:20], h[20:32])
}

// GetExecutionHistory reads the execution's whole history (page by page,
// oldest first) into executor.HistoryEvent: the type, the state's name on
// state events (and, as the embedded executor records it, on the task
// events inside a state), inputs, outputs, errors and causes.
// Errors: ExecutionDoesNotExist (ENOTFOUND), InvalidArn (EINVALID).
func (e *Executor) GetExecutionHistory(ctx context.Context, arn string) ([]executor.HistoryEvent, error) {
	var out []executor.HistoryEvent
	in := &awssfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 1000}
	state := ""
	for {
		page, err := e.api.GetExecutionHistory(ctx, in)
		if err != nil {
			return nil, mapError("GetExecutionHistory", "ExecutionArn", err)
		}
		for _, ev := range page.Events {
			h := executor.HistoryEvent{ID: ev.Id, Timestamp: aws.ToTime(ev.Timestamp), Type: string(ev.Type), State: state}
			switch d := ev; {
			case d.StateEnteredEventDetails != nil:
				state = aws.ToString(d.StateEnteredEventDetails.Name)
				h.State, h.Input = state, raw(d.StateEnteredEventDetails.Input)
			case d.StateExitedEventDetails != nil:
				h.State, h.Output = aws.ToString(d.StateExitedEventDetails.Name), raw(d.StateExitedEventDetails.Output)
			case d.ExecutionStartedEventDetails != nil:
				h.Input = raw(d.ExecutionStartedEventDetails.Input)
			case d.ExecutionSucceededEventDetails != nil:
				h.Output = raw(d.ExecutionSucceededEventDetails.Output)
			case d.ExecutionFailedEventDetails != nil:
				h.Error, h.Cause = aws.ToString(d.ExecutionFailedEventDetails.Error), aws.ToString(d.ExecutionFailedEventDetails.Cause)
			case d.ExecutionAbortedEventDetails != nil:
				h.Error, h.Cause = aws.ToString(d.ExecutionAbortedEventDetails.Error), aws.ToString(d.ExecutionAbortedEventDetails.Cause)
			case d.ExecutionTimedOutEventDetails != nil:
				h.Error, h.Cause = aws.ToString(d.ExecutionTimedOutEventDetails.Error), aws.ToString(d.ExecutionTimedOutEventDetails.Cause)
			case d.TaskScheduledEventDetails != nil:
				h.Resource, h.Input = aws.ToString(d.TaskScheduledEventDetails.Resource), raw(d.TaskScheduledEventDetails.Parameters)
			case d.TaskSucceededEventDetails != nil:
				h.Resource, h.Output = aws.ToString(d.TaskSucceededEventDetails.Resource), raw(d.TaskSucceededEventDetails.Output)
			case d.TaskSubmittedEventDetails != nil:
				h.Resource, h.Output = aws.ToString(d.TaskSubmittedEventDetails.Resource), raw(d.TaskSubmittedEventDetails.Output)
			case d.TaskFailedEventDetails != nil:
				h.Resource, h.Error, h.Cause = aws.ToString(d.TaskFailedEventDetails.Resource), aws.ToString(d.TaskFailedEventDetails.Error), aws.ToString(d.TaskFailedEventDetails.Cause)
			case d.TaskTimedOutEventDetails != nil:
				h.Resource, h.Error, h.Cause = aws.ToString(d.TaskTimedOutEventDetails.Resource), aws.ToString(d.TaskTimedOutEventDetails.Error), aws.ToString(d.TaskTimedOutEventDetails.Cause)
			}
			out = append(out, h)
		}
		if page.NextToken == nil {
			return out, nil
		}
		in.NextToken = page.NextToken
	}
}

// raw is a JSON text of the history as a RawMessage; nil when empty.
func raw(s *string) json.RawMessage {
	if s == nil || *s == "" {
		return nil
	}
	return json.RawMessage(*s)
}
