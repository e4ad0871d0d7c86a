package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

func (su *suite) testSteps(t *testing.T) {
	t.Parallel()

	t.Run("CreateStep_GetStep_RoundTrip", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		st := b.step(r.ID, "review", 2)
		st.Kind, st.Verdict, st.Value = "evaluator", "approve", json.RawMessage(`{"status":"ok","verdict":"approve","n":2}`)
		got, created, err := b.s.CreateStep(b.ctx, st)
		if err != nil || !created {
			t.Fatalf("CreateStep(%q) = created %v, err %v; want created", st.TID, created, err)
		}
		checkStep(t, got, st)
		if got, err = b.s.GetStep(b.ctx, st.TID); err != nil {
			t.Fatalf("GetStep(%q): %v", st.TID, err)
		}
		checkStep(t, got, st)
	})

	// A compare-and-set on the step's status: of writers that all read it
	// waiting, exactly one moves it on, and the step holds that one's
	// value; the others get ECONFLICT naming the status it now has.
	t.Run("UpdateStepFrom_OneOfConcurrentWritersWins", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		st := b.step(r.ID, "gate", 1)
		st.Kind, st.Status = "hitl", "waiting"
		b.createStep(t, st)
		const n = 8
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u := st
				u.Status, u.Verdict, u.Value, u.EndedAt = stratus.StepCompleted, fmt.Sprintf("reply-%d", i), json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)), time.Now().UTC()
				errs[i] = b.s.UpdateStepFrom(b.ctx, u, "waiting")
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("writers %d and %d both moved step %s on from waiting", won, i, st.TID)
			case err == nil:
				won = i
			case stratus.ErrorCode(err) != stratus.ECONFLICT:
				t.Errorf("writer %d: %v; want ECONFLICT", i, err)
			}
		}
		if won < 0 {
			t.Fatalf("no writer moved step %s on: %v", st.TID, errs)
		}
		got, err := b.s.GetStep(b.ctx, st.TID)
		if err != nil || got.Status != stratus.StepCompleted || got.Verdict != fmt.Sprintf("reply-%d", won) {
			t.Errorf("step after the race: %+v, %v; want completed with writer %d's reply", got, err, won)
		}
		missing := st
		missing.TID = st.TID + "-none"
		if err := b.s.UpdateStepFrom(b.ctx, missing, "waiting"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("UpdateStepFrom(unknown tid) = %v; want ENOTFOUND", err)
		}
	})

	t.Run("LatestSteps_PerNodeInCreationOrder", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		var made []stratus.Step
		for _, s := range []struct {
			node, kind, status, verdict string
		}{
			{"plan", "agent", stratus.StepCompleted, "done"},          // 0: plan's latest
			{"review", "evaluator", stratus.StepCompleted, "rework"},  // 1
			{"fix", "agent", stratus.StepCompleted, "done"},           // 2: fix's latest
			{"review", "evaluator", stratus.StepCompleted, "accept"},  // 3: review's latest selected
			{"review", "evaluator", stratus.StepCompleted, "skipped"}, // 4: skipped: not selected
			{"sup", "supervisor", stratus.StepCompleted, "done"},      // 5: a kind left out
			{"ship", "publish", stratus.StepRunning, ""},              // 6: not completed
			{"ask", "hitl", stratus.StepCompleted, "done"},            // 7: the step excepted
			{"mix", "agent", stratus.StepCompleted, "done"},           // 8
			{"mix", "tool", stratus.StepCompleted, "done"},            // 9: mix's latest, across its kinds
			{"mix", "supervisor", stratus.StepCompleted, "done"},      // 10: a kind left out
			{"plan", "agent", stratus.StepRunning, ""},                // 11: newer, not completed
		} {
			st := b.step(r.ID, s.node, len(made)+1)
			st.Kind, st.Status, st.Verdict = s.kind, s.status, s.verdict
			made = append(made, b.createStep(t, st))
		}
		b.createStep(t, b.step(other.ID, "plan", 9)) // another run's
		got, err := b.s.LatestSteps(b.ctx, r.ID, store.LatestQuery{Status: stratus.StepCompleted, ExceptTID: made[7].TID,
			SkipVerdicts: []string{"skipped"}, SkipKinds: []string{"supervisor"}})
		if err != nil {
			t.Fatalf("LatestSteps: %v", err)
		}
		var refs []string
		for _, st := range got {
			refs = append(refs, st.StepRef)
		}
		if want := []string{"plan#1", "fix#3", "review#4", "mix#10"}; fmt.Sprint(refs) != fmt.Sprint(want) {
			t.Errorf("LatestSteps = %v; want %v (per node its latest selected step, in creation order)", refs, want)
		}
		if len(got) == 4 {
			checkStep(t, got[2], made[3])
		}
		if got, err := b.s.LatestSteps(b.ctx, "no-such-run", store.LatestQuery{Status: stratus.StepCompleted}); err != nil || len(got) != 0 {
			t.Errorf("LatestSteps of an unknown run = %v, %v; want none", got, err)
		}
	})

	t.Run("LatestSteps_WalksBackPastStepsNotSelected", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		// "loop" completed once, then 12 visits rework-skipped or running:
		// its latest selected step is far back. "gate" was created running
		// and completed later; "late" completed, then failed on a later
		// visit; "early" has a visit created after a higher one.
		var made []stratus.Step
		add := func(node string, visit int, status, verdict string) stratus.Step {
			st := b.step(r.ID, node, visit)
			st.Status, st.Verdict = status, verdict
			made = append(made, b.createStep(t, st))
			return made[len(made)-1]
		}
		add("loop", 1, stratus.StepCompleted, "accept")
		gate := add("gate", 1, stratus.StepRunning, "")
		add("late", 1, stratus.StepCompleted, "done")
		add("early", 2, stratus.StepCompleted, "done")
		add("early", 1, stratus.StepCompleted, "done") // created last: early's latest
		for v := 2; v <= 13; v++ {
			status, verdict := stratus.StepCompleted, "skipped"
			if v%3 == 0 {
				status, verdict = stratus.StepRunning, ""
			}
			add("loop", v, status, verdict)
		}
		add("late", 2, stratus.StepFailed, "")
		gate.Status, gate.Verdict = stratus.StepCompleted, "approved"
		if err := b.s.UpdateStep(b.ctx, gate); err != nil {
			t.Fatal(err)
		}
		q := store.LatestQuery{Status: stratus.StepCompleted, SkipVerdicts: []string{"skipped"}}
		got, err := b.s.LatestSteps(b.ctx, r.ID, q)
		if err != nil {
			t.Fatalf("LatestSteps: %v", err)
		}
		refs := func(steps []stratus.Step) []string {
			var out []string
			for _, st := range steps {
				out = append(out, st.StepRef+"/"+st.TID)
			}
			return out
		}
		if want := refs([]stratus.Step{made[0], gate, made[2], made[4]}); fmt.Sprint(refs(got)) != fmt.Sprint(want) {
			t.Errorf("LatestSteps = %v; want %v (per node its latest selected step, in creation order)", refs(got), want)
		}
		if len(got) == 4 {
			checkStep(t, got[1], gate)
		}
		all, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []store.LatestQuery{q, {Status: stratus.StepRunning}, {Status: stratus.StepFailed}, {Status: stratus.StepCompleted, ExceptTID: made[4].TID}} {
			got, err := b.s.LatestSteps(b.ctx, r.ID, q)
			if want := store.Latest(all, q); err != nil || fmt.Sprint(refs(got)) != fmt.Sprint(refs(want)) {
				t.Errorf("LatestSteps(%+v) = %v, %v; want %v (store.Latest over ListSteps)", q, refs(got), err, refs(want))
			}
		}
	})

	t.Run("CreateStep_SameDedupKey_ReturnsExistingNotCreated", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		first := b.createStep(t, b.step(r.ID, "review", 1))

		// A redelivered dispatch message: same DedupKey, a fresh TID.
		again := b.step(r.ID, "review", 2)
		again.DedupKey = first.DedupKey
		got, created, err := b.s.CreateStep(b.ctx, again)
		if err != nil || created {
			t.Fatalf("CreateStep with an existing DedupKey = created %v, err %v; want not created, no error", created, err)
		}
		checkStep(t, got, first)

		_, err = b.s.GetStep(b.ctx, again.TID)
		wantCode(t, "GetStep of the deduplicated TID", err, stratus.ENOTFOUND)
		steps, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("ListSteps(%q): %v", r.ID, err)
		}
		if len(steps) != 1 {
			t.Fatalf("ListSteps(%q) has %d steps, want 1 (no second row)", r.ID, len(steps))
		}
		checkStep(t, steps[0], first)
		if n, err := b.s.CountVisits(b.ctx, r.ID, "review"); err != nil || n != 1 {
			t.Errorf("CountVisits(%q, review) = %d, %v; want 1", r.ID, n, err)
		}
	})

	t.Run("CreateStep_SameStepRedelivered_ReturnsExistingNotCreated", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		first := b.createStep(t, b.step(r.ID, "impl", 1))
		got, created, err := b.s.CreateStep(b.ctx, first) // same TID and DedupKey
		if err != nil || created {
			t.Fatalf("CreateStep of the same step again = created %v, err %v; want not created, no error", created, err)
		}
		checkStep(t, got, first)
	})

	t.Run("CreateStep_ConcurrentSameDedupKey_OneCreated", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		dedup := b.key("dedup")
		sent := make([]stratus.Step, 8)
		got := make([]stratus.Step, len(sent))
		created := make([]bool, len(sent))
		errs := make([]error, len(sent))
		for i := range sent {
			sent[i] = b.step(r.ID, "impl", 1)
			sent[i].DedupKey = dedup
		}
		concurrently(len(sent), func(i int) {
			got[i], created[i], errs[i] = b.s.CreateStep(b.ctx, sent[i])
		})
		winner := -1
		for i := range sent {
			if errs[i] != nil {
				t.Errorf("CreateStep %d: %v", i, errs[i])
			} else if created[i] {
				if winner >= 0 {
					t.Errorf("CreateStep %d and %d both created a step for one DedupKey", winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("no CreateStep reported created=true")
		}
		for i := range sent {
			if errs[i] == nil {
				checkStep(t, got[i], sent[winner])
			}
		}
		steps, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil || len(steps) != 1 {
			t.Errorf("ListSteps(%q) = %d steps, %v; want 1", r.ID, len(steps), err)
		}
	})

	t.Run("GetStep_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, err := b.s.GetStep(b.ctx, b.key("tid"))
		wantCode(t, "GetStep of a missing tid", err, stratus.ENOTFOUND)
	})

	t.Run("ListSteps_CreationOrder", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		var want []stratus.Step
		visits := map[string]int{}
		for i, node := range []string{"plan", "impl", "review", "impl", "review", "publish"} {
			visits[node]++
			st := b.step(r.ID, node, visits[node])
			// TIDs sort against creation order and the times tie, so
			// only the order of creation can explain the result.
			st.TID = fmt.Sprintf("%d-%s", 9-i, st.TID)
			st.CreatedAt = base
			want = append(want, b.createStep(t, st))
			b.createStep(t, b.step(other.ID, node, visits[node])) // interleaved, another run
		}
		got, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatalf("ListSteps(%q): %v", r.ID, err)
		}
		if len(got) != len(want) {
			t.Fatalf("ListSteps(%q) has %d steps, want %d", r.ID, len(got), len(want))
		}
		for i := range want {
			if got[i].TID != want[i].TID {
				t.Fatalf("ListSteps(%q)[%d] = %s, want %s (creation order)", r.ID, i, got[i].TID, want[i].TID)
			}
			checkStep(t, got[i], want[i])
		}
	})

	t.Run("ListSteps_RunWithoutSteps_Empty", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		got, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil || len(got) != 0 {
			t.Errorf("ListSteps(%q) = %d steps, %v; want none", r.ID, len(got), err)
		}
	})

	t.Run("NodeSteps_NewestCreatedFirst", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		// "fix" gets visits 1, 3, 2 (2 created last: its newest), between
		// steps of other nodes; another run has a "fix" too.
		var fix []stratus.Step
		for _, s := range []struct {
			node  string
			visit int
		}{{"fix", 1}, {"plan", 1}, {"fix", 3}, {"review", 1}, {"fix", 2}, {"review", 2}} {
			st := b.createStep(t, b.step(r.ID, s.node, s.visit))
			if s.node == "fix" {
				fix = append(fix, st)
			}
		}
		b.createStep(t, b.step(other.ID, "fix", 4))
		fix[0].Status, fix[0].Verdict = stratus.StepCompleted, "done"
		if err := b.s.UpdateStep(b.ctx, fix[0]); err != nil {
			t.Fatal(err)
		}
		newest := []stratus.Step{fix[2], fix[1], fix[0]}
		refs := func(steps []stratus.Step) string {
			var out []string
			for _, st := range steps {
				out = append(out, st.StepRef+"/"+st.TID)
			}
			return fmt.Sprint(out)
		}
		for _, limit := range []int{0, 1, 2, 3, 4} {
			got, err := b.s.NodeSteps(b.ctx, r.ID, "fix", limit)
			want := newest[:min(len(newest), limit)]
			if limit == 0 {
				want = newest
			}
			if err != nil || refs(got) != refs(want) {
				t.Errorf("NodeSteps(fix, limit %d) = %v, %v; want %v (newest created first)", limit, refs(got), err, refs(want))
			}
			if err == nil && len(got) == 3 {
				checkStep(t, got[2], fix[0])
			}
		}
		for _, q := range []struct{ run, node string }{{r.ID, "ship"}, {"no-such-run", "fix"}} {
			if got, err := b.s.NodeSteps(b.ctx, q.run, q.node, 0); err != nil || len(got) != 0 {
				t.Errorf("NodeSteps(%s, %s) = %v, %v; want none", q.run, q.node, refs(got), err)
			}
		}
		if _, err := b.s.NodeSteps(b.ctx, r.ID, "fix", -1); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "limit") {
			t.Errorf("NodeSteps(limit -1) = %v; want EINVALID naming the limit", err)
		}
	})

	t.Run("NodeSteps_MatchesListSteps", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		nodes := []string{"a", "b", "c"}
		for i := range 15 {
			b.createStep(t, b.step(r.ID, nodes[(i*i)%3], i+1))
		}
		all, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range nodes {
			var want []string
			for i := len(all) - 1; i >= 0; i-- {
				if all[i].Node == node {
					want = append(want, all[i].TID)
				}
			}
			got, err := b.s.NodeSteps(b.ctx, r.ID, node, 0)
			var tids []string
			for _, st := range got {
				tids = append(tids, st.TID)
			}
			if err != nil || fmt.Sprint(tids) != fmt.Sprint(want) {
				t.Errorf("NodeSteps(%s) = %v, %v; want %v (ListSteps' steps of the node, reversed)", node, tids, err, want)
			}
		}
	})

	t.Run("NodesSteps_MatchesListSteps", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		nodes := []string{"a", "b", "c", "d"}
		visits := map[string]int{}
		for i := range 17 {
			n := nodes[(i*i+i/3)%4]
			visits[n]++
			b.createStep(t, b.step(r.ID, n, visits[n]))
		}
		b.createStep(t, b.step(other.ID, "a", 9))
		all, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range [][]string{{"a"}, {"a", "c"}, {"d", "b", "a"}, {"a", "a"}, {"b", "zz"}, {"zz"}, nil} {
			for _, limit := range []int{0, 1, 2, 5, 30} {
				var want []string
				for i := len(all) - 1; i >= 0 && (limit == 0 || len(want) < limit); i-- {
					if slices.Contains(q, all[i].Node) {
						want = append(want, all[i].TID)
					}
				}
				got, err := b.s.NodesSteps(b.ctx, r.ID, q, limit)
				var tids []string
				for _, st := range got {
					tids = append(tids, st.TID)
				}
				if err != nil || fmt.Sprint(tids) != fmt.Sprint(want) {
					t.Errorf("NodesSteps(%v, limit %d) = %v, %v; want %v (ListSteps' steps of the nodes, newest first)", q, limit, tids, err, want)
				}
			}
		}
		if got, err := b.s.NodesSteps(b.ctx, "no-such-run", []string{"a"}, 0); err != nil || len(got) != 0 {
			t.Errorf("NodesSteps(no-such-run) = %d steps, %v; want none", len(got), err)
		}
		if _, err := b.s.NodesSteps(b.ctx, r.ID, []string{"a"}, -1); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "limit") {
			t.Errorf("NodesSteps(limit -1) = %v; want EINVALID naming the limit", err)
		}
	})

	t.Run("RecentSteps_Pages", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		nodes := []string{"plan", "fix", "review"}
		visits := map[string]int{}
		for i := range 7 {
			n := nodes[i%3]
			visits[n]++
			b.createStep(t, b.step(r.ID, n, visits[n]))
		}
		b.createStep(t, b.step(other.ID, "fix", 1))
		all, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		tids := func(steps []stratus.Step) string {
			var out []string
			for _, st := range steps {
				out = append(out, st.TID)
			}
			return fmt.Sprint(out)
		}
		for _, c := range []struct{ upto, limit, lo, hi int }{
			{0, 3, 5, 7}, {0, 7, 1, 7}, {0, 50, 1, 7}, {7, 2, 6, 7}, {4, 3, 2, 4}, {2, 5, 1, 2}, {1, 1, 1, 1}, {99, 2, 6, 7},
		} {
			got, total, err := b.s.RecentSteps(b.ctx, r.ID, c.upto, c.limit)
			if want := all[c.lo-1 : c.hi]; err != nil || total != 7 || tids(got) != tids(want) {
				t.Errorf("RecentSteps(upto %d, limit %d) = %v, total %d, %v; want steps %d..%d %v, total 7", c.upto, c.limit, tids(got), total, err, c.lo, c.hi, tids(want))
			}
			if err == nil && len(got) > 0 {
				checkStep(t, got[len(got)-1], all[c.hi-1])
			}
		}
		if got, total, err := b.s.RecentSteps(b.ctx, "no-such-run", 0, 5); err != nil || total != 0 || len(got) != 0 {
			t.Errorf("RecentSteps(unknown run) = %v, total %d, %v; want none", tids(got), total, err)
		}
		for _, c := range []struct {
			upto, limit int
			field       string
		}{{0, 0, "limit"}, {0, -1, "limit"}, {-1, 5, "upto"}} {
			if _, _, err := b.s.RecentSteps(b.ctx, r.ID, c.upto, c.limit); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), c.field) {
				t.Errorf("RecentSteps(upto %d, limit %d) = %v; want EINVALID naming %s", c.upto, c.limit, err, c.field)
			}
		}
	})

	t.Run("NodeLatest_MatchesListSteps", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		nodes := []string{"a", "b", "c", "d"}
		visits := map[string]int{}
		for i := range 13 {
			n := nodes[(i*i)%4]
			visits[n]++
			b.createStep(t, b.step(r.ID, n, visits[n]))
		}
		b.createStep(t, b.step(other.ID, "e", 1))
		all, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The node's latest changes status: the latest still, as written.
		last := all[len(all)-1]
		last.Status, last.Verdict = stratus.StepWaiting, ""
		if err := b.s.UpdateStep(b.ctx, last); err != nil {
			t.Fatal(err)
		}
		all[len(all)-1] = last
		want := store.Heads(all)
		got, err := b.s.NodeLatest(b.ctx, r.ID)
		if err != nil || len(got) != len(want) {
			t.Fatalf("NodeLatest = %d steps, %v; want %d (each node's last)", len(got), err, len(want))
		}
		for i := range want {
			checkStep(t, got[i], want[i])
		}
		if got, err := b.s.NodeLatest(b.ctx, "no-such-run"); err != nil || len(got) != 0 {
			t.Errorf("NodeLatest(unknown run) = %d steps, %v; want none", len(got), err)
		}
	})

	t.Run("CountVisits_PerRunAndNode", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		other := b.createRun(t)
		for _, s := range []struct {
			run, node string
			visit     int
		}{
			{r.ID, "impl", 1}, {r.ID, "review", 1}, {r.ID, "impl", 2}, {r.ID, "review", 2}, {r.ID, "impl", 3},
			{other.ID, "review", 1},
		} {
			b.createStep(t, b.step(s.run, s.node, s.visit))
		}
		for _, c := range []struct {
			run, node string
			want      int
		}{
			{r.ID, "impl", 3}, {r.ID, "review", 2}, {r.ID, "publish", 0},
			{other.ID, "review", 1}, {other.ID, "impl", 0},
		} {
			if n, err := b.s.CountVisits(b.ctx, c.run, c.node); err != nil || n != c.want {
				t.Errorf("CountVisits(%q, %q) = %d, %v; want %d", c.run, c.node, n, err, c.want)
			}
		}
	})

	t.Run("UpdateStep_PersistsOnlyMutableFields", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		st := b.createStep(t, b.step(r.ID, "review", 1))

		u := stratus.Step{
			TID:       st.TID,
			RunID:     b.key("run"),
			Node:      "changed",
			Kind:      "changed",
			Visit:     9,
			StepRef:   "changed#9",
			DedupKey:  b.key("dedup"),
			TaskToken: "changed",
			Status:    stratus.StepCompleted,
			Verdict:   "rework",
			Value:     json.RawMessage(`{"verdict":"rework","notes":"ünïcode \u2713"}`),
			CreatedAt: base.Add(time.Hour),
			EndedAt:   base.Add(2 * time.Minute),
		}
		if err := b.s.UpdateStep(b.ctx, u); err != nil {
			t.Fatalf("UpdateStep(%q): %v", st.TID, err)
		}
		want := st
		want.Status, want.Verdict, want.Value, want.EndedAt = u.Status, u.Verdict, u.Value, u.EndedAt
		got, err := b.s.GetStep(b.ctx, st.TID)
		if err != nil {
			t.Fatalf("GetStep(%q): %v", st.TID, err)
		}
		checkStep(t, got, want)

		// Replaced, not merged.
		u.Status, u.Verdict, u.Value, u.EndedAt = stratus.StepFailed, "", nil, time.Time{}
		if err := b.s.UpdateStep(b.ctx, u); err != nil {
			t.Fatalf("UpdateStep(%q) again: %v", st.TID, err)
		}
		want.Status, want.Verdict, want.Value, want.EndedAt = u.Status, u.Verdict, u.Value, u.EndedAt
		if got, err = b.s.GetStep(b.ctx, st.TID); err != nil {
			t.Fatalf("GetStep(%q): %v", st.TID, err)
		}
		checkStep(t, got, want)
	})

	// A step whose Task state is entered again (its Retry, or the node
	// after a park) goes on in the same step: running again under the new
	// token; the same entry twice (a redelivered message) changes nothing
	// the second time, and two deliveries at once reenter once.
	t.Run("ReenterStep_OncePerEntry", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		st := b.createStep(t, b.step(r.ID, "impl", 1))
		st.Status, st.EndedAt = stratus.StepFailed, base.Add(time.Minute)
		if err := b.s.UpdateStep(b.ctx, st); err != nil {
			t.Fatal(err)
		}
		got, reentered, err := b.s.ReenterStep(b.ctx, st.TID, "tok-2", "e2:1")
		if err != nil || !reentered {
			t.Fatalf("ReenterStep(e2:1) = %v, %v; want reentered", reentered, err)
		}
		want := st
		want.TaskToken, want.Status, want.EndedAt = "tok-2", stratus.StepRunning, time.Time{}
		checkStep(t, got, want)
		if again, _ := b.s.GetStep(b.ctx, st.TID); again.TaskToken != "tok-2" || again.Status != stratus.StepRunning || !again.EndedAt.IsZero() {
			t.Errorf("GetStep after ReenterStep = %+v", again)
		}
		// The same entry again: a redelivery.
		st2 := got
		st2.Status = stratus.StepFailed
		if err := b.s.UpdateStep(b.ctx, st2); err != nil {
			t.Fatal(err)
		}
		if got, reentered, err = b.s.ReenterStep(b.ctx, st.TID, "tok-2", "e2:1"); err != nil || reentered || got.Status != stratus.StepFailed {
			t.Errorf("ReenterStep of the same entry = %v, %v (status %s); want not reentered, unchanged", reentered, err, got.Status)
		}
		// Concurrent deliveries of one new entry: one reenters.
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, ok, err := b.s.ReenterStep(b.ctx, st.TID, "tok-3", "e3:0")
				if err != nil {
					t.Errorf("ReenterStep: %v", err)
				}
				if ok {
					wins.Add(1)
				}
			}()
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Errorf("%d concurrent deliveries of one entry reentered; want 1", wins.Load())
		}
		_, _, err = b.s.ReenterStep(b.ctx, b.key("missing"), "t", "e")
		wantCode(t, "ReenterStep of a missing tid", err, stratus.ENOTFOUND)
	})

	t.Run("UpdateStep_Missing_NotFound", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st := b.step(b.key("run"), "impl", 1)
		wantCode(t, "UpdateStep of a missing tid", b.s.UpdateStep(b.ctx, st), stratus.ENOTFOUND)
		_, err := b.s.GetStep(b.ctx, st.TID)
		wantCode(t, "GetStep after UpdateStep of a missing tid", err, stratus.ENOTFOUND)
	})

	// Steps of one run created at once (two dispatch messages handled
	// together) are all kept and each listed once.
	t.Run("CreateStep_ConcurrentDistinctSteps_AllListedOnce", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		sent := make([]stratus.Step, 8)
		for i := range sent {
			sent[i] = b.step(r.ID, fmt.Sprintf("n%d", i%3), i/3+1) // visits 1 to n of each node (store.Store.CountVisits)
		}
		errs := make([]error, len(sent))
		concurrently(len(sent), func(i int) {
			var created bool
			if _, created, errs[i] = b.s.CreateStep(b.ctx, sent[i]); errs[i] == nil && !created {
				errs[i] = fmt.Errorf("created = false")
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("CreateStep %d: %v", i, err)
			}
		}
		steps, err := b.s.ListSteps(b.ctx, r.ID)
		if err != nil || len(steps) != len(sent) {
			t.Fatalf("ListSteps(%q) = %d steps, %v; want %d", r.ID, len(steps), err, len(sent))
		}
		seen := map[string]bool{}
		for _, st := range steps {
			if seen[st.TID] {
				t.Errorf("step %s listed twice", st.TID)
			}
			seen[st.TID] = true
		}
		if n, err := b.s.CountVisits(b.ctx, r.ID, "n0"); err != nil || n != 3 {
			t.Errorf("CountVisits(%q, n0) = %d, %v; want 3", r.ID, n, err)
		}
	})
}
