// Package queuetest is the one conformance suite every queue.Queue
// implementation runs (Run), and every queue.Polled one (RunPolled)
// (docs/architecture.md § Ports and their conformance suites: one suite,
// both implementations).
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
)

// Received returns the bodies the queue has delivered so far (each at
// least once, in any order).
type Received func(ctx context.Context) ([]string, error)

// Run runs the suite against the queues newQueue returns; each subtest
// gets a fresh queue and what it delivered.
func Run(t *testing.T, newQueue func(t *testing.T) (queue.Queue, Received)) {
	t.Helper()
	ctx := context.Background()

	// Every body sent is delivered, byte for byte (at least once).
	t.Run("DeliversEachBody", func(t *testing.T) {
		t.Parallel()
		q, received := newQueue(t)
		var want []string
		for i := range 3 {
			body := fmt.Sprintf(`{"run_id":"r1","kind":"supervisor.observe","step_ref":"n#%d","why":"é \"quoted\""}`, i)
			want = append(want, body)
			if err := q.Send(ctx, []byte(body)); err != nil {
				t.Fatalf("Send(%s): %v", body, err)
			}
		}
		deadline := time.Now().Add(15 * time.Second)
		for {
			got, err := received(ctx)
			if err != nil {
				t.Fatal(err)
			}
			missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(got, w) })
			if len(missing) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("not delivered within 15 s: %v (delivered %v)", missing, got)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	// A body of exactly MaxBodyBytes is taken; an empty one, or one byte
	// more, is EINVALID on field body, before anything is sent.
	t.Run("BodyLimits", func(t *testing.T) {
		t.Parallel()
		q, _ := newQueue(t)
		big := `{"pad":"` + strings.Repeat("x", queue.MaxBodyBytes-10) + `"}`
		if err := q.Send(ctx, []byte(big)); err != nil {
			t.Errorf("Send(%d bytes, the limit): %v", len(big), err)
		}
		for _, body := range []string{"", big + " "} {
			err := q.Send(ctx, []byte(body))
			var se *stratus.Error
			if stratus.ErrorCode(err) != stratus.EINVALID || !errors.As(err, &se) || se.Field != "body" {
				t.Errorf("Send(%d bytes) = %v; want EINVALID on field body", len(body), err)
			}
		}
	})
}
