package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
)

// Options configure a Queue.
type Options struct {
	// MaxReceives is the most times a message is received without being
	// deleted before it moves to the dead-letter list instead of being
	// received again (SQS's redrive policy maxReceiveCount: Amazon SQS
	// Developer Guide, "Using dead-letter queues in Amazon SQS"). 0 (or
	// less): never; a message comes back for as long as it is not deleted.
	MaxReceives int
}

// Queue is a queue.Polled held in this process's memory. Safe for
// concurrent use; the zero value is not usable (New).
type Queue struct {
	maxReceives int

	mu       sync.Mutex
	msgs     []*message          // in the order sent; hidden ones included
	receipts map[string]*message // every receipt of a message still queued
	dead     [][]byte            // bodies moved to the dead-letter list, oldest first
	nextID   uint64
	// changed is closed (and replaced) when a message may have become
	// receivable sooner than a waiting Receive computed: a Send, an
	// Extend. Waiters select on it rather than a sync.Cond so that a
	// context or a timer can end their wait too.
	changed chan struct{}
}

type message struct {
	id         uint64
	body       []byte
	receives   int
	receipt    string    // the latest receive's; "" before the first
	all        []string  // every receipt issued for it, to forget on removal
	receivedAt time.Time // of the latest receive: its visibility is capped at MaxVisibility from then
	visibleAt  time.Time // zero or past: receivable
}

// receiptSeq numbers receives across every Queue of the process, so a
// receipt is unique per receive and one queue's receipt is unknown to
// another.
var receiptSeq atomic.Uint64

var _ queue.Polled = (*Queue)(nil)

// New returns an empty Queue.
func New(o Options) *Queue {
	return &Queue{maxReceives: max(o.MaxReceives, 0), receipts: map[string]*message{}, changed: make(chan struct{})}
}

// Send queues a copy of body, receivable at once. Errors: queue.Check's;
// ctx's error when ctx has ended.
func (q *Queue) Send(ctx context.Context, body []byte) error {
	if err := queue.Check(body); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.nextID++
	q.msgs = append(q.msgs, &message{id: q.nextID, body: slices.Clone(body)})
	q.broadcast()
	return nil
}

// Receive returns one receivable message (a copy of its body, a fresh
// receipt, its receive count including this one), hidden from every other
// Receive for visibility from now. With none receivable it waits up to
// wait (a long poll: Amazon SQS Developer Guide, "Amazon SQS short and
// long polling") and returns as soon as one is sent or its visibility
// timeout passes; after wait, ok is false. A wait of 0 returns at once.
// A message already received MaxReceives times moves to the dead-letter
// list when it would be received again, and is not returned.
//
// Errors, before anything is received: queue.CheckWait's and
// queue.CheckVisibility's (EINVALID, Field "wait" or "visibility"); ctx's
// error when ctx ends first (ctx.Err() itself).
func (q *Queue) Receive(ctx context.Context, wait, visibility time.Duration) (queue.Message, bool, error) {
	if err := queue.CheckWait(wait); err != nil {
		return queue.Message{}, false, err
	}
	if err := queue.CheckVisibility(visibility); err != nil {
		return queue.Message{}, false, err
	}
	if err := ctx.Err(); err != nil {
		return queue.Message{}, false, err
	}
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		q.mu.Lock()
		now := time.Now()
		if m, ok := q.take(now, visibility); ok {
			q.mu.Unlock()
			return m, true, nil
		}
		if !now.Before(deadline) {
			q.mu.Unlock()
			return queue.Message{}, false, nil
		}
		until := deadline
		if next, ok := q.nextVisible(now); ok && next.Before(until) {
			until = next
		}
		changed := q.changed
		q.mu.Unlock()

		if timer == nil {
			timer = time.NewTimer(until.Sub(now))
		} else {
			timer.Reset(until.Sub(now)) // Go 1.23 timers: no stale value to drain
		}
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			return queue.Message{}, false, ctx.Err()
		}
	}
}

// Delete removes the message receipt names, hidden or not (Amazon SQS API
// Reference, DeleteMessage). It does nothing, without error, for a stale
// receipt (the message was received again since: it is the newer
// receiver's), for a message already deleted or dead-lettered, and for a
// receipt this queue never issued. Errors: ctx's error when ctx has ended.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.receipts[receipt]
	if m == nil || m.receipt != receipt {
		return nil
	}
	q.remove(m)
	return nil
}

// Extend hides the message receipt names for visibility from now, in
// place of what was left of its visibility timeout (Amazon SQS API
// Reference, ChangeMessageVisibility); the next receive hides it for that
// receive's visibility again. Errors, none of which changes anything:
// queue.CheckVisibility's; EINVALID (Field "visibility") when now plus
// visibility is over MaxVisibility from the receive (SQS caps a message's
// total visibility timeout at 12 hours); EINVALID (Field "receipt") for a
// stale receipt: the message was received again since, or its visibility
// timeout has passed and it is receivable again (SQS's MessageNotInflight);
// ENOTFOUND (Field "receipt") when no queued message ever had the
// receipt: deleted, dead-lettered, or never issued by this queue; ctx's
// error when ctx has ended.
func (q *Queue) Extend(ctx context.Context, receipt string, visibility time.Duration) error {
	if err := queue.CheckVisibility(visibility); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	m := q.receipts[receipt]
	switch now := time.Now(); {
	case m == nil:
		return stratus.FieldErrorf(stratus.ENOTFOUND, "receipt", "receipt %q names no queued message: it was deleted or dead-lettered, or this queue never issued it", receipt)
	case m.receipt != receipt:
		return stratus.FieldErrorf(stratus.EINVALID, "receipt", "receipt %q is stale: its message was received again since (receive %d); valid: the latest receive's receipt", receipt, m.receives)
	case !m.visibleAt.After(now):
		return stratus.FieldErrorf(stratus.EINVALID, "receipt", "receipt %q is stale: its message's visibility timeout passed %v ago and it is receivable again (not in flight)", receipt, now.Sub(m.visibleAt).Round(time.Millisecond))
	case now.Add(visibility).After(m.receivedAt.Add(queue.MaxVisibility)):
		left := m.receivedAt.Add(queue.MaxVisibility).Sub(now)
		return stratus.FieldErrorf(stratus.EINVALID, "visibility", "a visibility timeout of %v would hide the message past %v from its receive; valid: at most %v more", visibility, queue.MaxVisibility, left.Truncate(time.Second))
	default:
		m.visibleAt = now.Add(visibility)
		q.broadcast() // a waiter's next wake-up may now be sooner
		return nil
	}
}

// DeadLetters returns copies of the bodies moved to the dead-letter list
// (Options.MaxReceives), oldest first; they stay there.
func (q *Queue) DeadLetters() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([][]byte, len(q.dead))
	for i, b := range q.dead {
		out[i] = slices.Clone(b)
	}
	return out
}

// take receives the first receivable message, dead-lettering on the way
// each receivable one that has had its MaxReceives. q.mu is held.
func (q *Queue) take(now time.Time, visibility time.Duration) (queue.Message, bool) {
	for i := 0; i < len(q.msgs); {
		m := q.msgs[i]
		if m.visibleAt.After(now) {
			i++
			continue
		}
		if q.maxReceives > 0 && m.receives >= q.maxReceives {
			q.remove(m)
			q.dead = append(q.dead, m.body)
			continue // q.msgs[i] is the next message now
		}
		m.receives++
		m.receipt = fmt.Sprintf("memory-m%d-r%d", m.id, receiptSeq.Add(1))
		m.all = append(m.all, m.receipt)
		q.receipts[m.receipt] = m
		m.receivedAt, m.visibleAt = now, now.Add(visibility)
		return queue.Message{Body: slices.Clone(m.body), Receipt: m.receipt, Receives: m.receives}, true
	}
	return queue.Message{}, false
}

// nextVisible is the soonest time a hidden message becomes receivable.
// q.mu is held.
func (q *Queue) nextVisible(now time.Time) (time.Time, bool) {
	var next time.Time
	for _, m := range q.msgs {
		if m.visibleAt.After(now) && (next.IsZero() || m.visibleAt.Before(next)) {
			next = m.visibleAt
		}
	}
	return next, !next.IsZero()
}

// remove drops m and forgets its receipts. q.mu is held.
func (q *Queue) remove(m *message) {
	q.msgs = slices.DeleteFunc(q.msgs, func(x *message) bool { return x == m })
	for _, r := range m.all {
		delete(q.receipts, r)
	}
}

// broadcast wakes every waiting Receive. q.mu is held.
func (q *Queue) broadcast() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Counts returns how many messages are queued and receivable now, and how
// many a receive hides (in flight): SQS's ApproximateNumberOfMessagesVisible
// and ApproximateNumberOfMessagesNotVisible, the demand a runner pool's
// scaling reads (README.md § Warm runners (pool mode)).
func (q *Queue) Counts() (visible, inFlight int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	for _, m := range q.msgs {
		if m.visibleAt.After(now) {
			inFlight++
		} else {
			visible++
		}
	}
	return visible, inFlight
}
