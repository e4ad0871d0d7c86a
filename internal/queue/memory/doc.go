// Package memory is the in-process implementation of queue.Polled: the
// work queue of a runner pool whose runners all live in this process
// (README.md § Warm runners (pool mode)), with SQS's semantics (Amazon SQS
// Developer Guide, "Amazon SQS visibility timeout", "Amazon SQS short and
// long polling" and "Using dead-letter queues in Amazon SQS"), so that a pool
// that works on it works on the stack's queue (internal/queue/sqs). Both pass
// queuetest.RunPolled.
//
// It owns a queue's messages, their visibility deadlines, receive counts
// and receipts, and its dead-letter list. It deliberately does not
// persist anything (a process that ends loses its queue), promise any
// order, deliver a message twice while it is hidden (SQS standard queues
// rarely may), short-poll a sample of servers (a wait of 0 sees every
// visible message), or run anything: its consumers poll it.
package memory
