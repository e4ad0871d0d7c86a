package hitl_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/hitl"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// Replies to one waiting gate that reach several worker API instances at once
// (two operators, or one retrying on another instance): one is recorded — the
// step's value, its reply file and the one SendTaskSuccess are that reply's —
// and every other is refused 409 on field node with nothing of it kept
// (store.Store.UpdateStepFrom; the service's gate lock serialises only one
// process).
func TestHuman_ConcurrentInstances_OneReplyWins(t *testing.T) {
	t.Parallel()
	h := newHITLRig(t, "")
	svcs := h.Instances(t, dynamoStore(t), 4)
	ctx := context.Background()
	if err := svcs[0].Dispatch(ctx, core.Message{RunID: "r1", Node: "ask", Kind: "hitl", TaskToken: "tok-ask"}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	vals := make([]*core.HITLValue, n)
	errs := make([]error, n)
	workertest.AllAtOnce(n, func(i int) {
		vals[i], errs[i] = hitl.Invoke(ctx, svcs[i%len(svcs)].Service, "r1", "ask", core.Reply{Decision: core.DecisionAnswer, Text: fmt.Sprintf("answer %d", i)})
	})
	won := -1
	for i, err := range errs {
		var se *stratus.Error
		switch {
		case err == nil && won >= 0:
			t.Fatalf("replies %d and %d were both recorded", won, i)
		case err == nil:
			won = i
		case stratus.ErrorCode(err) != stratus.ECONFLICT || !errors.As(err, &se) || se.Field != "node":
			t.Errorf("reply %d: %v; want ECONFLICT on field node", i, err)
		}
	}
	if won < 0 {
		t.Fatalf("no reply was recorded: %v", errs)
	}
	want := fmt.Sprintf("answer %d", won)
	st, err := svcs[1].Store.GetStep(ctx, "r1.ask.1")
	if err != nil {
		t.Fatal(err)
	}
	var v core.HITLValue
	json.Unmarshal(st.Value, &v)
	if st.Status != stratus.StepCompleted || v.Answer != want || vals[won].Answer != want {
		t.Errorf("step %s %s holds answer %q; want the recorded reply's, %q", st.TID, st.Status, v.Answer, want)
	}
	if body := workertest.Read(t, h.Ctx("ask.md")); !strings.Contains(body, want) {
		t.Errorf("ask.md holds another reply than the recorded one (%q):\n%s", want, body)
	}
	if got := len(h.Tokens.Successes()); got != 1 {
		t.Errorf("%d task tokens succeeded; want the gate's, once", got)
	}
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
