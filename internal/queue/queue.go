// Package queue is the port of the dispatch queue (DESIGN.md § The path of
// one step, 2): where work that must not run inside a worker API request —
// a supervisor observation turn, with its worker launch and the launch's
// retries (issue 14 § 10) — is sent for the dispatch function to run. A
// request only enqueues; it returns as soon as what it was asked to record
// is durable.
//
// Two implementations, one conformance suite (queuetest): sqs (the stack's
// dispatch queue: SendMessage, at-least-once delivery to the dispatch
// Lambda) and local (embedded mode: each message handled in a goroutine of
// the process, Drain waits for them).
package queue

import (
	"context"

	"github.com/stratusflow/stratus"
)

// MaxBodyBytes is the largest message body: SQS's 256 KiB message size
// (Amazon SQS Developer Guide, "Quotas related to messages"); the local
// queue applies it too, so a message that works embedded works on AWS.
const MaxBodyBytes = 256 << 10

// Queue takes dispatch messages.
type Queue interface {
	// Send enqueues body, a JSON dispatch message of 1 to MaxBodyBytes
	// bytes, to be handled once or more (at least once). Errors: Check's;
	// the transport's otherwise (the SDK has retried throttling).
	Send(ctx context.Context, body []byte) error
}

// Check refuses a body no queue carries: *stratus.Error EINVALID (Field
// "body") for an empty body or one over MaxBodyBytes.
func Check(body []byte) error {
	switch {
	case len(body) == 0:
		return stratus.FieldErrorf(stratus.EINVALID, "body", "a queue message is empty; valid: 1 to %d bytes", MaxBodyBytes)
	case len(body) > MaxBodyBytes:
		return stratus.FieldErrorf(stratus.EINVALID, "body", "a queue message of %d bytes is over the limit of %d bytes", len(body), MaxBodyBytes)
	}
	return nil
}
