package dynamodb

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/stratusflow/stratus"
)

// PruneRun marks run runID pruned at `at`, then deletes the items it
// recorded besides the run and its entry in the run list: the run's step
// list, visit counts, latest steps and degradations (partition run#<id>), each step's
// partition (task#<tid>: the step, its attempts, output tails and final
// markers) and dedup item (store.Store.PruneRun; docs/security.md § Retention). The
// mark is one UpdateItem conditioned on a terminal status, so a run
// resumed meanwhile is ECONFLICT and loses nothing; the deletes that
// follow are idempotent, and a PruneRun cut short is finished by the next
// one. Handles expire through TTL; spilled bodies stay in Blobs, where
// another run may share them (content-addressed). ENOTFOUND for no such
// run.
func (s *Store) PruneRun(ctx context.Context, runID string, at time.Time) error {
	what := "prune run " + quote(runID)
	names := map[string]string{"#pk": PartitionKey, "#status": "status", "#pruned": "pruned_at",
		"#cost": attrSpendCost, "#tokens": attrSpendTokens, "#unpriced": attrSpendUnpriced}
	values := map[string]av{":at": millis(at), ":zero": num(0)}
	var in []string
	for i, st := range []string{stratus.RunDone, stratus.RunFailed, stratus.RunManualActionRequired, stratus.RunInterrupted} {
		k := ":s" + string(rune('0'+i))
		values[k] = str(st)
		in = append(in, k)
	}
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: runKey(runID),
		// The attempts go, and with them what the spend totals summed.
		UpdateExpression:          aws.String("SET #pruned = if_not_exists(#pruned, :at), #cost = :zero, #tokens = :zero, #unpriced = :zero"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND #status IN (" + strings.Join(in, ", ") + ")"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if _, failed := conditionFailed(err); failed {
		r, gerr := s.GetRun(ctx, runID)
		if gerr != nil {
			return gerr
		}
		return stratus.Errorf(stratus.ECONFLICT, "run %q is %s; only a run that ended is pruned (DynamoDB ConditionalCheckFailedException)", runID, r.Status)
	} else if err != nil {
		return wrap(what, err)
	}
	var items []item
	for _, prefix := range []string{skRunStep, skDegradation, skVisits, skLatest} {
		got, err := s.query(ctx, pkRun+runID, prefix, false, 0)
		if err != nil {
			return wrap(what, err)
		}
		items = append(items, got...)
	}
	var keys []item
	for _, it := range items {
		sk := it.str(SortKey)
		keys = append(keys, key(pkRun+runID, sk))
		if !strings.HasPrefix(sk, skRunStep) {
			continue
		}
		tid := it.str("tid")
		if st, err := s.get(ctx, stepKey(tid)); err != nil {
			return wrap(what, err)
		} else if dk := st.str("dedup_key"); dk != "" {
			keys = append(keys, key(pkDedup+dk, skDedup))
		}
		for _, prefix := range []string{skStep, skAttempt, skOutput, skFinal} {
			task, err := s.query(ctx, pkTask+tid, prefix, false, 0)
			if err != nil {
				return wrap(what, err)
			}
			for _, t := range task {
				keys = append(keys, key(pkTask+tid, t.str(SortKey)))
			}
		}
	}
	// The step list last: while a step's items remain, its entry names it.
	var first, last []item
	for _, k := range keys {
		if k.str(PartitionKey) == pkRun+runID {
			last = append(last, k)
		} else {
			first = append(first, k)
		}
	}
	if err := s.batchDelete(ctx, append(first, last...)); err != nil {
		return wrap(what, err)
	}
	return nil
}
