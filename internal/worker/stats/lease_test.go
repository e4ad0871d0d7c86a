package stats_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/stats"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// clock is a settable Service.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// hourLongRig is a rig whose engines have a one-hour deadline, on a
// settable clock.
func hourLongRig(t *testing.T) (*workertest.Rig, *clock) {
	t.Helper()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.ChainFlow, Config: func(c *config.Config) {
		for n, p := range c.Agents.Providers {
			p.TimeoutSeconds = 3600
			c.Agents.Providers[n] = p
		}
	}})
	clk := &clock{t: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	r.Svc.Now = clk.now
	return r, clk
}

// docs/contracts.md § Bearer authentication: a handle lives one lease (the
// token TTL, 600 s) past its last heartbeat, never past the step's deadline
// plus the submit grace: an hour-long step whose runner heartbeats every
// minute keeps its credential throughout and submits at 62 minutes; a worker
// that stops heartbeating loses it one lease later, not hours later. Before,
// the exchanged handle lived the whole deadline plus grace (65 minutes here)
// whatever became of its worker.
func TestHandle_LeaseRenewedByHeartbeatsForAnHourLongStep(t *testing.T) {
	t.Parallel()
	r, clk := hourLongRig(t)
	r.Dispatch(t, "planning")
	sp := r.Launcher.Launched()[0]
	ctx, auth := context.Background(), "Bearer "+sp.Handle
	h, err := r.Svc.Store.GetHandle(ctx, sp.Handle)
	if err != nil {
		t.Fatal(err)
	}
	if want := clk.now().Add(600 * time.Second); !h.ExpiresAt.Equal(want) {
		t.Errorf("the exchanged handle expires at %v; want one lease (600 s) on, %v", h.ExpiresAt, want)
	}
	writes := 0
	for minute := 1; minute <= 62; minute++ {
		clk.advance(time.Minute)
		steps := minute
		if err := stats.Invoke(ctx, r.Svc.Service, auth, core.Stats{Steps: &steps}); err != nil {
			t.Fatalf("heartbeat at minute %d: %v", minute, err)
		}
		if got, _ := r.Svc.Store.GetHandle(ctx, sp.Handle); !got.ExpiresAt.Equal(h.ExpiresAt) {
			writes++
			h = got
		}
	}
	if writes < 50 || writes > 62 {
		t.Errorf("%d lease renewals in 62 heartbeats; want about one a minute (a write only when it moves the expiry by 60 s or more)", writes)
	}
	if _, err := r.Svc.Submit(ctx, auth, sp.TaskID, []byte("done after an hour"), true); err != nil {
		t.Fatalf("submit at minute 62: %v", err)
	}
}

// The lease never runs past the deadline plus the grace (3600 + 300 s from
// the attempt's start), and a silent worker's handle is refused one lease
// after its last heartbeat.
func TestHandle_LeaseEndsAtTheDeadlineAndWithoutHeartbeats(t *testing.T) {
	t.Parallel()
	r, clk := hourLongRig(t)
	r.Dispatch(t, "planning")
	start := clk.now()
	sp := r.Launcher.Launched()[0]
	ctx, auth := context.Background(), "Bearer "+sp.Handle
	for range 64 {
		clk.advance(time.Minute)
		one := 1
		if err := stats.Invoke(ctx, r.Svc.Service, auth, core.Stats{Steps: &one}); err != nil {
			t.Fatal(err)
		}
	}
	h, _ := r.Svc.Store.GetHandle(ctx, sp.Handle)
	if limit := start.Add(3900 * time.Second); !h.ExpiresAt.Equal(limit) {
		t.Errorf("after 64 minutes of heartbeats the handle expires at %v; want the deadline plus grace, %v", h.ExpiresAt, limit)
	}

	// A second step: its worker heartbeats once, then goes silent.
	r.Dispatch(t, "implementation")
	sp = r.Launcher.Launched()[1]
	auth = "Bearer " + sp.Handle
	clk.advance(5 * time.Minute)
	one := 1
	if err := stats.Invoke(ctx, r.Svc.Service, auth, core.Stats{Steps: &one}); err != nil {
		t.Fatal(err)
	}
	clk.advance(599 * time.Second)
	if _, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID); err != nil {
		t.Errorf("599 s after the last heartbeat: %v; want the handle still good", err)
	}
	clk.advance(2 * time.Second)
	_, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if stratus.ErrorCode(err) != stratus.EUNAUTHORIZED || !strings.Contains(err.Error(), "expired") {
		t.Errorf("601 s after the last heartbeat: %v; want 401, expired", err)
	}
}
