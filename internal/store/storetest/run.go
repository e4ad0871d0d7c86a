package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testRuns(t *testing.T) {
	t.Parallel()

	t.Run("CreateRun_GetRun_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun(%q): %v", r.ID, err)
		}
		checkRun(t, got, r)
	})

	t.Run("CreateRun_DuplicateID_Conflict", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		dup := r
		dup.TaskID, dup.Status = "T-other", stratus.RunFailed
		wantCode(t, "CreateRun of an existing id", b.s.CreateRun(b.ctx, dup), stratus.ECONFLICT)
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun(%q): %v", r.ID, err)
		}
		checkRun(t, got, r) // the first one is untouched
	})

	t.Run("CreateRun_ConcurrentSameID_OneWins", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.run()
		errs := make([]error, 8)
		concurrently(len(errs), func(i int) {
			r := r
			r.TaskTitle = string(rune('a' + i))
			errs[i] = b.s.CreateRun(b.ctx, r)
		})
		oneWins(t, "CreateRun", errs)
	})

	t.Run("GetRun_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, err := b.s.GetRun(b.ctx, b.key("run"))
		wantCode(t, "GetRun of a missing id", err, stratus.ENOTFOUND)
	})

	t.Run("UpdateRun_PersistsOnlyMutableFields", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)

		u := stratus.Run{
			ID:         r.ID,
			TaskID:     "T-changed",
			TaskTitle:  "changed",
			Flow:       "changed",
			Status:     stratus.RunDone,
			WorkDir:    "/changed",
			TaskPath:   "/changed/t.md",
			Execution:  "arn:aws:states:us-east-1:123456789012:execution:implementation:run-1",
			Owner:      "host/4242/1700000000",
			Resumes:    2,
			MaxCostUSD: 12.5,
			MaxTokens:  2_000_000,
			CreatedAt:  base.Add(time.Hour),
			EndedAt:    base.Add(90 * time.Second),
			ResumedAt:  base.Add(60 * time.Second),
			ActiveMS:   42_000,
		}
		if err := b.s.UpdateRun(b.ctx, u); err != nil {
			t.Fatalf("UpdateRun(%q): %v", r.ID, err)
		}
		want := r
		want.Status, want.Execution, want.Owner, want.Resumes, want.EndedAt = u.Status, u.Execution, u.Owner, u.Resumes, u.EndedAt
		want.MaxCostUSD, want.MaxTokens, want.ResumedAt, want.ActiveMS = u.MaxCostUSD, u.MaxTokens, u.ResumedAt, u.ActiveMS
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun(%q): %v", r.ID, err)
		}
		checkRun(t, got, want)

		// The fields are replaced, not merged: the zero EndedAt clears it.
		u.Status, u.Execution, u.Owner, u.Resumes, u.EndedAt = stratus.RunManualActionRequired, "", "", 3, time.Time{}
		u.MaxCostUSD, u.MaxTokens, u.ResumedAt, u.ActiveMS = 0, 0, time.Time{}, 0
		if err := b.s.UpdateRun(b.ctx, u); err != nil {
			t.Fatalf("UpdateRun(%q) again: %v", r.ID, err)
		}
		want.Status, want.Execution, want.Owner, want.Resumes, want.EndedAt = u.Status, u.Execution, u.Owner, u.Resumes, u.EndedAt
		want.MaxCostUSD, want.MaxTokens, want.ResumedAt, want.ActiveMS = u.MaxCostUSD, u.MaxTokens, u.ResumedAt, u.ActiveMS
		if got, err = b.s.GetRun(b.ctx, r.ID); err != nil {
			t.Fatalf("GetRun(%q): %v", r.ID, err)
		}
		checkRun(t, got, want)
	})

	// issue 12 § 2: a run's workspace round-trips; its head moves only
	// from the head it is at (one of two racing advances wins, the other
	// is ECONFLICT); UpdateRun leaves it alone; a run without one is
	// ENOTFOUND.
	t.Run("AdvanceWorkspace_FencedOnTheHead", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.run()
		base := strings.Repeat("b", 40)
		r.Workspace = &stratus.Workspace{Root: "/stratus/workspace/" + r.ID, Base: base, Origin: strings.Repeat("o", 40), Prefix: "sub/",
			Head: base, Bundles: []string{"runs/" + r.ID + "/workspace/base.bundle"}}
		if err := b.s.CreateRun(b.ctx, r); err != nil {
			t.Fatalf("CreateRun: %v", err)
		}
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkRun(t, got, r)

		one, two := strings.Repeat("1", 40), strings.Repeat("2", 40)
		errs := make([]error, 6)
		concurrently(len(errs), func(i int) {
			errs[i] = b.s.AdvanceWorkspace(b.ctx, r.ID, base, one, fmt.Sprintf("runs/%s/workspace/step-%d.bundle", r.ID, i))
		})
		oneWins(t, "AdvanceWorkspace from the same head", errs)
		wantCode(t, "AdvanceWorkspace from a stale head", b.s.AdvanceWorkspace(b.ctx, r.ID, base, two, "x.bundle"), stratus.ECONFLICT)
		if err := b.s.AdvanceWorkspace(b.ctx, r.ID, one, two, "runs/"+r.ID+"/workspace/last.bundle"); err != nil {
			t.Fatalf("AdvanceWorkspace from the head: %v", err)
		}
		u := got
		u.Status = stratus.RunDone
		u.Workspace = nil
		if err := b.s.UpdateRun(b.ctx, u); err != nil {
			t.Fatal(err)
		}
		got, err = b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Workspace == nil || got.Workspace.Head != two || len(got.Workspace.Bundles) != 3 || got.Workspace.Bundles[2] != "runs/"+r.ID+"/workspace/last.bundle" ||
			got.Workspace.Base != base || got.Workspace.Prefix != "sub/" {
			t.Errorf("workspace after two advances and an UpdateRun: %+v", got.Workspace)
		}
		plain := b.createRun(t)
		wantCode(t, "AdvanceWorkspace of a run without a workspace", b.s.AdvanceWorkspace(b.ctx, plain.ID, "", one, "x.bundle"), stratus.ENOTFOUND)
		wantCode(t, "AdvanceWorkspace of a missing run", b.s.AdvanceWorkspace(b.ctx, b.key("none"), "", one, "x.bundle"), stratus.ENOTFOUND)
	})

	t.Run("ListRuns_NewestFirst", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		// Far in the future, so that these are the newest runs even in a
		// backend other tests share.
		future := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
		var ids []string
		for _, h := range []int{1, 3, 2} {
			r := b.run()
			r.CreatedAt = future.Add(time.Duration(h) * time.Hour)
			if err := b.s.CreateRun(b.ctx, r); err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			ids = append(ids, r.ID)
		}
		mine := func(runs []stratus.Run) []string {
			var out []string
			for _, r := range runs {
				if strings.Contains(r.ID, b.prefix) {
					out = append(out, r.ID)
				}
			}
			return out
		}
		all, err := b.s.ListRuns(b.ctx, 0)
		if err != nil {
			t.Fatalf("ListRuns(0): %v", err)
		}
		if got, want := mine(all), []string{ids[1], ids[2], ids[0]}; !slices.Equal(got, want) {
			t.Errorf("ListRuns(0) = %q, want newest first %q", got, want)
		}
		for _, r := range all {
			if r.ID == ids[1] {
				want := b.run()
				want.ID, want.CreatedAt = ids[1], future.Add(3*time.Hour)
				checkRun(t, r, want)
			}
		}
		two, err := b.s.ListRuns(b.ctx, 2)
		if err != nil {
			t.Fatalf("ListRuns(2): %v", err)
		}
		if got, want := mine(two), []string{ids[1], ids[2]}; len(two) != 2 || !slices.Equal(got, want) {
			t.Errorf("ListRuns(2) = %q (%d runs), want %q", got, len(two), want)
		}
	})

	t.Run("UpdateRun_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.run()
		wantCode(t, "UpdateRun of a missing id", b.s.UpdateRun(b.ctx, r), stratus.ENOTFOUND)
		_, err := b.s.GetRun(b.ctx, r.ID)
		wantCode(t, "GetRun after UpdateRun of a missing id", err, stratus.ENOTFOUND) // no upsert
	})
}
