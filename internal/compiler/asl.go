package compiler

import (
	"bytes"
	"encoding/json"
)

// The definition is written from ordered structs (and, where the keys come
// from the flow, ordered member lists) so that its bytes are a function of
// the flow alone.

type machine struct {
	Comment string `json:"Comment"`
	StartAt string `json:"StartAt"`
	States  object `json:"States"`
}

type initState struct {
	Type       string `json:"Type"`
	Result     object `json:"Result"`
	ResultPath string `json:"ResultPath"`
	Next       string `json:"Next"`
}

// passState is a Pass state whose Parameters shape its result (counts,
// resets, the subtask cursor).
type passState = countState

type countState struct {
	Type       string `json:"Type"`
	Parameters object `json:"Parameters"`
	ResultPath string `json:"ResultPath"`
	Next       string `json:"Next"`
}

type taskState struct {
	Type             string         `json:"Type"`
	Resource         string         `json:"Resource"`
	Parameters       taskParameters `json:"Parameters"`
	ResultPath       string         `json:"ResultPath"`
	TimeoutSeconds   int            `json:"TimeoutSeconds"`
	HeartbeatSeconds int            `json:"HeartbeatSeconds,omitempty"`
	Retry            []retrier      `json:"Retry"`
	Catch            []catcher      `json:"Catch"`
	Next             string         `json:"Next"`
}

// retrier is one element of a Task state's Retry (ASL spec § Retrying
// after error), its numbers from internal/retry.
type retrier struct {
	ErrorEquals     []string `json:"ErrorEquals"`
	IntervalSeconds int      `json:"IntervalSeconds"`
	BackoffRate     float64  `json:"BackoffRate"`
	MaxDelaySeconds int      `json:"MaxDelaySeconds"`
	MaxAttempts     int      `json:"MaxAttempts"`
}

// waitState is a worker's "<node>.wait": it waits the seconds the park
// state read from stratus.Blocked's cause.
type waitState struct {
	Type        string `json:"Type"`
	SecondsPath string `json:"SecondsPath"`
	Next        string `json:"Next"`
}

type taskParameters struct {
	QueueURL    string      `json:"QueueUrl"`
	MessageBody messageBody `json:"MessageBody"`
}

// messageBody is what the dispatch function receives (worker.Message).
type messageBody struct {
	RunID     string `json:"run_id.$"`
	Node      string `json:"node"`
	Kind      string `json:"kind"`
	TaskToken string `json:"task_token.$"`
	// SubtaskOrder is "$.subtask.order" in a flow with decomposition.
	SubtaskOrder string `json:"subtask_order.$,omitempty"`
	// State is "$": the state's input, which dispatch records on the step
	// so that a resumed run can enter this state again (ResumeAt).
	State string `json:"state.$"`
	// RetryCount is "$$.State.RetryCount": 0 on a state's first attempt,
	// n on its n-th retry (by either Retrier) since the state was entered.
	RetryCount string `json:"retry_count.$"`
}

// stopState is a worker's "<node>.stop" Task: ResultPath is always nil
// (JSON null: the state's data passes through unchanged).
type stopState struct {
	Type           string         `json:"Type"`
	Resource       string         `json:"Resource"`
	Parameters     stopParameters `json:"Parameters"`
	ResultPath     *string        `json:"ResultPath"`
	TimeoutSeconds int            `json:"TimeoutSeconds"`
	Retry          []retrier      `json:"Retry"`
	Catch          []stopCatcher  `json:"Catch"`
	Next           string         `json:"Next"`
}

type stopParameters struct {
	QueueURL    string   `json:"QueueUrl"`
	MessageBody stopBody `json:"MessageBody"`
}

// stopBody is the "stop" message the dispatch side receives
// (worker.Message with kind "stop" and no task token).
type stopBody struct {
	RunID string `json:"run_id.$"`
	Node  string `json:"node"`
	Kind  string `json:"kind"`
	Error string `json:"error.$"`
}

// stopCatcher discards the error (ResultPath null).
type stopCatcher struct {
	ErrorEquals []string `json:"ErrorEquals"`
	ResultPath  *string  `json:"ResultPath"`
	Next        string   `json:"Next"`
}

type catcher struct {
	ErrorEquals []string `json:"ErrorEquals"`
	ResultPath  string   `json:"ResultPath"`
	Next        string   `json:"Next"`
}

type choiceState struct {
	Type    string `json:"Type"`
	Choices []any  `json:"Choices"`
	Default string `json:"Default"`
}

// entryState is the resume entry: a Choice with no Default, so that an
// unknown $.resume_at fails the execution (States.NoChoiceMatched).
type entryState struct {
	Type    string `json:"Type"`
	Choices []any  `json:"Choices"`
}

// notRule negates one condition; it carries Next.
type notRule struct {
	Not  any    `json:"Not"`
	Next string `json:"Next"`
}

type stringRule struct {
	Variable     string `json:"Variable"`
	StringEquals string `json:"StringEquals"`
	Next         string `json:"Next"`
}

type numericRule struct {
	Variable                 string `json:"Variable"`
	NumericGreaterThanEquals int    `json:"NumericGreaterThanEquals"`
	Next                     string `json:"Next"`
}

// lessThanPathRule is the decomposition cursor's test: order < count.
type lessThanPathRule struct {
	Variable            string `json:"Variable"`
	NumericLessThanPath string `json:"NumericLessThanPath"`
	Next                string `json:"Next"`
}

// andRule joins conditions; only its top level carries Next.
type andRule struct {
	And  []any  `json:"And"`
	Next string `json:"Next"`
}

type presentCond struct {
	Variable  string `json:"Variable"`
	IsPresent bool   `json:"IsPresent"`
}

type numericTypeCond struct {
	Variable  string `json:"Variable"`
	IsNumeric bool   `json:"IsNumeric"`
}

type greaterThanCond struct {
	Variable           string `json:"Variable"`
	NumericGreaterThan int    `json:"NumericGreaterThan"`
}

type succeedState struct {
	Type string `json:"Type"`
}

type failState struct {
	Type  string `json:"Type"`
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// member is one key of an object whose keys come from the flow.
type member struct {
	Key   string
	Value any
}

// object is a JSON object that keeps its members in order.
type object []member

func (o object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(m.Key)
		if err != nil {
			return nil, err
		}
		v, err := marshal(m.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, so that a queue URL with
// '&' reads the same in the definition as in the template.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
