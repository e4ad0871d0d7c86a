package dynamodb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/lifecycle"
)

// RunSpend of a run with totals is one request however many steps the
// run has (a cap check on every dispatch reads no more at step 500 than
// at step 5); a run created before totals were kept (no spend_kept mark)
// is still summed, from its attempts, and its attempts' writes go on.
func TestRunSpend_OneRequestWithTotals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	requests := &atomic.Int64{}
	counting := dynamodb.NewFromConfig(awstest.Moto(t).Config(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("CountRequests",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					requests.Add(1)
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	})
	s, err := New(counting, Options{Table: f.table, Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	cost := 0.5
	fill := func(runID string, steps int) []stratus.Attempt {
		if err := s.CreateRun(f.ctx, stratus.Run{ID: runID, Status: stratus.RunRunning}); err != nil {
			t.Fatal(err)
		}
		var as []stratus.Attempt
		for i := range steps {
			tid := fmt.Sprintf("%s.impl.%d", runID, i+1)
			if _, _, err := s.CreateStep(f.ctx, stratus.Step{TID: tid, RunID: runID, Node: "impl", Visit: i + 1, Status: stratus.StepRunning}); err != nil {
				t.Fatal(err)
			}
			a := stratus.Attempt{TID: tid, N: 1, PromptTokens: 10, CompletionTokens: 1, CostUSD: &cost}
			if err := s.CreateAttempt(f.ctx, a); err != nil {
				t.Fatal(err)
			}
			as = append(as, a)
		}
		return as
	}
	for _, n := range []int{5, 20} {
		id := fmt.Sprintf("run-%d", n)
		fill(id, n)
		requests.Store(0)
		sp, err := lifecycle.RunSpend(f.ctx, s, id)
		if err != nil || sp.Tokens != int64(11*n) || sp.CostUSD != 0.5*float64(n) {
			t.Errorf("RunSpend(%s) = %+v, %v; want %d tokens, $%v", id, sp, err, 11*n, 0.5*float64(n))
		}
		if got := requests.Load(); got != 1 {
			t.Errorf("RunSpend of a run of %d steps made %d DynamoDB requests; want 1 (its totals)", n, got)
		}
	}

	// "old" as a run of a release before totals: no mark, no sums.
	as := fill("old", 3)
	if _, err := f.ddb.UpdateItem(f.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: runKey("old"),
		UpdateExpression: aws.String("REMOVE spend_kept, spend_cost_usd, spend_tokens, spend_unpriced")}); err != nil {
		t.Fatal(err)
	}
	a := as[0]
	a.PromptTokens, a.CostUSD = 1000, nil
	if err := s.UpdateAttempt(f.ctx, a); err != nil {
		t.Fatalf("UpdateAttempt of an old run's attempt: %v", err)
	}
	b := stratus.Attempt{TID: as[1].TID, N: 2, PromptTokens: 7}
	if err := s.CreateAttempt(f.ctx, b); err != nil {
		t.Fatalf("CreateAttempt of an old run's step: %v", err)
	}
	if _, kept, err := s.RunTotals(f.ctx, "old"); err != nil || kept {
		t.Errorf("RunTotals(old) = kept %v, %v; want not kept", kept, err)
	}
	sp, err := lifecycle.RunSpend(f.ctx, s, "old")
	want := lifecycle.Spend{CostUSD: 1, Tokens: 1001 + 7 + 22, Unpriced: 2}
	if err != nil || sp != want {
		t.Errorf("RunSpend(old) = %+v, %v; want %+v, summed from its attempts", sp, err, want)
	}
}
