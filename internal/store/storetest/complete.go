package storetest

import (
	"encoding/json"
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
}
