// Package local is the embedded implementation of queue.Queue: each
// message is handed to a handler in a goroutine of this process, as the
// dispatch function would receive it from the stack's queue.
package local

import (
	"context"
	"sync"

	"github.com/stratusflow/stratus/internal/queue"
)

// Queue runs Handle for each message sent, in the background.
type Queue struct {
	handle func(ctx context.Context, body []byte)
	wg     sync.WaitGroup
}

var _ queue.Queue = (*Queue)(nil)

// New returns a Queue whose messages handle runs, each in a goroutine of
// its own with a context that outlives the sender's (a request ending does
// not cancel the work it enqueued).
func New(handle func(ctx context.Context, body []byte)) *Queue {
	return &Queue{handle: handle}
}

// Send checks body (queue.Check) and starts its handling; it never waits
// for it. Errors: queue.Check's.
func (q *Queue) Send(ctx context.Context, body []byte) error {
	if err := queue.Check(body); err != nil {
		return err
	}
	b := append([]byte(nil), body...)
	bg := context.WithoutCancel(ctx)
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		q.handle(bg, b)
	}()
	return nil
}

// Drain waits until every message sent so far has been handled (an
// embedded run calls it before it stops its workers).
func (q *Queue) Drain() { q.wg.Wait() }
