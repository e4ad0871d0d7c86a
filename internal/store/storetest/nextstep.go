package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stratusflow/stratus"
)

// number is a CreateNextStep numbering of node's visits in run runID with
// dedupKey, as the dispatch names them: "<run>.<node>.<visit>",
// "<node>#<visit>". calls counts its calls.
func (b *bundle) number(runID, node, dedupKey string, calls *atomic.Int32) func(int) (stratus.Step, error) {
	return func(visit int) (stratus.Step, error) {
		if calls != nil {
			calls.Add(1)
		}
		st := b.step(runID, node, visit)
		st.TID = fmt.Sprintf("%s.%s.%d", runID, node, visit)
		st.DedupKey = dedupKey
		return st, nil
	}
}

// nextStep is CreateNextStep with b.number; it fails the test on an error.
func (b *bundle) nextStep(t *testing.T, runID, node, dedupKey string) (stratus.Step, bool) {
	t.Helper()
	st, created, err := b.s.CreateNextStep(b.ctx, runID, node, dedupKey, b.number(runID, node, dedupKey, nil))
	if err != nil {
		t.Fatalf("CreateNextStep(%s, %s, %s): %v", runID, node, dedupKey, err)
	}
	return st, created
}

// visitsOf returns the visits of node's steps in run runID, sorted.
func (b *bundle) visitsOf(t *testing.T, runID, node string) []int {
	t.Helper()
	steps, err := b.s.ListSteps(b.ctx, runID)
	if err != nil {
		t.Fatalf("ListSteps(%s): %v", runID, err)
	}
	var vs []int
	for _, st := range steps {
		if st.Node == node {
			vs = append(vs, st.Visit)
		}
	}
	slices.Sort(vs)
	return vs
}

func oneTo(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

// testNextSteps checks CreateNextStep: the store numbers a node's visits
// (store.Store.CreateNextStep), so that dispatchers of one run on other
// goroutines, processes or Lambda instances never take one number twice
// nor leave one out.
func (su *suite) testNextSteps(t *testing.T) {
	t.Parallel()

	t.Run("CreateNextStep_NumbersVisitsFromOne", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		for want := 1; want <= 3; want++ {
			st, created := b.nextStep(t, r.ID, "review", b.key("dedup"))
			if !created || st.Visit != want || st.StepRef != fmt.Sprintf("review#%d", want) {
				t.Fatalf("CreateNextStep %d = visit %d (%s), created %v; want visit %d, created", want, st.Visit, st.StepRef, created, want)
			}
			got, err := b.s.GetStep(b.ctx, st.TID)
			if err != nil {
				t.Fatalf("GetStep(%s): %v", st.TID, err)
			}
			checkStep(t, got, st)
		}
		if n, err := b.s.CountVisits(b.ctx, r.ID, "review"); err != nil || n != 3 {
			t.Errorf("CountVisits = %d, %v; want 3", n, err)
		}
		// Another node, another run: numbered apart.
		if st, _ := b.nextStep(t, r.ID, "impl", b.key("dedup")); st.Visit != 1 {
			t.Errorf("first visit of another node numbered %d; want 1", st.Visit)
		}
		other := b.createRun(t)
		if st, _ := b.nextStep(t, other.ID, "review", b.key("dedup")); st.Visit != 1 {
			t.Errorf("first visit in another run numbered %d; want 1", st.Visit)
		}
	})

	t.Run("CreateNextStep_ContinuesAfterCreateStep", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		b.createStep(t, b.step(r.ID, "impl", 1))
		b.createStep(t, b.step(r.ID, "impl", 2))
		if st, _ := b.nextStep(t, r.ID, "impl", b.key("dedup")); st.Visit != 3 {
			t.Errorf("CreateNextStep after visits 1 and 2 numbered %d; want 3", st.Visit)
		}
	})

	// N dispatchers at once, each its own message (dedup key): visits 1 to
	// N, each once, none failing — of a flow node and of the supervisor
	// layer's turns at the same time.
	t.Run("CreateNextStep_Concurrent_OneToNNoErrors", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		const n = 8
		nodes := []string{"impl", "_supervisor"}
		errs := make([]error, n*len(nodes))
		concurrently(len(errs), func(i int) {
			node := nodes[i%len(nodes)]
			var created bool
			_, created, errs[i] = b.s.CreateNextStep(b.ctx, r.ID, node, fmt.Sprintf("%s-%d", b.prefix, i), b.number(r.ID, node, fmt.Sprintf("%s-%d", b.prefix, i), nil))
			if errs[i] == nil && !created {
				errs[i] = errors.New("created = false")
			}
		})
		for i, err := range errs {
			if err != nil {
				t.Errorf("CreateNextStep %d (%s): %v", i, nodes[i%len(nodes)], err)
			}
		}
		for _, node := range nodes {
			if got := b.visitsOf(t, r.ID, node); fmt.Sprint(got) != fmt.Sprint(oneTo(n)) {
				t.Errorf("visits of %s = %v; want %v, each once", node, got, oneTo(n))
			}
			if c, err := b.s.CountVisits(b.ctx, r.ID, node); err != nil || c != n {
				t.Errorf("CountVisits(%s) = %d, %v; want %d", node, c, err, n)
			}
		}
	})

	// N deliveries of one message at once: one step, the same one for
	// each, and the count moved once.
	t.Run("CreateNextStep_ConcurrentSameDedupKey_OneStep", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		const n = 8
		dedup := b.key("dedup")
		got := make([]stratus.Step, n)
		created := make([]bool, n)
		errs := make([]error, n)
		concurrently(n, func(i int) {
			got[i], created[i], errs[i] = b.s.CreateNextStep(b.ctx, r.ID, "impl", dedup, b.number(r.ID, "impl", dedup, nil))
		})
		made := 0
		for i := range n {
			if errs[i] != nil {
				t.Errorf("CreateNextStep %d: %v", i, errs[i])
				continue
			}
			if created[i] {
				made++
			}
			if got[i].TID != got[0].TID || got[i].Visit != 1 {
				t.Errorf("delivery %d got %s (visit %d); want %s, visit 1", i, got[i].TID, got[i].Visit, got[0].TID)
			}
		}
		if made != 1 {
			t.Errorf("%d deliveries created a step; want 1", made)
		}
		if vs := b.visitsOf(t, r.ID, "impl"); fmt.Sprint(vs) != "[1]" {
			t.Errorf("visits = %v; want [1]", vs)
		}
		if st, _ := b.nextStep(t, r.ID, "impl", b.key("dedup")); st.Visit != 2 {
			t.Errorf("the next message's step numbered %d; want 2 (a redelivery moves no count)", st.Visit)
		}
	})

	// A redelivered message finds its step: returned, not created, number
	// not called, the count unmoved.
	t.Run("CreateNextStep_Redelivered_ReturnsExisting", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		dedup := b.key("dedup")
		first, _ := b.nextStep(t, r.ID, "impl", dedup)
		var calls atomic.Int32
		got, created, err := b.s.CreateNextStep(b.ctx, r.ID, "impl", dedup, b.number(r.ID, "impl", dedup, &calls))
		if err != nil || created {
			t.Fatalf("CreateNextStep again = created %v, %v; want the existing step", created, err)
		}
		checkStep(t, got, first)
		if calls.Load() != 0 {
			t.Errorf("number called %d times for a redelivery; want 0", calls.Load())
		}
		if n, err := b.s.CountVisits(b.ctx, r.ID, "impl"); err != nil || n != 1 {
			t.Errorf("CountVisits = %d, %v; want 1", n, err)
		}
	})

	t.Run("CreateNextStep_NumberMisnumbered_Invalid", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		r := b.createRun(t)
		for _, c := range []struct {
			field string
			mut   func(*stratus.Step)
		}{
			{"visit", func(st *stratus.Step) { st.Visit++ }},
			{"node", func(st *stratus.Step) { st.Node = "other" }},
			{"run_id", func(st *stratus.Step) { st.RunID = "other" }},
			{"dedup_key", func(st *stratus.Step) { st.DedupKey = "other" }},
		} {
			dedup := b.key("dedup")
			number := b.number(r.ID, "impl", dedup, nil)
			_, _, err := b.s.CreateNextStep(b.ctx, r.ID, "impl", dedup, func(v int) (stratus.Step, error) {
				st, err := number(v)
				c.mut(&st)
				return st, err
			})
			wantCode(t, "CreateNextStep with a step of another "+c.field, err, stratus.EINVALID)
			if se := (*stratus.Error)(nil); !errors.As(err, &se) || se.Field != c.field {
				t.Errorf("CreateNextStep with a step of another %s: %v; want field %q named", c.field, err, c.field)
			}
		}
		boom := errors.New("boom")
		if _, _, err := b.s.CreateNextStep(b.ctx, r.ID, "impl", b.key("dedup"), func(int) (stratus.Step, error) { return stratus.Step{}, boom }); !errors.Is(err, boom) {
			t.Errorf("CreateNextStep whose number fails = %v; want its error", err)
		}
		if vs := b.visitsOf(t, r.ID, "impl"); len(vs) != 0 {
			t.Errorf("refused numberings left steps %v", vs)
		}
		if n, err := b.s.CountVisits(b.ctx, r.ID, "impl"); err != nil || n != 0 {
			t.Errorf("CountVisits = %d, %v; want 0", n, err)
		}
	})
}
