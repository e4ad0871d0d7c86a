package dispatch_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"

	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/dispatch"
	"github.com/stratusflow/stratus/internal/worker/resolve"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// Dispatch messages handled at once by several dispatch instances number
// their steps without a gap or a collision: a node's visits 1..n and the
// supervisor layer's turns 1..n, whichever instance handles which message
// (docs/architecture.md § The path of one step, 3: dispatch creates the step
// with a conditional write; store.Store.CreateNextStep). A redelivered
// message creates nothing.
func TestDispatch_ConcurrentInstances_NumberStepsWithoutGaps(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.SupervisorFlow(""), Supervisor: true})
	const n = 8
	svcs := r.Instances(t, dynamoStore(t), 3)
	ctx := context.Background()
	deliver := func(ms []core.Message) {
		t.Helper()
		errs := make([]error, len(ms))
		workertest.AllAtOnce(len(ms), func(i int) { errs[i] = dispatch.Invoke(ctx, svcs[i%len(svcs)].Service, ms[i]) })
		for i, err := range errs {
			if err != nil {
				t.Errorf("Dispatch(%s %s) on instance %d: %v", ms[i].Kind, resolve.First(ms[i].TaskToken, ms[i].StepRef), i%len(svcs), err)
			}
		}
	}
	steps := func(kind string) []stratus.Step {
		t.Helper()
		all, err := svcs[0].Store.ListSteps(ctx, r.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(all, func(st stratus.Step) bool { return st.Kind != kind })
	}
	numbered := func(what string, got []stratus.Step, node, ref string) {
		t.Helper()
		var visits []int
		for _, st := range got {
			visits = append(visits, st.Visit)
			if want := fmt.Sprintf("%s.%s.%d", r.Run.ID, node, st.Visit); st.TID != want {
				t.Errorf("%s: TID %s; want %s", what, st.TID, want)
			}
			if want := fmt.Sprintf("%s#%d", ref, st.Visit); st.StepRef != want {
				t.Errorf("%s: step_ref %s; want %s", what, st.StepRef, want)
			}
		}
		slices.Sort(visits)
		if want := fmt.Sprint(seq(n)); fmt.Sprint(visits) != want {
			t.Errorf("%s: visits %v; want %s, each once", what, visits, want)
		}
	}

	var visits []core.Message
	for i := range n {
		visits = append(visits, core.Message{RunID: r.Run.ID, Node: "implementation", Kind: "agent", TaskToken: fmt.Sprintf("tok-%d", i)})
	}
	deliver(visits)
	impl := steps("agent")
	numbered("implementation steps", impl, "implementation", "implementation")
	deliver(visits) // every message again: the queue delivers at least once
	if again := steps("agent"); len(again) != len(impl) {
		t.Errorf("redelivered messages made %d steps; want %d", len(again), len(impl))
	}

	var observe []core.Message
	for _, st := range impl {
		observe = append(observe, core.Message{RunID: r.Run.ID, Kind: core.KindObserve, StepRef: st.StepRef, Why: "a test"})
	}
	deliver(observe)
	turns := steps(report.Kind)
	numbered("supervisor turns", turns, core.SupervisorNode, "supervisor")
	var jobVisits []int
	for _, st := range turns {
		jobVisits = append(jobVisits, core.SupervisorValue(st).JobVisit)
	}
	slices.Sort(jobVisits)
	if want := fmt.Sprint(seq(n)); fmt.Sprint(jobVisits) != want {
		t.Errorf("observation turns' job visits %v; want %s", jobVisits, want)
	}
	if msgs := r.Warnings.Messages(); len(msgs) > 0 {
		t.Errorf("warnings: %q", msgs)
	}
	deliver(observe)
	if again := steps(report.Kind); len(again) != len(turns) {
		t.Errorf("redelivered observations made %d turns; want %d", len(again), len(turns))
	}
	if got := len(svcs[0].Launcher.(*workertest.FakeLauncher).Launched()); got != 2*n {
		t.Errorf("%d workers launched; want %d, one per step (none for a redelivery)", got, 2*n)
	}
}

// seq is 1..n.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	return s
}

// dynamoStore is a store on a DynamoDB table of its own on the moto
// server, for several worker instances to share.
func dynamoStore(t *testing.T) store.Store {
	t.Helper()
	c := awsddb.NewFromConfig(awstest.Moto(t).Config())
	prefix := "w" + strings.ToLower(rand.Text()[:10]) + "-"
	if err := dynamodb.CreateTables(context.Background(), c, prefix); err != nil {
		t.Fatal(err)
	}
	st, err := dynamodb.New(c, dynamodb.Options{Table: dynamodb.TableName(prefix), Blobs: fs.New(t.TempDir())})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
