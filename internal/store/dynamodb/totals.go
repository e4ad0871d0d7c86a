package dynamodb

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

// The run item's spend totals (store.Store.RunTotals): attrSpendKept marks
// a run created with them; the sums are ADDed to by each write that
// changes an attempt's usage, in the transaction of that write.
const (
	attrSpendKept     = "spend_kept"
	attrSpendCost     = "spend_cost_usd"
	attrSpendTokens   = "spend_tokens"
	attrSpendUnpriced = "spend_unpriced"
)

// RunTotals returns run runID's spend totals and whether it keeps them
// (store.Store.RunTotals): one strongly consistent GetItem of the run
// item's totals. ENOTFOUND for no such run.
func (s *Store) RunTotals(ctx context.Context, runID string) (store.Totals, bool, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: runKey(runID), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#pk, #kept, #cost, #tokens, #unpriced"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey, "#kept": attrSpendKept, "#cost": attrSpendCost,
			"#tokens": attrSpendTokens, "#unpriced": attrSpendUnpriced},
	})
	if err != nil {
		return store.Totals{}, false, wrap("run totals of run "+quote(runID), err)
	}
	it := item(out.Item)
	if len(it) == 0 {
		return store.Totals{}, false, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", runID)
	} else if !it.bool(attrSpendKept) {
		return store.Totals{}, false, nil
	}
	t := store.Totals{Tokens: it.int(attrSpendTokens), Unpriced: it.int(attrSpendUnpriced)}
	if c := it.float(attrSpendCost); c != nil {
		t.CostUSD = *c
	}
	return t, true, nil
}

// usageNames are the attempt attributes its usage is read from.
var usageNames = map[string]string{"#pk": PartitionKey, "#n": "n", "#pt": "prompt_tokens", "#ct": "completion_tokens", "#cost": "cost_usd"}

// storedUsage reads the usage attributes of attempt (tid, n); nil when
// there is no such attempt.
func (s *Store) storedUsage(ctx context.Context, tid string, n int) (item, error) {
	k, err := attemptKey(tid, n)
	if err != nil {
		return nil, err
	}
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: k, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#pk, #n, #pt, #ct, #cost"), ExpressionAttributeNames: usageNames,
	})
	if err != nil || len(out.Item) == 0 {
		return nil, err
	}
	return out.Item, nil
}

// usageOf is what the attempt stored as it adds to its run's totals.
func usageOf(it item) store.Totals {
	return store.AttemptUsage(stratus.Attempt{N: int(it.int("n")), PromptTokens: it.int("prompt_tokens"),
		CompletionTokens: it.int("completion_tokens"), CostUSD: it.float("cost_usd")})
}

// runOf returns the run of step tid; "" when there is no such step.
func (s *Store) runOf(ctx context.Context, tid string) (string, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: stepKey(tid), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#run"), ExpressionAttributeNames: map[string]string{"#run": "run_id"},
	})
	if err != nil {
		return "", err
	}
	return item(out.Item).str("run_id"), nil
}

// totalsAdd is the transaction item adding d to run runID's totals, on
// condition that the run keeps them: a run created before totals were
// kept fails it, and its writer tries again without it.
func (s *Store) totalsAdd(runID string, d store.Totals) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: runKey(runID),
		UpdateExpression:    aws.String("ADD #cost :cost, #tokens :tokens, #unpriced :unpriced"),
		ConditionExpression: aws.String("#kept = :kept"),
		ExpressionAttributeNames: map[string]string{"#kept": attrSpendKept, "#cost": attrSpendCost,
			"#tokens": attrSpendTokens, "#unpriced": attrSpendUnpriced},
		ExpressionAttributeValues: map[string]av{":kept": boolean(true), ":cost": &types.AttributeValueMemberN{Value: strconv.FormatFloat(d.CostUSD, 'f', -1, 64)},
			":tokens": num(d.Tokens), ":unpriced": num(d.Unpriced)},
	}}
}

// usageWrite is a replacement of an attempt conditioned on the usage it
// replaces, and the change it makes to its run's totals.
type usageWrite struct {
	att types.TransactWriteItem  // the attempt's update
	run *types.TransactWriteItem // the ADD to its run's totals; nil for none
}

// replaceUsage prepares u, the update of attempt a, conditioned on the
// attempt's usage being what it is now, with the ADD of the change to its
// run's totals (none when noRun: the run keeps no totals). missing is
// true when there is no such attempt.
func (s *Store) replaceUsage(ctx context.Context, a stratus.Attempt, u update, noRun bool) (w usageWrite, missing bool, err error) {
	old, err := s.storedUsage(ctx, a.TID, a.N)
	if err != nil {
		return usageWrite{}, false, err
	} else if old == nil {
		return usageWrite{}, true, nil
	}
	w.att = s.updateTx(u)
	up := w.att.Update
	cond := "#pt = :opt AND #ct = :oct AND "
	for _, n := range []string{"#pt", "#ct", "#cost"} {
		up.ExpressionAttributeNames[n] = usageNames[n]
	}
	if up.ExpressionAttributeValues == nil {
		up.ExpressionAttributeValues = map[string]av{}
	}
	up.ExpressionAttributeValues[":opt"] = num(old.int("prompt_tokens"))
	up.ExpressionAttributeValues[":oct"] = num(old.int("completion_tokens"))
	if c := old.float("cost_usd"); c == nil {
		cond += "attribute_not_exists(#cost)"
	} else {
		cond += "#cost = :ocost"
		up.ExpressionAttributeValues[":ocost"] = float(c)
	}
	up.ConditionExpression = aws.String(aws.ToString(up.ConditionExpression) + " AND " + cond)
	d := store.AttemptUsage(a).Minus(usageOf(old))
	if noRun || d.IsZero() {
		return w, false, nil
	}
	runID, err := s.runOf(ctx, a.TID)
	if err != nil || runID == "" {
		return w, false, err
	}
	add := s.totalsAdd(runID, d)
	w.run = &add
	return w, false, nil
}

// items are w's transaction items: the attempt's first.
func (w usageWrite) items() []types.TransactWriteItem {
	if w.run == nil {
		return []types.TransactWriteItem{w.att}
	}
	return []types.TransactWriteItem{w.att, *w.run}
}

// updateAttemptUsage is UpdateAttempt: u replaces attempt a and the change
// in its usage moves its run's totals, in one transaction, tried again
// when another write changed the attempt's usage since it was read.
func (s *Store) updateAttemptUsage(ctx context.Context, what string, a stratus.Attempt, u update) error {
	if err := checkSize(u.k, u.set); err != nil {
		return err
	}
	noRun := false
	return contend(ctx, what, func() (bool, error) {
		w, missing, err := s.replaceUsage(ctx, a, u, noRun)
		if err != nil {
			return false, err
		} else if missing {
			return false, attemptNotFound(a)
		}
		if w.run == nil {
			// One item: a conditional UpdateItem, as the transaction
			// would be but cheaper.
			up := w.att.Update
			_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: up.TableName, Key: up.Key, UpdateExpression: up.UpdateExpression, ConditionExpression: up.ConditionExpression,
				ExpressionAttributeNames: up.ExpressionAttributeNames, ExpressionAttributeValues: up.ExpressionAttributeValues,
			})
			if _, ok := conditionFailed(err); ok {
				return true, nil // gone or changed: the next read says which
			}
			return false, err
		}
		err = s.transact(ctx, w.items()...)
		codes, _, ok := canceled(err)
		switch {
		case err == nil:
			return false, nil
		case !ok:
			return false, err
		case reason(codes, 1) == codeConditionFailed:
			noRun = true // the run keeps no totals
			return true, nil
		case reason(codes, 0) == codeConditionFailed || hasCode(codes, codeTransactionConflict):
			return true, nil
		}
		return false, err
	})
}

// createAttemptUsage creates attempt item it and adds a's usage to its
// run's totals in one transaction; exists as create's.
func (s *Store) createAttemptUsage(ctx context.Context, what string, a stratus.Attempt, it item) (exists bool, err error) {
	d := store.AttemptUsage(a)
	if d.IsZero() {
		return s.create(ctx, it)
	}
	runID, err := s.runOf(ctx, a.TID)
	if err != nil {
		return false, err
	} else if runID == "" {
		return s.create(ctx, it)
	}
	err = contend(ctx, what, func() (bool, error) {
		if runID == "" {
			exists, err = s.create(ctx, it)
			return false, err
		}
		err := s.transact(ctx, s.createTx(it), s.totalsAdd(runID, d))
		codes, olds, ok := canceled(err)
		switch {
		case err == nil:
			return false, nil
		case !ok:
			return false, err
		case reason(codes, 0) == codeConditionFailed:
			exists = !mine(olds[0], it.str(attrWID))
			return false, nil
		case reason(codes, 1) == codeConditionFailed:
			runID = "" // the run keeps no totals
			return true, nil
		case hasCode(codes, codeTransactionConflict):
			return true, nil
		}
		return false, err
	})
	return exists, err
}
