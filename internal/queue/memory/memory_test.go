package memory_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/queue/memory"
	"github.com/stratusflow/stratus/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) (queue.Queue, queuetest.Received) {
		q := memory.New(memory.Options{})
		var mu sync.Mutex
		var got []string
		return q, func(ctx context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			for {
				m, ok, err := q.Receive(ctx, 0, time.Hour)
				if err != nil || !ok {
					return slices.Clone(got), err
				}
				got = append(got, string(m.Body))
			}
		}
	})
}

func TestPolledConformance(t *testing.T) {
	queuetest.RunPolled(t, func(t *testing.T, maxReceives int) (queue.Polled, queuetest.DeadLetters) {
		q := memory.New(memory.Options{MaxReceives: maxReceives})
		return q, func(context.Context) ([]string, error) {
			var out []string
			for _, b := range q.DeadLetters() {
				out = append(out, string(b))
			}
			return out, nil
		}
	})
}

func setup(t *testing.T, o memory.Options) (*memory.Queue, context.Context) {
	t.Helper()
	return memory.New(o), context.Background()
}

func receive(t *testing.T, q *memory.Queue, wait, visibility time.Duration) queue.Message {
	t.Helper()
	m, ok, err := q.Receive(context.Background(), wait, visibility)
	if err != nil || !ok {
		t.Fatalf("Receive = ok %v, %v; want a message", ok, err)
	}
	return m
}

// What SQS leaves open and the suite does not check, memory decides: a
// stale receipt's Delete leaves the message to its newer receiver.
func TestDelete_StaleReceiptLeavesTheMessage(t *testing.T) {
	t.Parallel()
	q, ctx := setup(t, memory.Options{})
	if err := q.Send(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	old := receive(t, q, 0, time.Second)
	cur := receive(t, q, 5*time.Second, time.Second)
	if err := q.Delete(ctx, old.Receipt); err != nil {
		t.Fatalf("Delete(stale) = %v; want nil", err)
	}
	if again := receive(t, q, 5*time.Second, time.Minute); again.Receives != 3 {
		t.Errorf("after a stale Delete the message came back with receives %d; want 3 (receipt %s was the latest)", again.Receives, cur.Receipt)
	}
}

// Delete of a receipt the queue never issued is no error (as SQS, for a
// receipt it does not know), and removes nothing.
func TestDelete_UnknownReceiptIsNoError(t *testing.T) {
	t.Parallel()
	q, ctx := setup(t, memory.Options{})
	if err := q.Send(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, "no-such-receipt"); err != nil {
		t.Errorf("Delete(unknown) = %v; want nil", err)
	}
	receive(t, q, 0, time.Minute)
}

// Extend's refusals, each with its code and field: a stale receipt
// (received again, or visible again) is EINVALID; one no queued message
// has is ENOTFOUND; a visibility past 12 hours from the receive is
// EINVALID on visibility. A refused Extend changes nothing.
func TestExtend_Refusals(t *testing.T) {
	t.Parallel()
	q, ctx := setup(t, memory.Options{})
	if err := q.Send(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	first := receive(t, q, 0, time.Second)
	if err := q.Extend(ctx, first.Receipt, queue.MaxVisibility); !isField(err, stratus.EINVALID, "visibility") {
		t.Errorf("Extend(12h) just after the receive = %v; want EINVALID on visibility (12h total from the receive)", err)
	}
	time.Sleep(1100 * time.Millisecond) // past its visibility: no event to poll for
	if err := q.Extend(ctx, first.Receipt, time.Minute); !isField(err, stratus.EINVALID, "receipt") {
		t.Errorf("Extend after the visibility passed = %v; want EINVALID on receipt (not in flight)", err)
	}
	second := receive(t, q, 0, time.Minute)
	if err := q.Extend(ctx, first.Receipt, time.Minute); !isField(err, stratus.EINVALID, "receipt") {
		t.Errorf("Extend(stale) = %v; want EINVALID on receipt", err)
	}
	if err := q.Extend(ctx, "no-such-receipt", time.Minute); !isField(err, stratus.ENOTFOUND, "receipt") {
		t.Errorf("Extend(unknown) = %v; want ENOTFOUND on receipt", err)
	}
	if err := q.Delete(ctx, second.Receipt); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{first.Receipt, second.Receipt} {
		if err := q.Extend(ctx, r, time.Minute); !isField(err, stratus.ENOTFOUND, "receipt") {
			t.Errorf("Extend(%s) of a deleted message = %v; want ENOTFOUND on receipt", r, err)
		}
	}
}

// Extend can shorten a hidden message's visibility; a Receive already
// waiting wakes for the new deadline rather than sleeping to the old.
func TestExtend_ShorterWakesAWaitingReceive(t *testing.T) {
	t.Parallel()
	q, ctx := setup(t, memory.Options{})
	if err := q.Send(ctx, []byte("x")); err != nil {
		t.Fatal(err)
	}
	m := receive(t, q, 0, time.Hour)
	got := make(chan bool, 1)
	go func() {
		_, ok, _ := q.Receive(ctx, queue.MaxWait, time.Minute)
		got <- ok
	}()
	start := time.Now()
	if err := q.Extend(ctx, m.Receipt, time.Second); err != nil {
		t.Fatal(err)
	}
	if !<-got {
		t.Fatal("the waiting Receive got nothing")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the waiting Receive took %v for a message visible again after 1s", d)
	}
}

// With MaxReceives 0 a message is never dead-lettered.
func TestMaxReceivesZero_NeverDeadLetters(t *testing.T) {
	t.Parallel()
	q, _ := setup(t, memory.Options{})
	if err := q.Send(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if m := receive(t, q, 5*time.Second, time.Second); m.Receives != i {
			t.Fatalf("receive %d counted %d", i, m.Receives)
		}
	}
	if dl := q.DeadLetters(); len(dl) != 0 {
		t.Errorf("DeadLetters = %q; want none", dl)
	}
}

// A receipt is one receive's: two queues never issue the same one, and a
// queue does not know another's.
func TestReceipts_UniquePerReceive(t *testing.T) {
	t.Parallel()
	a, ctx := setup(t, memory.Options{})
	b, _ := setup(t, memory.Options{})
	for _, q := range []*memory.Queue{a, b} {
		if err := q.Send(ctx, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	ra, rb := receive(t, a, 0, time.Minute), receive(t, b, 0, time.Minute)
	if ra.Receipt == rb.Receipt {
		t.Fatalf("two queues issued receipt %s", ra.Receipt)
	}
	if err := b.Extend(ctx, ra.Receipt, time.Minute); !isField(err, stratus.ENOTFOUND, "receipt") {
		t.Errorf("queue b extending queue a's receipt = %v; want ENOTFOUND", err)
	}
}

// The body received is a copy: changing the one sent or the one received
// changes nothing queued.
func TestBodies_AreCopies(t *testing.T) {
	t.Parallel()
	q, ctx := setup(t, memory.Options{MaxReceives: 1})
	body := []byte("abc")
	if err := q.Send(ctx, body); err != nil {
		t.Fatal(err)
	}
	body[0] = 'X'
	m := receive(t, q, 0, time.Second)
	if string(m.Body) != "abc" {
		t.Fatalf("received %q; want abc", m.Body)
	}
	m.Body[0] = 'Y'
	if _, ok, err := q.Receive(ctx, 2*time.Second, time.Second); ok || err != nil {
		t.Fatalf("Receive after MaxReceives 1 = ok %v, %v; want nothing", ok, err)
	}
	if dl := q.DeadLetters(); len(dl) != 1 || string(dl[0]) != "abc" {
		t.Errorf("DeadLetters = %q; want [abc]", dl)
	}
}

// A Receive ended by its context, or by its wait, leaves no goroutine
// behind, and a cancelled context fails every call at once.
func TestReceive_NoGoroutineLeftBehind(t *testing.T) {
	q, ctx := setup(t, memory.Options{})
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			if _, _, err := q.Receive(cctx, queue.MaxWait, time.Second); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Receive = %v; want context.DeadlineExceeded", err)
			}
		})
		wg.Go(func() {
			if _, ok, err := q.Receive(ctx, 10*time.Millisecond, time.Second); ok || err != nil {
				t.Errorf("Receive = ok %v, %v; want nothing", ok, err)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the receives ended; %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := q.Send(cancelled, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Send(cancelled) = %v", err)
	}
	if _, _, err := q.Receive(cancelled, 0, time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Receive(cancelled) = %v", err)
	}
}

func isField(err error, code, field string) bool {
	var se *stratus.Error
	return errors.As(err, &se) && se.Code == code && se.Field == field
}
