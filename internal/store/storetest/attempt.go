package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testAttempts(t *testing.T) {
	t.Parallel()

	t.Run("CreateAttempt_GetAttempt_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		a := b.attempt(st.TID, 2)
		a.Status, a.Terminal, a.Reason = stratus.AttemptFailed, "deadline", "engine exceeded 600 s"
		a.Steps, a.EngineStartedAt, a.EndedAt = 14, a.StartedAt.Add(1500*time.Millisecond), a.StartedAt.Add(time.Minute)
		b.createAttempt(t, a)
		got, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("GetAttempt(%q, %d): %v", a.TID, a.N, err)
		}
		checkAttempt(t, got, a)
	})

	// docs/contracts.md § Per-node overrides: what an attempt was launched
	// with is recorded with it; an attempt that recorded none reads back
	// the zero value.
	t.Run("Resolved_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		full := b.attempt(st.TID, 2)
		full.Resolved = stratus.Resolved{
			Provider: "codex", Model: "gpt-6-codex", Reasoning: "xhigh", PermissionProfile: "read-only",
			NetworkAccess: true, TimeoutSeconds: 2700, ExtraArgs: []string{"--add-dir", "docs", "-c", "a=\"b c\""},
			Configured: stratus.ModelChoice{Model: "gpt-6", Reasoning: "medium"},
		}
		none := b.attempt(st.TID, 3)
		none.Resolved = stratus.Resolved{}
		partial := b.attempt(st.TID, 4)
		partial.Resolved = stratus.Resolved{Provider: "echo", PermissionProfile: "workspace-write", TimeoutSeconds: 600}
		for _, a := range []stratus.Attempt{full, none, partial} {
			b.createAttempt(t, a)
			got, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
			if err != nil {
				t.Fatalf("GetAttempt(%q, %d): %v", a.TID, a.N, err)
			}
			checkAttempt(t, got, a)
		}
		latest, err := b.s.LatestAttempt(b.ctx, st.TID)
		if err != nil {
			t.Fatalf("LatestAttempt(%q): %v", st.TID, err)
		}
		checkAttempt(t, latest, partial)
	})

	// internal/failclass: a failed attempt's class and the reset its
	// failure named are recorded with it, kept by an update, and cleared
	// by one that sets them empty; an attempt that has none reads back
	// "" and the zero time.
	t.Run("ClassAndRetryAt_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		limited := b.attempt(st.TID, 2)
		limited.Status, limited.Terminal, limited.Reason = stratus.AttemptFailed, "Failed", "codex turn failed: You've hit your usage limit."
		limited.Class, limited.RetryAt = "rate_limited", limited.StartedAt.Add(5*time.Hour+17*time.Minute)
		quality := b.attempt(st.TID, 3)
		quality.Status, quality.Class = stratus.AttemptFailed, "quality"
		none := b.attempt(st.TID, 4)
		for _, a := range []stratus.Attempt{limited, quality, none} {
			b.createAttempt(t, a)
			got, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
			if err != nil {
				t.Fatalf("GetAttempt(%q, %d): %v", a.TID, a.N, err)
			}
			checkAttempt(t, got, a)
		}
		// Failed later: the update records the class; one that empties it
		// clears it.
		none.Status, none.Class, none.RetryAt = stratus.AttemptFailed, "network_unavailable", none.StartedAt.Add(time.Minute)
		if err := b.s.UpdateAttempt(b.ctx, none); err != nil {
			t.Fatalf("UpdateAttempt: %v", err)
		}
		got, err := b.s.LatestAttempt(b.ctx, st.TID)
		if err != nil {
			t.Fatalf("LatestAttempt(%q): %v", st.TID, err)
		}
		checkAttempt(t, got, none)
		limited.Class, limited.RetryAt = "", time.Time{}
		if err := b.s.UpdateAttempt(b.ctx, limited); err != nil {
			t.Fatalf("UpdateAttempt: %v", err)
		}
		if got, err = b.s.GetAttempt(b.ctx, limited.TID, limited.N); err != nil {
			t.Fatalf("GetAttempt: %v", err)
		}
		checkAttempt(t, got, limited)
	})

	t.Run("CostUSD_NilAndZeroDistinct", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		costs := []*float64{nil, ptr(0.0), ptr(0.0421), ptr(1234.5)}
		for i, c := range costs {
			a := b.attempt(st.TID, i+2)
			a.CostUSD = c
			b.createAttempt(t, a)
		}
		for i, c := range costs {
			got, err := b.s.GetAttempt(b.ctx, st.TID, i+2)
			if err != nil {
				t.Fatalf("GetAttempt(%q, %d): %v", st.TID, i+2, err)
			}
			if g, w := costString(got.CostUSD), costString(c); g != w {
				t.Errorf("attempt %d CostUSD = %s, want %s", i+2, g, w)
			}
		}
	})

	t.Run("CreateAttempt_Duplicate_Conflict", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		dup := a
		dup.Agent, dup.Status = "other", stratus.AttemptSubmitted
		wantCode(t, "CreateAttempt of an existing (tid, n)", b.s.CreateAttempt(b.ctx, dup), stratus.ECONFLICT)
		got, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("GetAttempt(%q, %d): %v", a.TID, a.N, err)
		}
		checkAttempt(t, got, a)

		// The key is the pair: another N of the tid, or the same N of
		// another tid, is a different attempt.
		b.createAttempt(t, b.attempt(a.TID, a.N+1))
		b.createAttempt(t, b.attempt(b.key("tid"), a.N))
	})

	t.Run("CreateAttempt_ConcurrentSameKey_OneWins", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		errs := make([]error, 8)
		concurrently(len(errs), func(i int) {
			a := b.attempt(st.TID, 2)
			a.Steps = i
			errs[i] = b.s.CreateAttempt(b.ctx, a)
		})
		oneWins(t, "CreateAttempt", errs)
	})

	t.Run("GetAttempt_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		_, err := b.s.GetAttempt(b.ctx, a.TID, 2)
		wantCode(t, "GetAttempt of a missing n", err, stratus.ENOTFOUND)
		_, err = b.s.GetAttempt(b.ctx, b.key("tid"), 1)
		wantCode(t, "GetAttempt of a missing tid", err, stratus.ENOTFOUND)
	})

	t.Run("LatestAttempt_HighestN", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		// Created out of order, and 10 > 9 > 2 (not as strings).
		for _, n := range []int{10, 2, 9} {
			a := b.attempt(st.TID, n)
			a.StartedAt = base.Add(-time.Duration(n) * time.Minute) // later N, earlier time
			b.createAttempt(t, a)
		}
		b.createAttempt(t, b.attempt(b.key("tid"), 11)) // another tid
		got, err := b.s.LatestAttempt(b.ctx, st.TID)
		if err != nil {
			t.Fatalf("LatestAttempt(%q): %v", st.TID, err)
		}
		if got.N != 10 {
			t.Fatalf("LatestAttempt(%q).N = %d, want 10", st.TID, got.N)
		}
		want := b.attempt(st.TID, 10)
		want.StartedAt = base.Add(-10 * time.Minute)
		checkAttempt(t, got, want)
	})

	t.Run("LatestAttempt_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, err := b.s.LatestAttempt(b.ctx, b.key("tid"))
		wantCode(t, "LatestAttempt of a tid without attempts", err, stratus.ENOTFOUND)
	})

	t.Run("UpdateAttempt_ReplacesAllButKey", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a1 := b.parents(t, 1)
		a2 := b.createAttempt(t, b.attempt(st.TID, 2))

		u := stratus.Attempt{
			TID:              a2.TID,
			N:                a2.N,
			Agent:            "review_fix",
			Status:           stratus.AttemptSubmitted,
			Terminal:         "captured",
			Reason:           "report received",
			System:           "changed system",
			Prompt:           "changed prompt",
			Steps:            31,
			PromptTokens:     123456,
			CompletionTokens: 1<<40 + 1,
			CostUSD:          ptr(0.0),
			StartedAt:        base.Add(time.Hour),
			EngineStartedAt:  base.Add(time.Hour + time.Second),
			EndedAt:          base.Add(2 * time.Hour),
			Resolved: stratus.Resolved{Provider: "claude", Model: "claude-opus-5", PermissionProfile: "read-only",
				TimeoutSeconds: 900, Configured: stratus.ModelChoice{Model: "claude-sonnet-5"}},
		}
		if err := b.s.UpdateAttempt(b.ctx, u); err != nil {
			t.Fatalf("UpdateAttempt(%q, %d): %v", u.TID, u.N, err)
		}
		got, err := b.s.GetAttempt(b.ctx, u.TID, u.N)
		if err != nil {
			t.Fatalf("GetAttempt(%q, %d): %v", u.TID, u.N, err)
		}
		checkAttempt(t, got, u)

		// Replaced, not merged: nil cost, zero times and a zero resolution
		// clear the fields.
		u.CostUSD, u.EngineStartedAt, u.EndedAt, u.Reason, u.Resolved = nil, time.Time{}, time.Time{}, "", stratus.Resolved{}
		if err := b.s.UpdateAttempt(b.ctx, u); err != nil {
			t.Fatalf("UpdateAttempt(%q, %d) again: %v", u.TID, u.N, err)
		}
		if got, err = b.s.GetAttempt(b.ctx, u.TID, u.N); err != nil {
			t.Fatalf("GetAttempt(%q, %d): %v", u.TID, u.N, err)
		}
		checkAttempt(t, got, u)

		// The other attempt of the tid is untouched.
		if got, err = b.s.GetAttempt(b.ctx, a1.TID, a1.N); err != nil {
			t.Fatalf("GetAttempt(%q, %d): %v", a1.TID, a1.N, err)
		}
		checkAttempt(t, got, a1)
	})

	t.Run("UpdateAttempt_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		missing := b.attempt(a.TID, 2)
		wantCode(t, "UpdateAttempt of a missing n", b.s.UpdateAttempt(b.ctx, missing), stratus.ENOTFOUND)
		_, err := b.s.GetAttempt(b.ctx, missing.TID, missing.N)
		wantCode(t, "GetAttempt after UpdateAttempt of a missing n", err, stratus.ENOTFOUND)
	})

	// Prompts are as large as the role file and the baked system prompt
	// make them; no store truncates them (the DynamoDB store keeps large
	// ones outside the item).
	t.Run("LargePrompts_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		a := b.attempt(st.TID, 2)
		a.System, a.Prompt = strings.Repeat("system ✓\n", 64<<10), strings.Repeat("prompt\n", 150<<10)
		b.createAttempt(t, a)
		for _, u := range []struct{ system, prompt string }{{"small", ""}, {a.Prompt, a.System}} {
			got, err := b.s.GetAttempt(b.ctx, a.TID, a.N)
			if err != nil {
				t.Fatalf("GetAttempt(%q, %d): %v", a.TID, a.N, err)
			}
			if got.System != a.System || got.Prompt != a.Prompt {
				t.Fatalf("GetAttempt: System %d bytes, Prompt %d bytes; want %d and %d", len(got.System), len(got.Prompt), len(a.System), len(a.Prompt))
			}
			a.System, a.Prompt = u.system, u.prompt
			if err := b.s.UpdateAttempt(b.ctx, a); err != nil {
				t.Fatalf("UpdateAttempt(%q, %d): %v", a.TID, a.N, err)
			}
		}
		latest, err := b.s.LatestAttempt(b.ctx, a.TID)
		if err != nil || latest.System != a.System || latest.Prompt != a.Prompt {
			t.Errorf("LatestAttempt: System %d bytes, Prompt %d bytes, %v; want %d and %d", len(latest.System), len(latest.Prompt), err, len(a.System), len(a.Prompt))
		}
	})
}
