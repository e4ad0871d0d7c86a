package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
)

// DeadLetters returns the bodies a queue has moved to its dead-letter
// queue so far (each at least once, in any order).
type DeadLetters func(ctx context.Context) ([]string, error)

// RunPolled runs the queue.Polled suite against the queues newQueue
// returns: each subtest, parallel to the others, gets a fresh queue that
// dead-letters a message on its (maxReceives+1)-th receive (never when
// maxReceives is 0), and what it has dead-lettered. What it checks is
// SQS's behaviour (Amazon SQS Developer Guide, "Amazon SQS visibility
// timeout", "Amazon SQS short and long polling", "Using dead-letter
// queues in Amazon SQS"), and only what SQS promises: it never relies on
// order, on a short poll (wait 0) seeing a message, on a stale receipt's
// Delete leaving the message (SQS: it "might not be deleted"), or on an
// upper bound of time tighter than many seconds. Visibility timeouts are
// 1 to 3 s, so the suite takes a few seconds.
//
// A stand-in that deviates from SQS in one case may skip that subtest in
// newQueue, by its name (t.Name()), with a reason naming the deviation.
func RunPolled(t *testing.T, newQueue func(t *testing.T, maxReceives int) (queue.Polled, DeadLetters)) {
	t.Helper()
	ctx := context.Background()

	// A body sent is received byte for byte, with a receipt, counted as
	// its first receive.
	t.Run("ReceivesTheBodySent", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		body := `{"run_id":"r1","step_ref":"n#1","why":"é \"quoted\" ☃ 𝄞","tab":"\t"}`
		send(t, q, body)
		m := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if string(m.Body) != body || m.Receipt == "" || m.Receives != 1 {
			t.Errorf("Receive = body %q receipt %q receives %d; want body %q, a receipt, receives 1", m.Body, m.Receipt, m.Receives, body)
		}
	})

	// With nothing queued, a long poll waits about wait and returns no
	// message and no error.
	t.Run("ReceiveOfNothingWaits", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		start := time.Now()
		m, ok, err := q.Receive(ctx, 2*time.Second, time.Second)
		if err != nil || ok {
			t.Fatalf("Receive on an empty queue = %+v, %v, %v; want nothing, no error", m, ok, err)
		}
		if d := time.Since(start); d < time.Second || d > 30*time.Second {
			t.Errorf("Receive(wait 2s) on an empty queue returned after %v; want about 2s", d)
		}
	})

	// A long poll returns as soon as a message is sent, not at the end of
	// its wait.
	t.Run("ReceiveReturnsWhenASendArrives", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		got := make(chan string, 1)
		start := time.Now()
		go func() {
			m, ok, err := q.Receive(ctx, queue.MaxWait, 30*time.Second)
			if err != nil || !ok {
				got <- fmt.Sprintf("Receive = ok %v, err %v", ok, err)
				return
			}
			got <- string(m.Body)
		}()
		time.Sleep(500 * time.Millisecond) // let the Receive start waiting (either order must work)
		send(t, q, `{"n":1}`)
		if g := <-got; g != `{"n":1}` {
			t.Fatalf("got %s; want the body sent", g)
		}
		if d := time.Since(start); d > queue.MaxWait-5*time.Second {
			t.Errorf("Receive(wait %v) took %v to return a message sent after 0.5s", queue.MaxWait, d)
		}
	})

	// A received message is hidden from other receives for its visibility
	// timeout, then comes back with a new receipt, received twice.
	t.Run("HiddenUntilVisibilityPasses", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		first := mustReceive(t, q, 10*time.Second, 2*time.Second)
		start := time.Now()
		second := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if d := time.Since(start); d < time.Second {
			t.Errorf("received again after %v; want it hidden for its 2s visibility timeout", d)
		}
		if string(second.Body) != `{"n":1}` || second.Receives != 2 || second.Receipt == first.Receipt {
			t.Errorf("second Receive = body %s receives %d receipt %q; want the body, receives 2, a receipt other than %q", second.Body, second.Receives, second.Receipt, first.Receipt)
		}
	})

	// Extend hides a message past its first deadline, from the time of
	// the call; after the new one it comes back.
	t.Run("ExtendKeepsItHidden", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		m := mustReceive(t, q, 10*time.Second, time.Second)
		if err := q.Extend(ctx, m.Receipt, 4*time.Second); err != nil {
			t.Fatalf("Extend(4s): %v", err)
		}
		// Its first deadline (1s) passes during this wait; its new one (4s) does not.
		if got, ok, err := q.Receive(ctx, 2*time.Second, time.Second); err != nil || ok {
			t.Fatalf("Receive within the extended visibility = %s, %v, %v; want nothing", got.Body, ok, err)
		}
		back := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if back.Receives != 2 {
			t.Errorf("after the extension it came back with receives %d; want 2", back.Receives)
		}
	})

	// Delete removes a message for good, even while hidden; a second
	// Delete of the same receipt is no error (SQS: deleting twice succeeds).
	t.Run("DeleteRemovesForGood", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		m := mustReceive(t, q, 10*time.Second, time.Second)
		if err := q.Delete(ctx, m.Receipt); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if got, ok, err := q.Receive(ctx, 3*time.Second, time.Second); err != nil || ok {
			t.Fatalf("Receive past the deleted message's visibility = %s, %v, %v; want nothing", got.Body, ok, err)
		}
		if err := q.Delete(ctx, m.Receipt); err != nil {
			t.Errorf("Delete again: %v; want no error", err)
		}
	})

	// Extend refuses the receipt of a deleted message, changing nothing.
	t.Run("ExtendRefusesADeletedMessage", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		m := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if err := q.Delete(ctx, m.Receipt); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		wantRefused(t, "Extend of a deleted message's receipt", q.Extend(ctx, m.Receipt, 5*time.Second))
	})

	// A receipt whose message came back and was received again is stale:
	// Extend refuses it, changing nothing; the newer receipt works.
	t.Run("ExtendRefusesAStaleReceipt", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		old := mustReceive(t, q, 10*time.Second, time.Second)
		cur := mustReceive(t, q, 10*time.Second, 2*time.Second)
		wantRefused(t, "Extend of a stale receipt", q.Extend(ctx, old.Receipt, 30*time.Second))
		if err := q.Extend(ctx, cur.Receipt, 30*time.Second); err != nil {
			t.Errorf("Extend of the latest receipt, after a stale one: %v", err)
		}
	})

	// Delete takes a stale receipt without error. Whether the message
	// survives it SQS leaves open ("the request succeeds, but the message
	// might not be deleted"), so nothing here depends on it.
	t.Run("DeleteTakesAStaleReceipt", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		old := mustReceive(t, q, 10*time.Second, time.Second)
		cur := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if err := q.Delete(ctx, old.Receipt); err != nil {
			t.Errorf("Delete of a stale receipt: %v; want no error", err)
		}
		if err := q.Delete(ctx, cur.Receipt); err != nil {
			t.Errorf("Delete of the latest receipt: %v", err)
		}
	})

	// A message received maxReceives times without a Delete moves to the
	// dead-letter queue and is not received again.
	t.Run("DeadLettersAfterMaxReceives", func(t *testing.T) {
		t.Parallel()
		q, deadLetters := newQueue(t, 2)
		send(t, q, `{"n":"poison"}`)
		for i := 1; i <= 2; i++ {
			if m := mustReceive(t, q, 10*time.Second, time.Second); m.Receives != i {
				t.Fatalf("receive %d counted %d", i, m.Receives)
			}
		}
		// Its visibility passes during this wait: a third receive would take it.
		if got, ok, err := q.Receive(ctx, 3*time.Second, time.Second); err != nil || ok {
			t.Fatalf("Receive after maxReceives (2) = %s (receives %d), %v, %v; want nothing: it is dead-lettered", got.Body, got.Receives, ok, err)
		}
		eventually(t, 15*time.Second, "dead-lettered", func() (bool, string, error) {
			dl, err := deadLetters(ctx)
			return slices.Equal(dl, []string{`{"n":"poison"}`}), fmt.Sprintf("dead letters %q", dl), err
		})
	})

	// Receivers polling at once never both get a message while it is
	// hidden: each body sent is received once.
	t.Run("ConcurrentReceiversNeverShare", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		const messages, receivers = 6, 8
		for i := range messages {
			send(t, q, fmt.Sprintf(`{"n":%d}`, i))
		}
		var (
			mu   sync.Mutex
			got  = map[string]int{}
			errs []error
			wg   sync.WaitGroup
		)
		for range receivers {
			wg.Go(func() {
				// Bounded, so that a queue that does not hide what it
				// delivers fails the test instead of spinning forever.
				for range 2 * messages {
					m, ok, err := q.Receive(ctx, 2*time.Second, 60*time.Second)
					mu.Lock()
					if err != nil {
						errs = append(errs, err)
					} else if ok {
						got[string(m.Body)]++
					}
					mu.Unlock()
					if err != nil || !ok {
						return
					}
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			t.Fatalf("Receive: %v", errors.Join(errs...))
		}
		for i := range messages {
			if b := fmt.Sprintf(`{"n":%d}`, i); got[b] != 1 {
				t.Errorf("%s received %d times by %d receivers polling at once; want once", b, got[b], receivers)
			}
		}
	})

	// A wait or visibility out of range is EINVALID naming the field,
	// and nothing is received or changed.
	t.Run("BadWaitOrVisibility", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		send(t, q, `{"n":1}`)
		for _, c := range []struct {
			wait, visibility time.Duration
			field            string
		}{
			{-time.Second, time.Second, "wait"},
			{queue.MaxWait + time.Second, time.Second, "wait"},
			{time.Second, 0, "visibility"},
			{time.Second, 500 * time.Millisecond, "visibility"},
			{time.Second, queue.MaxVisibility + time.Second, "visibility"},
		} {
			_, ok, err := q.Receive(ctx, c.wait, c.visibility)
			if ok || !isField(err, stratus.EINVALID, c.field) {
				t.Errorf("Receive(wait %v, visibility %v) = ok %v, %v; want EINVALID on field %s", c.wait, c.visibility, ok, err, c.field)
			}
		}
		m := mustReceive(t, q, 10*time.Second, 30*time.Second)
		if m.Receives != 1 {
			t.Errorf("after refused receives the message counts %d receives; want 1", m.Receives)
		}
		for _, v := range []time.Duration{0, 500 * time.Millisecond, queue.MaxVisibility + time.Second} {
			if err := q.Extend(ctx, m.Receipt, v); !isField(err, stratus.EINVALID, "visibility") {
				t.Errorf("Extend(visibility %v) = %v; want EINVALID on field visibility", v, err)
			}
		}
		// The refused extensions left its 30s visibility alone: not 0.
		if got, ok, err := q.Receive(ctx, 2*time.Second, time.Second); err != nil || ok {
			t.Errorf("Receive after refused extensions = %s, %v, %v; want nothing: still hidden", got.Body, ok, err)
		}
	})

	// Ending the context ends a waiting Receive with the context's error.
	t.Run("CancelEndsAReceive", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t, 0)
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, ok, err := q.Receive(cctx, queue.MaxWait, time.Second)
		if ok || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Receive with a context ending in 0.5s = ok %v, %v; want context.DeadlineExceeded", ok, err)
		}
		if d := time.Since(start); d > queue.MaxWait-5*time.Second {
			t.Errorf("Receive returned %v after its context ended at 0.5s", d)
		}
	})
}

func send(t *testing.T, q queue.Polled, body string) {
	t.Helper()
	if err := q.Send(context.Background(), []byte(body)); err != nil {
		t.Fatalf("Send(%s): %v", body, err)
	}
}

// mustReceive fails the test unless a message comes within wait.
func mustReceive(t *testing.T, q queue.Polled, wait, visibility time.Duration) queue.Message {
	t.Helper()
	m, ok, err := q.Receive(context.Background(), wait, visibility)
	if err != nil {
		t.Fatalf("Receive: %v", err)
	}
	if !ok {
		t.Fatalf("Receive(wait %v): nothing came", wait)
	}
	return m
}

// wantRefused: an Extend of a receipt no longer in flight is EINVALID
// (stale, SQS's MessageNotInflight or InvalidParameterValue) or
// ENOTFOUND (gone, SQS's ReceiptHandleIsInvalid), on field receipt.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !isField(err, stratus.EINVALID, "receipt") && !isField(err, stratus.ENOTFOUND, "receipt") {
		t.Errorf("%s = %v; want EINVALID or ENOTFOUND on field receipt", what, err)
	}
}

func isField(err error, code, field string) bool {
	var se *stratus.Error
	return errors.As(err, &se) && se.Code == code && se.Field == field
}

// eventually polls check until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() (bool, string, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state, err := check()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not %s within %v: %s", what, timeout, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
