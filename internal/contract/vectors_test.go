package contract

import (
	"context"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/contract/contracttest"
)

// runVector runs NAME.sh of testdata/cases/contract as `sh NAME.sh` under
// the vector's launch and checks every field of want.
func runVector(t *testing.T, name string) {
	t.Helper()
	runLoadedVector(t, contracttest.Load(t, name))
}

func runLoadedVector(t *testing.T, v contracttest.Vector) {
	t.Helper()
	v.MustHaveCommands(t)
	spec := LaunchSpec{
		Command:       "sh",
		Args:          []string{v.Script},
		DeadlineMS:    v.Launch.DeadlineMS,
		CancelGraceMS: v.Launch.CancelGraceMS,
	}
	req := Request{Kind: v.Launch.Kind, Input: v.Launch.Input, MaxSteps: v.Launch.MaxSteps}
	start := time.Now()
	res, err := NewRunner().Run(context.Background(), spec, req, nil)
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, m := range v.Want.Check(checked(res)) {
		t.Error(m)
	}
	// max_wall_ms catches a call that does not end when it should (a hang
	// until a deadline far beyond it), not speed: a machine loaded by the
	// race detector and the suite's parallel packages (real CLIs, moto)
	// gets loadSlack on top, which no hang fits in.
	if max := time.Duration(v.Want.MaxWallMS)*time.Millisecond + loadSlack; wall > max {
		t.Errorf("wall %v > max_wall_ms %v (+ %v for a loaded machine)", wall, time.Duration(v.Want.MaxWallMS)*time.Millisecond, loadSlack)
	}
}

// loadSlack is added to a vector's max_wall_ms (see runVector).
const loadSlack = 10 * time.Second

// checked is res in the shape contracttest checks.
func checked(res Result) contracttest.Result {
	a := res.Attempt
	return contracttest.Result{
		Terminal: string(res.Terminal),
		Report:   res.Report,
		Failure:  res.Failure,
		Attempt: contracttest.Attempt{
			ID:               a.ID,
			Steps:            a.Steps,
			PromptTokens:     a.PromptTokens,
			CompletionTokens: a.CompletionTokens,
			CostUSD:          a.CostUSD,
		},
	}
}

func checkCost(t *testing.T, got, want *float64) {
	t.Helper()
	if m := contracttest.CostMismatch(got, want); m != "" {
		t.Error(m)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	ok, err := contracttest.JSONEqual(a, b)
	if err != nil {
		t.Error(err)
	}
	return ok
}

// TestVectors runs every vector of cases/contract. //
// docs/contracts.md § Child contract v1
func TestVectors(t *testing.T) {
	t.Parallel()
	for _, v := range contracttest.Vectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			runLoadedVector(t, v)
		})
	}
}
