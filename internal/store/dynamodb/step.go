package dynamodb

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

func stepKey(tid string) item { return key(pkTask+tid, skStep) }

// CreateStep inserts st unless a step with the same non-empty DedupKey
// exists, in which case it returns that step and created=false. An empty
// DedupKey never matches. ECONFLICT if another step already has st.TID.
//
// One transaction creates three items, each only if absent: the step, the
// dedup item naming it, and the next entry of the run's step list (the
// creation order). When the dedup item exists the step is a redelivery;
// when only the list entry was taken, another step of the run was created
// meanwhile and the write tries the next entry.
func (s *Store) CreateStep(ctx context.Context, st stratus.Step) (got stratus.Step, created bool, err error) {
	what := "create step " + quote(st.TID)
	if st.DedupKey != "" {
		if got, found, err := s.dedupStep(ctx, st.DedupKey); err != nil || found {
			return got, false, err
		}
	}
	wid := newWID()
	stepIt := stepKey(st.TID).setAll(map[string]av{
		attrRecord: str("step"), attrWID: str(wid),
		"tid": str(st.TID), "run_id": text(st.RunID), "node": text(st.Node), "kind": text(st.Kind), "visit": num(int64(st.Visit)),
		"step_ref": text(st.StepRef), "dedup_key": text(st.DedupKey), "task_token": text(st.TaskToken),
		"input": text(string(st.Input)),
	}).setAll(stepMutable(st))
	var existing *stratus.Step
	err = contend(ctx, what, func() (lost bool, err error) {
		last, err := s.lastSeq(ctx, pkRun+st.RunID, skRunStep)
		if err != nil {
			return false, err
		} else if last >= maxSeq {
			return false, fmt.Errorf("run %q has %d steps, the most one run can hold", st.RunID, last)
		}
		items := []types.TransactWriteItem{
			s.createTx(stepIt),
			s.createTx(key(pkRun+st.RunID, skRunStep+pad(last+1)).setAll(map[string]av{
				attrRecord: str("run_step"), attrWID: str(wid), "tid": str(st.TID), "node": text(st.Node),
			})),
		}
		if st.DedupKey != "" {
			items = append(items, s.createTx(key(pkDedup+st.DedupKey, skDedup).setAll(map[string]av{
				attrRecord: str("dedup"), attrWID: str(wid), "tid": str(st.TID),
			})))
		}
		err = s.transact(ctx, items...)
		codes, olds, ok := canceled(err)
		switch {
		case err == nil:
			return false, nil
		case !ok:
			return false, err
		case reason(codes, 0) == codeConditionFailed && mine(olds[0], wid):
			return false, nil // the SDK retried this transaction after it had committed
		case reason(codes, 2) == codeConditionFailed:
			got, found, err := s.dedupStep(ctx, st.DedupKey)
			if err == nil && !found {
				err = fmt.Errorf("dedup key %q was taken, then vanished", st.DedupKey)
			}
			existing = &got
			return false, err
		case reason(codes, 0) == codeConditionFailed:
			return false, stratus.Errorf(stratus.ECONFLICT, "step %q already exists (DynamoDB TransactionCanceledException: %s)", st.TID, codeConditionFailed)
		case reason(codes, 1) == codeConditionFailed || hasCode(codes, codeTransactionConflict):
			return true, nil
		}
		return false, err
	})
	if err != nil {
		if stratus.ErrorCode(err) == stratus.ECONFLICT {
			return stratus.Step{}, false, err
		}
		return stratus.Step{}, false, wrap(what, err)
	}
	if existing != nil {
		return *existing, false, nil
	}
	st.CreatedAt, st.EndedAt = stored(st.CreatedAt), stored(st.EndedAt)
	return st, true, nil
}

// stepMutable is what UpdateStep replaces.
func stepMutable(st stratus.Step) map[string]av {
	return map[string]av{"status": text(st.Status), "verdict": text(st.Verdict), "value": text(string(st.Value)),
		"created_at": millis(st.CreatedAt), "ended_at": millis(st.EndedAt)}
}

// dedupStep returns the step the dedup item of dk names, if there is one.
func (s *Store) dedupStep(ctx context.Context, dk string) (stratus.Step, bool, error) {
	d, err := s.get(ctx, key(pkDedup+dk, skDedup))
	if err != nil {
		return stratus.Step{}, false, wrap(fmt.Sprintf("look up dedup key %q", dk), err)
	} else if d == nil {
		return stratus.Step{}, false, nil
	}
	st, err := s.GetStep(ctx, d.str("tid"))
	if err != nil {
		return stratus.Step{}, false, fmt.Errorf("dedup key %q: %w", dk, err)
	}
	return st, true, nil
}

// GetStep returns the step with tid; ENOTFOUND if there is none.
func (s *Store) GetStep(ctx context.Context, tid string) (stratus.Step, error) {
	it, err := s.get(ctx, stepKey(tid))
	if err != nil {
		return stratus.Step{}, wrap("get step "+quote(tid), err)
	} else if it == nil {
		return stratus.Step{}, stratus.Errorf(stratus.ENOTFOUND, "step %q not found", tid)
	}
	return decodeStep(it), nil
}

func decodeStep(it item) stratus.Step {
	st := stratus.Step{
		TID: it.str("tid"), RunID: it.str("run_id"), Node: it.str("node"), Kind: it.str("kind"), Visit: int(it.int("visit")),
		StepRef: it.str("step_ref"), DedupKey: it.str("dedup_key"), TaskToken: it.str("task_token"),
		Status: it.str("status"), Verdict: it.str("verdict"), CreatedAt: it.time("created_at"), EndedAt: it.time("ended_at"),
	}
	if v := it.str("value"); v != "" {
		st.Value = json.RawMessage(v)
	}
	if v := it.str("input"); v != "" {
		st.Input = json.RawMessage(v)
	}
	return st
}

// ListSteps returns the steps of run runID in creation order; none (and
// no error) for a run without steps or an unknown run.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]stratus.Step, error) {
	what := "list steps of run " + quote(runID)
	entries, err := s.query(ctx, pkRun+runID, skRunStep, false, 0)
	if err != nil {
		return nil, wrap(what, err)
	}
	keys := make([]item, len(entries))
	for i, e := range entries {
		keys[i] = stepKey(e.str("tid"))
	}
	found, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, wrap(what, err)
	}
	steps := make([]stratus.Step, 0, len(entries))
	for _, e := range entries {
		it, ok := found[pkTask+e.str("tid")]
		if !ok {
			return nil, fmt.Errorf("%s: entry %s names step %q, which does not exist", what, e.str(SortKey), e.str("tid"))
		}
		steps = append(steps, decodeStep(it))
	}
	return steps, nil
}

// batchGet reads items by key (strongly consistent), returned by partition
// key. Keys the service leaves unprocessed are asked for again.
func (s *Store) batchGet(ctx context.Context, keys []item) (map[string]item, error) {
	found := map[string]item{}
	for len(keys) > 0 {
		n := min(len(keys), 100)
		pending := keys[:n]
		keys = keys[n:]
		err := contend(ctx, "batch get", func() (bool, error) {
			out, err := s.c.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				s.table: {Keys: toMaps(pending), ConsistentRead: aws.Bool(true)},
			}})
			if err != nil {
				return false, err
			}
			for _, it := range out.Responses[s.table] {
				found[item(it).str(PartitionKey)] = it
			}
			pending = nil
			for _, k := range out.UnprocessedKeys[s.table].Keys {
				pending = append(pending, k)
			}
			return len(pending) > 0, nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

func toMaps(items []item) []map[string]av {
	out := make([]map[string]av, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}

// CountVisits returns how many steps of node run runID has (0 for an
// unknown run or node). It reads the run's step list, strongly consistent,
// so a dispatch counting visits sees every step created before it.
func (s *Store) CountVisits(ctx context.Context, runID, node string) (int, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		FilterExpression:          aws.String("#node = :node"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey, "#node": "node"},
		ExpressionAttributeValues: map[string]av{":pk": str(pkRun + runID), ":prefix": str(skRunStep), ":node": str(node)},
		ConsistentRead:            aws.Bool(true),
		Select:                    types.SelectCount,
	}
	n := 0
	for {
		out, err := s.c.Query(ctx, in)
		if err != nil {
			return 0, wrap(fmt.Sprintf("count visits of node %q in run %q", node, runID), err)
		}
		n += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// UpdateStep replaces Status, Verdict, Value and EndedAt of step st.TID;
// ENOTFOUND if there is no such step.
func (s *Store) UpdateStep(ctx context.Context, st stratus.Step) error {
	missing, err := s.apply(ctx, stepUpdate(st))
	if err != nil {
		return wrap("update step "+quote(st.TID), err)
	} else if missing {
		return stepNotFound(st.TID)
	}
	return nil
}

// ReenterStep makes step tid running again for a new entry of its Task
// state unless entry is already its latest (store.Store): one conditional
// UpdateItem (the item exists and its entry differs), so two deliveries of
// one entry cannot both reenter.
func (s *Store) ReenterStep(ctx context.Context, tid, token, entry string) (stratus.Step, bool, error) {
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 stepKey(tid),
		UpdateExpression:    aws.String("SET #tok = :tok, #st = :st, #entry = :entry REMOVE #ended"),
		ConditionExpression: aws.String("attribute_exists(#pk) AND (attribute_not_exists(#entry) OR #entry <> :entry)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey, "#tok": "task_token", "#st": "status",
			"#entry": "entry", "#ended": "ended_at"},
		ExpressionAttributeValues: map[string]av{":tok": text(token), ":st": text(stratus.StepRunning), ":entry": text(entry)},
	})
	reentered := true
	if _, ok := conditionFailed(err); ok {
		reentered, err = false, nil
	}
	if err != nil {
		return stratus.Step{}, false, wrap("reenter step "+quote(tid), err)
	}
	st, err := s.GetStep(ctx, tid)
	return st, reentered, err
}

func stepUpdate(st stratus.Step) update {
	m := stepMutable(st)
	delete(m, "created_at")
	return update{stepKey(st.TID), m}
}

func stepNotFound(tid string) error {
	return stratus.Errorf(stratus.ENOTFOUND, "step %q not found (DynamoDB ConditionalCheckFailedException)", tid)
}

func hasCode(codes []string, code string) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// LatestSteps returns, per node of run runID, its latest step among those
// q selects, in creation order. The table keeps no per-node index: it reads
// the run's steps (ListSteps) and picks (store.Latest).
func (s *Store) LatestSteps(ctx context.Context, runID string, q store.LatestQuery) ([]stratus.Step, error) {
	steps, err := s.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	return store.Latest(steps, q), nil
}
