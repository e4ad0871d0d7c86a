package handler

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"github.com/stratusflow/stratus"
)

// ClaimFunc runs one claim of the stack's task pool (awsapp.App.Claim).
type ClaimFunc func(ctx context.Context) error

// ClaimEventFunc is the claim function's Lambda handler: it takes any of
// its event sources' events as raw JSON.
type ClaimEventFunc func(ctx context.Context, ev json.RawMessage) (*events.SQSEventResponse, error)

// Claim returns the claim function's handler (template.yaml ClaimFunction):
// a batch of the claim queue's messages, an EventBridge event (S3 "Object
// Created" under tasks/pending/, or the schedule's "Scheduled Event") —
// whatever woke it, one claim runs: what a wake says is only why the pool
// is looked at. A claim that fails fails the batch, which the queue
// delivers again (the claim is idempotent). Errors: EINVALID for an event
// that is neither (naming what it is); claim's.
func Claim(claim ClaimFunc) ClaimEventFunc {
	return func(ctx context.Context, raw json.RawMessage) (*events.SQSEventResponse, error) {
		var ev struct {
			Records    []json.RawMessage `json:"Records"`
			DetailType string            `json:"detail-type"`
			Source     string            `json:"source"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "event", "not a JSON object: %v", err)
		}
		switch {
		case len(ev.Records) > 0, ev.DetailType == DetailScheduled, ev.DetailType == DetailObjectCreated:
		default:
			return nil, stratus.FieldErrorf(stratus.EINVALID, "detail-type", "%q (source %q); valid: a batch of the claim queue's messages, %q, %q", ev.DetailType, ev.Source, DetailObjectCreated, DetailScheduled)
		}
		if err := claim(ctx); err != nil {
			return nil, err
		}
		return &events.SQSEventResponse{}, nil
	}
}
