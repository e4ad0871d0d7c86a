package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testHandles(t *testing.T) {
	t.Parallel()

	t.Run("PutHandle_GetHandle_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 3)
		h := b.handle(a.TID, a.N)
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatalf("PutHandle(%q): %v", h.Handle, err)
		}
		got, err := b.s.GetHandle(b.ctx, h.Handle)
		if err != nil {
			t.Fatalf("GetHandle(%q): %v", h.Handle, err)
		}
		checkHandle(t, got, h)
	})

	// docs/security.md § Handles: a handle names its run, and every read
	// returns it (Get and the one-time Take alike); a handle stored
	// without one reads back without one.
	t.Run("Handle_NamesItsRun", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		h.RunID = st.RunID
		legacy := b.handle(a.TID, a.N)
		legacy.RunID = ""
		for _, h := range []stratus.Handle{h, legacy} {
			if err := b.s.PutHandle(b.ctx, h); err != nil {
				t.Fatalf("PutHandle(%q): %v", h.Handle, err)
			}
			got, err := b.s.GetHandle(b.ctx, h.Handle)
			if err != nil || got.RunID != h.RunID {
				t.Errorf("GetHandle(%q) = run %q, %v; want run %q", h.Handle, got.RunID, err, h.RunID)
			}
			if got, err = b.s.TakeHandle(b.ctx, h.Handle); err != nil || got.RunID != h.RunID {
				t.Errorf("TakeHandle(%q) = run %q, %v; want run %q", h.Handle, got.RunID, err, h.RunID)
			}
		}
	})

	t.Run("PutHandle_Duplicate_Conflict", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatalf("PutHandle(%q): %v", h.Handle, err)
		}
		dup := h
		dup.Attempt, dup.ExpiresAt = 2, h.ExpiresAt.Add(time.Hour)
		wantCode(t, "PutHandle of an existing handle", b.s.PutHandle(b.ctx, dup), stratus.ECONFLICT)
		got, err := b.s.GetHandle(b.ctx, h.Handle)
		if err != nil {
			t.Fatalf("GetHandle(%q): %v", h.Handle, err)
		}
		checkHandle(t, got, h)
	})

	t.Run("PutHandle_ConcurrentSameHandle_OneWins", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		errs := make([]error, 8)
		concurrently(len(errs), func(i int) {
			h := h
			h.Attempt = i + 1
			errs[i] = b.s.PutHandle(b.ctx, h)
		})
		oneWins(t, "PutHandle", errs)
	})

	t.Run("GetHandle_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, err := b.s.GetHandle(b.ctx, "wh-"+b.key("h"))
		wantCode(t, "GetHandle of a missing handle", err, stratus.ENOTFOUND)
	})

	t.Run("GetHandle_Expired_StillReturned", func(t *testing.T) {
		// Expiry is the caller's check, so a 401 can say "expired".
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		h.ExpiresAt = time.Now().Add(-time.Hour)
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatalf("PutHandle(%q): %v", h.Handle, err)
		}
		got, err := b.s.GetHandle(b.ctx, h.Handle)
		if err != nil {
			t.Fatalf("GetHandle(%q) of an expired handle: %v", h.Handle, err)
		}
		checkHandle(t, got, h)
	})
}

func (su *suite) testTakeHandle(t *testing.T) {
	t.Parallel()
	// docs/security.md § Handles: a heartbeat renews a handle's lease: the
	// new expiry is what GetHandle returns; a missing or taken handle is
	// ENOTFOUND.
	t.Run("RenewHandle", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatal(err)
		}
		later := h.ExpiresAt.Add(90 * time.Minute)
		if err := b.s.RenewHandle(b.ctx, h.Handle, later); err != nil {
			t.Fatalf("RenewHandle: %v", err)
		}
		got, err := b.s.GetHandle(b.ctx, h.Handle)
		if err != nil {
			t.Fatal(err)
		}
		want := h
		want.ExpiresAt = later
		checkHandle(t, got, want)
		wantCode(t, "RenewHandle of a missing handle", b.s.RenewHandle(b.ctx, "wh-"+b.key("none"), later), stratus.ENOTFOUND)
		if _, err := b.s.TakeHandle(b.ctx, h.Handle); err != nil {
			t.Fatal(err)
		}
		wantCode(t, "RenewHandle of a taken handle", b.s.RenewHandle(b.ctx, h.Handle, later), stratus.ENOTFOUND)
	})
	// docs/security.md § Handles: a one-time value is taken once: the first
	// TakeHandle returns it, every later Take or Get is ENOTFOUND —
	// concurrent takers included, exactly one of which wins.
	t.Run("TakeHandle_Once", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		h := b.handle(a.TID, a.N)
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatal(err)
		}
		const n = 6
		wins := make(chan stratus.Handle, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if got, err := b.s.TakeHandle(b.ctx, h.Handle); err == nil {
					wins <- got
				} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
					t.Errorf("TakeHandle: %v; want the handle or ENOTFOUND", err)
				}
			}()
		}
		wg.Wait()
		close(wins)
		if len(wins) != 1 {
			t.Fatalf("%d of %d concurrent takers got the handle; want exactly 1", len(wins), n)
		}
		checkHandle(t, <-wins, h)
		_, err := b.s.GetHandle(b.ctx, h.Handle)
		wantCode(t, "GetHandle of a taken handle", err, stratus.ENOTFOUND)
		_, err = b.s.TakeHandle(b.ctx, "wh-"+b.key("absent"))
		wantCode(t, "TakeHandle of an absent handle", err, stratus.ENOTFOUND)
	})
}
