package local_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/queue/local"
	"github.com/stratusflow/stratus/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	queuetest.Run(t, func(t *testing.T) (queue.Queue, queuetest.Received) {
		var mu sync.Mutex
		var got []string
		q := local.New(func(_ context.Context, body []byte) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, string(body))
		})
		t.Cleanup(q.Drain)
		return q, func(context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), got...), nil
		}
	})
}

// Send never waits for the handling, and the handling's context outlives
// the sender's: a request that enqueued work and returned does not cancel
// it. Drain waits for it.
func TestSend_ReturnsAtOnceAndOutlivesTheSender(t *testing.T) {
	release := make(chan struct{})
	var ctxErr error
	q := local.New(func(ctx context.Context, _ []byte) {
		<-release
		ctxErr = ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	if err := q.Send(ctx, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	cancel() // the request ended
	close(release)
	q.Drain()
	if ctxErr != nil {
		t.Errorf("the handler's context ended with its sender's: %v", ctxErr)
	}
}
