package storetest

import (
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testTimes(t *testing.T) {
	t.Parallel()

	times := []struct {
		name string
		t    time.Time
	}{
		{"NonUTCWithNanoseconds", base},
		{"Local", time.Date(2024, 2, 29, 23, 59, 59, 999_000_000, time.Local)},
		{"WithMonotonicReading", time.Now()},
		{"EpochPlus1ms", time.UnixMilli(1)},
		{"Year2099", time.Date(2099, 12, 31, 23, 59, 59, 999_999_999, time.UTC)},
	}
	for _, c := range times {
		t.Run("RoundTrip_MillisecondsUTC/"+c.name, func(t *testing.T) {
			t.Parallel()
			b := su.setup(t)
			r := b.run()
			r.CreatedAt, r.EndedAt = c.t, c.t
			if err := b.s.CreateRun(b.ctx, r); err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			gotRun, err := b.s.GetRun(b.ctx, r.ID)
			if err != nil {
				t.Fatalf("GetRun: %v", err)
			}
			checkRun(t, gotRun, r)

			st := b.step(r.ID, "impl", 1)
			st.CreatedAt, st.EndedAt = c.t, c.t
			b.createStep(t, st)
			gotStep, err := b.s.GetStep(b.ctx, st.TID)
			if err != nil {
				t.Fatalf("GetStep: %v", err)
			}
			checkStep(t, gotStep, st)

			a := b.attempt(st.TID, 1)
			a.StartedAt, a.EngineStartedAt, a.EndedAt = c.t, c.t, c.t
			b.createAttempt(t, a)
			gotAttempt, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
			if err != nil {
				t.Fatalf("GetAttempt: %v", err)
			}
			checkAttempt(t, gotAttempt, a)

			e := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputArtifact, Name: "x.md", Body: []byte("x"), At: c.t}
			if _, err := b.s.AppendOutput(b.ctx, e); err != nil {
				t.Fatalf("AppendOutput: %v", err)
			}
			events, err := b.s.ListOutput(b.ctx, a.TID, a.N)
			if err != nil || len(events) != 1 {
				t.Fatalf("ListOutput = %d events, %v; want 1", len(events), err)
			}
			e.Seq = 1
			checkEvent(t, events[0], e)

			h := b.handle(a.TID, a.N)
			h.ExpiresAt = c.t
			if err := b.s.PutHandle(b.ctx, h); err != nil {
				t.Fatalf("PutHandle: %v", err)
			}
			gotHandle, err := b.s.GetHandle(b.ctx, h.Handle)
			if err != nil {
				t.Fatalf("GetHandle: %v", err)
			}
			checkHandle(t, gotHandle, h)
		})
	}

	t.Run("ZeroTime_RoundTripsToZero", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.run()
		r.CreatedAt = time.Time{}
		if err := b.s.CreateRun(b.ctx, r); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		gotRun, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun: %v", err)
		}
		checkRun(t, gotRun, r)

		st := b.step(r.ID, "impl", 1)
		st.CreatedAt = time.Time{}
		b.createStep(t, st)
		gotStep, err := b.s.GetStep(b.ctx, st.TID)
		if err != nil {
			t.Fatalf("GetStep: %v", err)
		}
		checkStep(t, gotStep, st)

		a := b.attempt(st.TID, 1)
		a.StartedAt = time.Time{}
		b.createAttempt(t, a)
		gotAttempt, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("GetAttempt: %v", err)
		}
		checkAttempt(t, gotAttempt, a)

		e := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputSidecar, Name: "audit.json", Body: []byte("{}")}
		if _, err := b.s.AppendOutput(b.ctx, e); err != nil {
			t.Fatalf("AppendOutput: %v", err)
		}
		events, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil || len(events) != 1 {
			t.Fatalf("ListOutput = %d events, %v; want 1", len(events), err)
		}
		e.Seq = 1
		checkEvent(t, events[0], e)

		h := b.handle(a.TID, a.N)
		h.ExpiresAt = time.Time{}
		if err := b.s.PutHandle(b.ctx, h); err != nil {
			t.Fatalf("PutHandle: %v", err)
		}
		gotHandle, err := b.s.GetHandle(b.ctx, h.Handle)
		if err != nil {
			t.Fatalf("GetHandle: %v", err)
		}
		checkHandle(t, gotHandle, h)
	})
}
