package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stratusflow/stratus"
)

func (su *suite) testCompleteAttempt(t *testing.T) {
	t.Parallel()

	final := func(a stratus.Attempt, body string) stratus.OutputEvent {
		return stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputFinal, Body: []byte(body), OK: true, At: base}
	}

	t.Run("CompleteAttempt_AppendsAndUpdatesTogether", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		if _, err := b.s.AppendOutput(b.ctx, stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputArtifact, Name: "plan.md", Body: []byte("p"), At: base}); err != nil {
			t.Fatal(err)
		}
		a.Status, a.Terminal, a.EndedAt = stratus.AttemptSubmitted, "Captured", base
		st.Status, st.Verdict, st.Value, st.EndedAt = stratus.StepCompleted, "accept", json.RawMessage(`{"outcome":"accept"}`), base
		seq, err := b.s.CompleteAttempt(b.ctx, final(a, "done"), a, st)
		if err != nil || seq != 2 {
			t.Fatalf("CompleteAttempt = %d, %v; want seq 2", seq, err)
		}
		tail, _ := b.s.ListOutput(b.ctx, a.TID, a.N)
		if len(tail) != 2 || tail[1].Kind != stratus.OutputFinal || string(tail[1].Body) != "done" {
			t.Errorf("tail = %+v", tail)
		}
		gotA, _ := b.s.GetAttempt(b.ctx, a.TID, a.N)
		gotS, _ := b.s.GetStep(b.ctx, st.TID)
		if gotA.Status != stratus.AttemptSubmitted || gotA.Terminal != "Captured" || gotS.Status != stratus.StepCompleted || gotS.Verdict != "accept" {
			t.Errorf("attempt %+v step %+v not updated", gotA, gotS)
		}
	})

	t.Run("CompleteAttempt_SecondFinal_ConflictChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		if _, err := b.s.AppendOutput(b.ctx, final(a, "first")); err != nil {
			t.Fatal(err)
		}
		a2, st2 := a, st
		a2.Status, st2.Status, st2.Verdict = stratus.AttemptSubmitted, stratus.StepCompleted, "x"
		if _, err := b.s.CompleteAttempt(b.ctx, final(a, "second"), a2, st2); stratus.ErrorCode(err) != stratus.ECONFLICT {
			t.Fatalf("err = %v, want ECONFLICT", err)
		}
		gotA, _ := b.s.GetAttempt(b.ctx, a.TID, a.N)
		gotS, _ := b.s.GetStep(b.ctx, st.TID)
		tail, _ := b.s.ListOutput(b.ctx, a.TID, a.N)
		if gotA.Status != a.Status || gotS.Status != st.Status || len(tail) != 1 {
			t.Errorf("a refused completion changed state: attempt %q step %q tail %d", gotA.Status, gotS.Status, len(tail))
		}
	})

	t.Run("CompleteAttempt_MissingStep_NotFoundAppendsNothing", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		st.TID = b.key("missing")
		if _, err := b.s.CompleteAttempt(b.ctx, final(a, "x"), a, st); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Fatalf("err = %v, want ENOTFOUND", err)
		}
		if tail, _ := b.s.ListOutput(b.ctx, a.TID, a.N); len(tail) != 0 {
			t.Errorf("the Final was appended: %d events", len(tail))
		}
	})

	t.Run("CompleteAttempt_MissingAttempt_NotFoundChangesNothing", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		missing := b.attempt(st.TID, 2)
		st2 := st
		st2.Status = stratus.StepCompleted
		if _, err := b.s.CompleteAttempt(b.ctx, final(missing, "x"), missing, st2); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Fatalf("err = %v, want ENOTFOUND", err)
		}
		if tail, _ := b.s.ListOutput(b.ctx, missing.TID, missing.N); len(tail) != 0 {
			t.Errorf("the Final was appended: %d events", len(tail))
		}
		if got, _ := b.s.GetStep(b.ctx, st.TID); got.Status != st.Status {
			t.Errorf("the step was updated to %q", got.Status)
		}
		// The Final of the missing attempt was not recorded either: the
		// real attempt still takes one.
		if _, err := b.s.AppendOutput(b.ctx, final(a, "ok")); err != nil {
			t.Errorf("AppendOutput of attempt %d's Final: %v", a.N, err)
		}
	})

	t.Run("CompleteAttempt_Concurrent_OneWinsItsStateKept", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		errs := make([]error, 8)
		concurrently(len(errs), func(i int) {
			a2, st2 := a, st
			a2.Status, a2.Reason = stratus.AttemptSubmitted, fmt.Sprint(i)
			st2.Status, st2.Verdict = stratus.StepCompleted, fmt.Sprint(i)
			_, errs[i] = b.s.CompleteAttempt(b.ctx, final(a, fmt.Sprint(i)), a2, st2)
		})
		oneWins(t, "CompleteAttempt", errs)
		winner := ""
		for i, err := range errs {
			if err == nil {
				winner = fmt.Sprint(i)
			}
		}
		tail, _ := b.s.ListOutput(b.ctx, a.TID, a.N)
		gotA, _ := b.s.GetAttempt(b.ctx, a.TID, a.N)
		gotS, _ := b.s.GetStep(b.ctx, st.TID)
		if len(tail) != 1 || string(tail[0].Body) != winner || gotA.Reason != winner || gotS.Verdict != winner {
			t.Errorf("winner %s: tail %d events (first %q), attempt reason %q, step verdict %q; want the winner's everywhere",
				winner, len(tail), firstBody(tail), gotA.Reason, gotS.Verdict)
		}
	})

	t.Run("CompleteAttempt_1MiBFinal_RoundTrips", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a := b.parents(t, 1)
		body := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
		a.Status, st.Status = stratus.AttemptSubmitted, stratus.StepCompleted
		if seq, err := b.s.CompleteAttempt(b.ctx, final(a, string(body)), a, st); err != nil || seq != 1 {
			t.Fatalf("CompleteAttempt = %d, %v; want seq 1", seq, err)
		}
		tail, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil || len(tail) != 1 {
			t.Fatalf("ListOutput = %d events, %v; want 1", len(tail), err)
		}
		checkBody(t, "1 MiB Final", tail[0].Body, body)
	})
}

func firstBody(tail []stratus.OutputEvent) string {
	if len(tail) == 0 {
		return ""
	}
	return string(tail[0].Body)
}
