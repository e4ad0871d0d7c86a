package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testDegradations(t *testing.T) {
	t.Parallel()

	t.Run("AppendDegradation_ListInAppendOrder", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		run, other := b.key("run"), b.key("run")
		want := []stratus.Degradation{
			{RunID: run, StepRef: "planning#1", Attempt: 1, Tool: "web_search", Error: "timeout", Fallback: "cached index", Note: "n", At: base},
			{RunID: run, StepRef: "review#2", Attempt: 3, Tool: "git", Error: "denied", Fallback: "diff file", At: base.Add(time.Second)},
		}
		for _, d := range want {
			if err := b.s.AppendDegradation(b.ctx, d); err != nil {
				t.Fatalf("AppendDegradation: %v", err)
			}
		}
		if err := b.s.AppendDegradation(b.ctx, stratus.Degradation{RunID: other, StepRef: "x#1", Attempt: 1, Tool: "t", Error: "e", Fallback: "f", At: base}); err != nil {
			t.Fatal(err)
		}
		got, err := b.s.ListDegradations(b.ctx, run)
		if err != nil {
			t.Fatalf("ListDegradations: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("ListDegradations = %d entries, want %d", len(got), len(want))
		}
		for i := range want {
			w := want[i]
			w.At = w.At.UTC().Truncate(time.Millisecond)
			if got[i] != w {
				t.Errorf("entry %d = %+v, want %+v", i, got[i], w)
			}
		}
		if none, err := b.s.ListDegradations(b.ctx, b.key("run")); err != nil || len(none) != 0 {
			t.Errorf("ListDegradations(unknown run) = %v, %v; want empty", none, err)
		}
	})

	t.Run("AppendDegradation_Concurrent_AllKept", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		run := b.key("run")
		errs := make([]error, 8)
		concurrently(len(errs), func(i int) {
			errs[i] = b.s.AppendDegradation(b.ctx, stratus.Degradation{RunID: run, StepRef: fmt.Sprintf("impl#%d", i), Attempt: 1, Tool: "t", At: base})
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("AppendDegradation %d: %v", i, err)
			}
		}
		got, err := b.s.ListDegradations(b.ctx, run)
		seen := map[string]bool{}
		for _, d := range got {
			seen[d.StepRef] = true
		}
		if err != nil || len(got) != len(errs) || len(seen) != len(errs) {
			t.Errorf("ListDegradations = %d entries (%d distinct), %v; want %d", len(got), len(seen), err, len(errs))
		}
	})
}

func (su *suite) testRenderSizes(t *testing.T) {
	t.Parallel()

	t.Run("PutRenderSize_LastWriteWins", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		agent := b.key("agent")
		if _, err := b.s.GetRenderSize(b.ctx, agent); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Fatalf("GetRenderSize(never rendered) err = %v, want ENOTFOUND", err)
		}
		for i, n := range []int{1200, 800} {
			if err := b.s.PutRenderSize(b.ctx, stratus.RenderSize{Agent: agent, Bytes: n, At: base.Add(time.Duration(i) * time.Minute)}); err != nil {
				t.Fatalf("PutRenderSize: %v", err)
			}
		}
		got, err := b.s.GetRenderSize(b.ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		if got.Bytes != 800 || !got.At.Equal(base.Add(time.Minute).Truncate(time.Millisecond)) || got.Agent != agent {
			t.Errorf("GetRenderSize = %+v, want 800 bytes at %s", got, base.Add(time.Minute))
		}
	})
}
