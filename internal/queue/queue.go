// Package queue is the port of the dispatch queue (DESIGN.md § The path of
// one step, 2): where work that must not run inside a worker API request —
// a supervisor observation turn, with its worker launch and the launch's
// retries — is sent for the dispatch function to run. A request only
// enqueues; it returns as soon as what it was asked to record is durable.
//
// Two implementations, one conformance suite (queuetest): sqs (the stack's
// dispatch queue: SendMessage, at-least-once delivery to the dispatch
// Lambda) and local (embedded mode: each message handled in a goroutine of
// the process, Drain waits for them).
//
// Polled is the port of a queue its consumers poll instead; its
// implementations are sqs and memory (queuetest.RunPolled).
package queue

import (
	"context"
	"time"

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

// Polled is a queue its consumers poll (README.md § Warm runners (pool mode):
// a runner pool's assignments, which runners on any host receive): delivery
// is at least once; a received message is hidden from every other receiver
// for its visibility timeout, and comes back (Receives one more) unless its
// receiver deletes it or extends the timeout first; a message received the
// queue's most times without being deleted moves to its dead-letter queue
// (SQS's redrive policy, maxReceiveCount). Two implementations, one
// conformance suite (queuetest.RunPolled): sqs (ReceiveMessage,
// DeleteMessage, ChangeMessageVisibility) and memory (in this process).
type Polled interface {
	Queue
	// Receive waits up to wait (at most MaxWait) for one message and
	// returns it hidden for visibility (1 s to MaxVisibility); ok is
	// false when none came. ctx ending ends the wait with ctx's error.
	Receive(ctx context.Context, wait, visibility time.Duration) (m Message, ok bool, err error)
	// Delete removes the message a receipt names. A receipt whose message
	// came back to the queue and was received again is stale: Delete may
	// then do nothing (SQS) — the message is the newer receiver's.
	Delete(ctx context.Context, receipt string) error
	// Extend hides the message a receipt names for visibility from now
	// (1 s to MaxVisibility): its receiver is still working on it.
	Extend(ctx context.Context, receipt string, visibility time.Duration) error
}

// Message is one received message.
type Message struct {
	Body    []byte
	Receipt string // what Delete and Extend take (SQS's ReceiptHandle)
	// Receives counts the times the message was received, this one
	// included (SQS's ApproximateReceiveCount): 2 or more means an earlier
	// receiver let it come back.
	Receives int
}

// MaxWait and MaxVisibility are SQS's bounds on a receive's wait (20 s,
// WaitTimeSeconds) and a message's visibility timeout (12 hours), which
// the memory queue applies too (Amazon SQS Developer Guide, "Amazon SQS
// short and long polling" and "Amazon SQS visibility timeout").
const (
	MaxWait       = 20 * time.Second
	MaxVisibility = 12 * time.Hour
)

// CheckWait refuses a receive's wait no Polled queue takes:
// *stratus.Error EINVALID (Field "wait") unless 0 <= wait <= MaxWait.
func CheckWait(wait time.Duration) error {
	if wait < 0 || wait > MaxWait {
		return stratus.FieldErrorf(stratus.EINVALID, "wait", "a receive's wait of %v is out of range; valid: 0 to %v (SQS WaitTimeSeconds)", wait, MaxWait)
	}
	return nil
}

// CheckVisibility refuses a visibility timeout no Polled queue takes:
// *stratus.Error EINVALID (Field "visibility") unless 1 s <= visibility
// <= MaxVisibility.
func CheckVisibility(visibility time.Duration) error {
	if visibility < time.Second || visibility > MaxVisibility {
		return stratus.FieldErrorf(stratus.EINVALID, "visibility", "a visibility timeout of %v is out of range; valid: 1s to %v (SQS VisibilityTimeout)", visibility, MaxVisibility)
	}
	return nil
}
