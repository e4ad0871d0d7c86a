package storetest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
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

	// A run's workspace round-trips; its head moves only from the head it is
	// at (one of two racing advances wins, the other is ECONFLICT); UpdateRun
	// leaves it alone; a run without one is ENOTFOUND.
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

	// A publication round-trips through SetPublication and CreateRun, a
	// second one replaces the first, UpdateRun leaves it alone, and a
	// missing run is ENOTFOUND.
	t.Run("SetPublication_ReplacesAndSurvivesUpdateRun", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.run()
		r.Workspace = &stratus.Workspace{Root: "/w", Base: strings.Repeat("b", 40), Head: strings.Repeat("b", 40), Bundles: []string{"x"},
			Remote: &stratus.GitRemote{Name: "origin", URL: "https://github.com/o/n.git"}}
		if err := b.s.CreateRun(b.ctx, r); err != nil {
			t.Fatal(err)
		}
		p := stratus.Publication{Remote: "origin", URL: "https://github.com/o/n.git", Branch: "stratus/t1", Head: strings.Repeat("1", 40),
			PullRequest: &stratus.PullRequest{Number: 7, URL: "https://github.com/o/n/pull/7", State: "open"}}
		if err := b.s.SetPublication(b.ctx, r.ID, p); err != nil {
			t.Fatalf("SetPublication: %v", err)
		}
		p.Head, p.PullRequest.State, p.PullRequest.MergeSHA = strings.Repeat("2", 40), "merged", strings.Repeat("3", 40)
		if err := b.s.SetPublication(b.ctx, r.ID, p); err != nil {
			t.Fatalf("SetPublication again: %v", err)
		}
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		u := got
		u.Status, u.Publication = stratus.RunDone, nil
		if err := b.s.UpdateRun(b.ctx, u); err != nil {
			t.Fatal(err)
		}
		if got, err = b.s.GetRun(b.ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		want := r
		want.Status, want.Publication = stratus.RunDone, &p
		checkRun(t, got, want)
		created := b.run()
		created.Publication = &p
		if err := b.s.CreateRun(b.ctx, created); err != nil {
			t.Fatal(err)
		}
		if got, err = b.s.GetRun(b.ctx, created.ID); err != nil {
			t.Fatal(err)
		}
		checkRun(t, got, created)
		wantCode(t, "SetPublication of a missing run", b.s.SetPublication(b.ctx, b.key("none"), p), stratus.ENOTFOUND)
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

	// README § Naming a run: a run is found by a prefix of its id and by
	// its task (the newest first), each alone or both at once; a query
	// nothing matches is no runs, not an error.
	t.Run("FindRuns_ByIDPrefixAndTask", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		future := time.Date(2998, 1, 1, 0, 0, 0, 0, time.UTC)
		taskA, taskB := "task-a-"+b.prefix, "task-b-"+b.prefix
		var ids []string
		for i, task := range []string{taskA, taskB, taskA} {
			r := b.run()
			r.TaskID, r.CreatedAt = task, future.Add(time.Duration(i)*time.Hour)
			if err := b.s.CreateRun(b.ctx, r); err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			ids = append(ids, r.ID)
		}
		for _, c := range []struct {
			name string
			q    store.RunQuery
			want []string
		}{
			{"every run of the prefix", store.RunQuery{IDPrefix: "run-" + b.prefix + "-"}, []string{ids[2], ids[1], ids[0]}},
			{"a whole id", store.RunQuery{IDPrefix: ids[1]}, []string{ids[1]}},
			{"a task", store.RunQuery{TaskID: taskA}, []string{ids[2], ids[0]}},
			{"a task's newest", store.RunQuery{TaskID: taskA, Limit: 1}, []string{ids[2]}},
			{"a prefix and a task", store.RunQuery{IDPrefix: "run-" + b.prefix + "-", TaskID: taskB}, []string{ids[1]}},
			{"a limit", store.RunQuery{IDPrefix: "run-" + b.prefix + "-", Limit: 2}, []string{ids[2], ids[1]}},
			{"no such prefix", store.RunQuery{IDPrefix: "none-" + b.prefix}, nil},
			{"no such task", store.RunQuery{TaskID: "none-" + b.prefix}, nil},
		} {
			got, err := b.s.FindRuns(b.ctx, c.q)
			if err != nil {
				t.Fatalf("%s: FindRuns(%+v): %v", c.name, c.q, err)
			}
			var gotIDs []string
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
			}
			if !slices.Equal(gotIDs, c.want) {
				t.Errorf("%s: FindRuns(%+v) = %q, want %q", c.name, c.q, gotIDs, c.want)
			}
		}
		got, err := b.s.FindRuns(b.ctx, store.RunQuery{IDPrefix: ids[0]})
		if err != nil || len(got) != 1 {
			t.Fatalf("FindRuns(id) = %v, %v", got, err)
		}
		want := b.run()
		want.ID, want.TaskID, want.CreatedAt = ids[0], taskA, future
		checkRun(t, got[0], want)
	})

	// docs/security.md § Retention: pruning an ended run removes its
	// steps, attempts, output tails (large bodies too) and degradations,
	// and keeps the run record, marked when it was pruned (the first mark
	// stays), so the run is still listed and says so. Another run's
	// records, one holding the same large body among them, are untouched.
	t.Run("PruneRun_RemovesStepsKeepsTheRunMarked", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		large := bytes.Repeat([]byte("the same large body, in both runs\n"), 4096) // over both stores' spill threshold
		fill := func(r stratus.Run) (stratus.Step, stratus.Attempt) {
			if err := b.s.CreateRun(b.ctx, r); err != nil {
				t.Fatalf("CreateRun: %v", err)
			}
			var st stratus.Step
			var a stratus.Attempt
			for visit := 1; visit <= 2; visit++ {
				st = b.createStep(t, b.step(r.ID, "impl", visit))
				a = b.createAttempt(t, b.attempt(st.TID, 1))
				for _, body := range [][]byte{[]byte("small"), large} {
					if _, err := b.s.AppendOutput(b.ctx, stratus.OutputEvent{TID: st.TID, Attempt: 1, Kind: stratus.OutputArtifact, Name: "p.md", Body: body, OK: true, At: base}); err != nil {
						t.Fatalf("AppendOutput: %v", err)
					}
				}
			}
			if err := b.s.AppendDegradation(b.ctx, stratus.Degradation{RunID: r.ID, StepRef: "impl#1", Attempt: 1, Tool: "t", Error: "e", Fallback: "f", At: base}); err != nil {
				t.Fatal(err)
			}
			return st, a
		}
		r := b.run()
		r.Status, r.EndedAt = stratus.RunDone, base.Add(time.Hour)
		st, a := fill(r)
		other := b.run()
		other.Status = stratus.RunFailed
		ost, _ := fill(other)

		at := base.Add(31 * 24 * time.Hour)
		if err := b.s.PruneRun(b.ctx, r.ID, at); err != nil {
			t.Fatalf("PruneRun: %v", err)
		}
		got, err := b.s.GetRun(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("GetRun of a pruned run: %v", err)
		}
		want := r
		want.PrunedAt = at
		checkRun(t, got, want)
		if steps, err := b.s.ListSteps(b.ctx, r.ID); err != nil || len(steps) != 0 {
			t.Errorf("ListSteps of a pruned run = %d steps, %v; want none", len(steps), err)
		}
		_, err = b.s.GetStep(b.ctx, st.TID)
		wantCode(t, "GetStep of a pruned run's step", err, stratus.ENOTFOUND)
		_, err = b.s.GetAttempt(b.ctx, a.TID, a.N)
		wantCode(t, "GetAttempt of a pruned run's attempt", err, stratus.ENOTFOUND)
		if tail, err := b.s.ListOutput(b.ctx, st.TID, 1); err != nil || len(tail) != 0 {
			t.Errorf("ListOutput of a pruned run's attempt = %d events, %v; want none", len(tail), err)
		}
		if ds, err := b.s.ListDegradations(b.ctx, r.ID); err != nil || len(ds) != 0 {
			t.Errorf("ListDegradations of a pruned run = %d, %v; want none", len(ds), err)
		}
		if n, err := b.s.CountVisits(b.ctx, r.ID, "impl"); err != nil || n != 0 {
			t.Errorf("CountVisits of a pruned run = %d, %v; want 0 (its steps are gone)", n, err)
		}
		if n, err := b.s.CountVisits(b.ctx, other.ID, "impl"); err != nil || n != 2 {
			t.Errorf("CountVisits of the other run = %d, %v; want 2", n, err)
		}
		runs, err := b.s.ListRuns(b.ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(runs, func(x stratus.Run) bool { return x.ID == r.ID && !x.PrunedAt.IsZero() }) {
			t.Errorf("ListRuns does not list the pruned run, marked")
		}

		// The other run keeps everything, its large body included.
		if steps, err := b.s.ListSteps(b.ctx, other.ID); err != nil || len(steps) != 2 {
			t.Errorf("ListSteps of the other run = %d, %v; want 2", len(steps), err)
		}
		tail, err := b.s.ListOutput(b.ctx, ost.TID, 1)
		if err != nil || len(tail) != 2 || !bytes.Equal(tail[1].Body, large) {
			t.Errorf("the other run's tail: %d events, %v; want 2, the large body whole", len(tail), err)
		}
		if got, _ := b.s.GetRun(b.ctx, other.ID); !got.PrunedAt.IsZero() {
			t.Errorf("the other run is marked pruned at %v", got.PrunedAt)
		}

		// Again: nothing left to remove, the first mark kept.
		if err := b.s.PruneRun(b.ctx, r.ID, at.Add(time.Hour)); err != nil {
			t.Fatalf("PruneRun again: %v", err)
		}
		if got, _ := b.s.GetRun(b.ctx, r.ID); got.PrunedAt.Sub(at).Abs() >= time.Millisecond {
			t.Errorf("PrunedAt after a second PruneRun = %v, want the first %v", got.PrunedAt, at.UTC())
		}
		// UpdateRun (a status written later) leaves the mark alone.
		got.Status = stratus.RunFailed
		if err := b.s.UpdateRun(b.ctx, got); err != nil {
			t.Fatal(err)
		}
		if got, _ := b.s.GetRun(b.ctx, r.ID); got.PrunedAt.IsZero() {
			t.Errorf("UpdateRun cleared PrunedAt")
		}
	})

	// docs/security.md § Retention: a run that has not ended (running, or
	// resumed since it was read) is never pruned: ECONFLICT, and nothing
	// is removed; a missing run is ENOTFOUND.
	t.Run("PruneRun_NotEndedConflictRemovesNothing", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, _ := b.parents(t, 1)
		wantCode(t, "PruneRun of a running run", b.s.PruneRun(b.ctx, st.RunID, base), stratus.ECONFLICT)
		if steps, err := b.s.ListSteps(b.ctx, st.RunID); err != nil || len(steps) != 1 {
			t.Errorf("ListSteps after a refused PruneRun = %d, %v; want its step", len(steps), err)
		}
		if got, _ := b.s.GetRun(b.ctx, st.RunID); !got.PrunedAt.IsZero() {
			t.Errorf("a refused PruneRun marked the run pruned at %v", got.PrunedAt)
		}
		wantCode(t, "PruneRun of a missing run", b.s.PruneRun(b.ctx, b.key("run"), base), stratus.ENOTFOUND)
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
