package dynamodb

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
// The node's visit count rises to st.Visit when that is higher
// (createStep).
func (s *Store) CreateStep(ctx context.Context, st stratus.Step) (got stratus.Step, created bool, err error) {
	return s.createStep(ctx, "create step "+quote(st.TID), st.RunID, st.Node, st.DedupKey,
		func(int) (stratus.Step, error) { return st, nil })
}

// CreateNextStep creates the next visit of node in run runID
// (store.Store): it reads the node's visit count v-1 (one item), and
// creates step number(v) in the transaction that sets the count to v on
// the condition that it is still v-1. A caller that lost the count to
// another reads it again and numbers the next visit (createStep).
func (s *Store) CreateNextStep(ctx context.Context, runID, node, dedupKey string, number func(visit int) (stratus.Step, error)) (stratus.Step, bool, error) {
	what := fmt.Sprintf("create the next step of node %q in run %q", node, runID)
	return s.createStep(ctx, what, runID, node, dedupKey, func(last int) (stratus.Step, error) {
		st, err := number(last + 1)
		if err != nil {
			return stratus.Step{}, err
		}
		return st, store.CheckNumbered(st, runID, node, dedupKey, last+1)
	})
}

// buildErr carries an error of createStep's build out of contend as is.
type buildErr struct{ error }

// createStep creates the step build returns for the node's visit count
// (last). One transaction writes, each only if absent, the step, the dedup
// item naming it and the next entry of the run's step list (the creation
// order), and — when the step's visit is above last — sets the node's
// count to that visit, conditioned on it still being last (or absent).
// When the dedup item exists the step is a redelivery: that step is
// returned, created=false. When another write took the count or the list
// entry (or a transaction conflicted), the write reads again and tries the
// next: a numbered step is built again for the new count.
func (s *Store) createStep(ctx context.Context, what, runID, node, dedupKey string, build func(last int) (stratus.Step, error)) (got stratus.Step, created bool, err error) {
	if dedupKey != "" {
		if got, found, err := s.dedupStep(ctx, dedupKey); err != nil || found {
			return got, false, err
		}
	}
	wid := newWID()
	var st stratus.Step
	var existing *stratus.Step
	err = contend(ctx, what, func() (lost bool, err error) {
		last, kept, err := s.lastVisit(ctx, runID, node)
		if err != nil {
			return false, err
		}
		if st, err = build(last); err != nil {
			return false, buildErr{err}
		}
		head, err := s.get(ctx, latestKey(st.RunID, st.Node))
		if err != nil {
			return false, err
		}
		seq, err := s.lastSeq(ctx, pkRun+st.RunID, skRunStep)
		if err != nil {
			return false, err
		} else if seq >= maxSeq {
			return false, fmt.Errorf("run %q has %d steps, the most one run can hold", st.RunID, seq)
		}
		items := []types.TransactWriteItem{
			s.createTx(stepKey(st.TID).setAll(map[string]av{
				attrRecord: str("step"), attrWID: str(wid),
				"tid": str(st.TID), "run_id": text(st.RunID), "node": text(st.Node), "kind": text(st.Kind), "visit": num(int64(st.Visit)),
				"step_ref": text(st.StepRef), "dedup_key": text(st.DedupKey), "task_token": text(st.TaskToken),
				"input": text(string(st.Input)), "seq": num(int64(seq + 1)), "prev": text(head.str("tid")),
			}).setAll(stepMutable(st))),
			s.createTx(key(pkRun+st.RunID, skRunStep+pad(seq+1)).setAll(map[string]av{
				attrRecord: str("run_step"), attrWID: str(wid), "tid": str(st.TID), "node": text(st.Node),
			})),
			s.latestTx(st, seq+1, head, wid),
		}
		iDedup, iCount, iLatest := -1, -1, len(items)-1
		if st.DedupKey != "" {
			iDedup = len(items)
			items = append(items, s.createTx(key(pkDedup+st.DedupKey, skDedup).setAll(map[string]av{
				attrRecord: str("dedup"), attrWID: str(wid), "tid": str(st.TID),
			})))
		}
		if st.Visit > last {
			iCount = len(items)
			items = append(items, s.countTx(st, last, kept, wid))
		}
		err = s.transact(ctx, items...)
		codes, olds, ok := canceled(err)
		failed := func(i int) bool { return i >= 0 && reason(codes, i) == codeConditionFailed }
		switch {
		case err == nil:
			return false, nil
		case !ok:
			return false, err
		case failed(0) && mine(olds[0], wid):
			return false, nil // the SDK retried this transaction after it had committed
		case failed(iDedup):
			got, found, err := s.dedupStep(ctx, st.DedupKey)
			if err == nil && !found {
				err = fmt.Errorf("dedup key %q was taken, then vanished", st.DedupKey)
			}
			existing = &got
			return false, err
		case failed(iCount) || failed(iLatest) || failed(1) || hasCode(codes, codeTransactionConflict):
			return true, nil
		case failed(0):
			return false, stratus.Errorf(stratus.ECONFLICT, "step %q already exists (DynamoDB TransactionCanceledException: %s)", st.TID, codeConditionFailed)
		}
		return false, err
	})
	var be buildErr
	switch {
	case errors.As(err, &be):
		return stratus.Step{}, false, be.error
	case stratus.ErrorCode(err) == stratus.ECONFLICT:
		return stratus.Step{}, false, err
	case err != nil:
		return stratus.Step{}, false, wrap(what, err)
	case existing != nil:
		return *existing, false, nil
	}
	st.CreatedAt, st.EndedAt = stored(st.CreatedAt), stored(st.EndedAt)
	return st, true, nil
}

// visitsKey is the key of the visit count of node in run runID: its
// highest visit ("n") and that step's tid ("tid").
func visitsKey(runID, node string) item { return key(pkRun+runID, skVisits+node) }

// latestKey is the key of the latest step of node in run runID: the tid
// ("tid") and seq ("seq", its entry in the run's step list) of the node's
// last created step, and how many steps of the node were created with it
// kept ("count"). Each step item names the step its node had before it
// ("prev"), so a node's steps can be walked back from its latest
// (LatestSteps).
func latestKey(runID, node string) item { return key(pkRun+runID, skLatest+node) }

// latestTx makes st (entry seq of the run's step list) the latest step of
// its node, counts it and adds its kind to the node's "kinds", on condition that the latest is still head (as
// read; absent when head is nil), so the prev st names is the step created
// just before it.
func (s *Store) latestTx(st stratus.Step, seq int, head item, wid string) types.TransactWriteItem {
	names := map[string]string{"#tid": "tid", "#seq": "seq", "#count": "count", "#kinds": "kinds", "#rec": attrRecord, "#wid": attrWID}
	values := map[string]av{":tid": str(st.TID), ":seq": num(int64(seq)), ":one": num(1), ":rec": str("latest"), ":wid": str(wid),
		":kinds": &types.AttributeValueMemberSS{Value: []string{kindsPrefix + st.Kind}}}
	cond := "attribute_not_exists(#pk)"
	if head == nil {
		names["#pk"] = PartitionKey
	} else {
		cond, values[":head"] = "#seq = :head", num(head.int("seq"))
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: latestKey(st.RunID, st.Node),
		UpdateExpression:                    aws.String("SET #tid = :tid, #seq = :seq, #rec = :rec, #wid = :wid ADD #count :one, #kinds :kinds"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// countTx sets the visit count of st's node to st.Visit (and its latest
// tid to st.TID) if it is still last — absent when !kept.
func (s *Store) countTx(st stratus.Step, last int, kept bool, wid string) types.TransactWriteItem {
	names := map[string]string{"#n": "n", "#tid": "tid", "#rec": attrRecord, "#wid": attrWID}
	values := map[string]av{":n": num(int64(st.Visit)), ":tid": str(st.TID), ":rec": str("visits"), ":wid": str(wid)}
	cond := "#n = :last"
	if kept {
		values[":last"] = num(int64(last))
	} else {
		cond, names["#pk"] = "attribute_not_exists(#pk)", PartitionKey
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: visitsKey(st.RunID, st.Node),
		UpdateExpression:                    aws.String("SET #n = :n, #tid = :tid, #rec = :rec, #wid = :wid"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// lastVisit returns the highest visit of node in run runID, and whether
// it is kept in the node's visit count (one item, read strongly
// consistent). A run created with counts (CreateRun marks it) has none
// for a node not visited yet: 0. A run created before counts were kept
// has its steps counted in its step list instead, until its first new
// step of the node sets the count.
func (s *Store) lastVisit(ctx context.Context, runID, node string) (last int, kept bool, err error) {
	it, err := s.get(ctx, visitsKey(runID, node))
	if err != nil {
		return 0, false, err
	} else if it != nil {
		return int(it.int("n")), true, nil
	}
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: runKey(runID), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#counted"), ExpressionAttributeNames: map[string]string{"#counted": attrCounted},
	})
	if err != nil {
		return 0, false, err
	} else if item(out.Item).bool(attrCounted) {
		return 0, false, nil
	}
	n, err := s.countListed(ctx, runID, node)
	return n, false, err
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
	return s.stepsOf(ctx, what, entries)
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
// unknown run or node): the node's visit count, one item read strongly
// consistent, so a dispatch counting visits sees every step created
// before it (lastVisit).
func (s *Store) CountVisits(ctx context.Context, runID, node string) (int, error) {
	n, _, err := s.lastVisit(ctx, runID, node)
	if err != nil {
		return 0, wrap(fmt.Sprintf("count visits of node %q in run %q", node, runID), err)
	}
	return n, nil
}

// countListed counts the entries of node in the run's step list: the
// visits of a node of a run created before visit counts were kept.
func (s *Store) countListed(ctx context.Context, runID, node string) (int, error) {
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
			return 0, err
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

// UpdateStepFrom updates st on condition that its status is still from
// (store.Store): one UpdateItem whose condition adds the status.
func (s *Store) UpdateStepFrom(ctx context.Context, st stratus.Step, from string) error {
	u := stepUpdate(st)
	if err := checkSize(u.k, u.set); err != nil {
		return wrap("update step "+quote(st.TID), err)
	}
	expr, cond, names, values := u.expr()
	names["#from_status"] = "status"
	if values == nil {
		values = map[string]av{}
	}
	values[":from_status"] = text(from)
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: u.k, UpdateExpression: aws.String(expr),
		ConditionExpression:      aws.String(cond + " AND #from_status = :from_status"),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if _, ok := conditionFailed(err); ok {
		cur, gerr := s.GetStep(ctx, st.TID)
		if gerr != nil {
			return gerr
		}
		return stratus.Errorf(stratus.ECONFLICT, "step %q is %s, no longer %s: another writer moved it on first (DynamoDB ConditionalCheckFailedException)", st.TID, cur.Status, from)
	}
	if err != nil {
		return wrap("update step "+quote(st.TID), err)
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
// q selects, in creation order (store.Store), reading O(nodes) items
// however long the run: the run's latest# items (one Query, one item per
// node), the last entry of its step list (one item), then each node's
// latest step (one BatchGetItem) — not for a node whose steps' kinds
// ("kinds" of its latest# item) q all skips, such as the supervisor's
// turns — and, for a node whose latest step q does
// not select, its steps before it by their "prev", one BatchGetItem per
// step walked back, at most maxWalk of them. The steps picked are sorted
// by their "seq" (creation order). When the latest# counts do not add up
// to the run's steps (a run with steps created before they were kept, or
// a step created meanwhile), when a walk would go further than maxWalk, or
// when a step named is missing, it reads the run's steps (ListSteps) and
// picks (store.Latest) as it always did: the answer is the same either way.
func (s *Store) LatestSteps(ctx context.Context, runID string, q store.LatestQuery) ([]stratus.Step, error) {
	what := "latest steps of run " + quote(runID)
	got, ok, err := s.latestByNode(ctx, runID, q)
	if err != nil {
		return nil, wrap(what, err)
	} else if ok {
		return got, nil
	}
	steps, err := s.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	return store.Latest(steps, q), nil
}

// maxWalk is how many steps back LatestSteps follows a node's steps
// before it reads the whole run instead: a node's latest selected step is
// typically its latest, or the one before a step still running.
const maxWalk = 8

// latestByNode is LatestSteps from the latest# items; ok=false when they
// cannot answer (LatestSteps).
func (s *Store) latestByNode(ctx context.Context, runID string, q store.LatestQuery) (got []stratus.Step, ok bool, err error) {
	heads, err := s.query(ctx, pkRun+runID, skLatest, false, 0)
	if err != nil || len(heads) == 0 {
		return nil, false, err
	}
	counted := 0
	var keys []item
	for _, h := range heads {
		counted += int(h.int("count"))
		if !skipsAll(h, q) { // a node whose steps q all skips by kind (the supervisor's turns) has no step to walk
			keys = append(keys, stepKey(h.str("tid")))
		}
	}
	if seq, err := s.lastSeq(ctx, pkRun+runID, skRunStep); err != nil || seq != counted {
		return nil, false, err
	}
	type pick struct {
		st  stratus.Step
		seq int64
	}
	var picks []pick
	for walked := 0; len(keys) > 0; walked++ {
		if walked > maxWalk {
			return nil, false, nil
		}
		found, err := s.batchGet(ctx, keys)
		if err != nil {
			return nil, false, err
		}
		var prev []item
		for _, k := range keys {
			it, present := found[k.str(PartitionKey)]
			if !present || it.int("seq") == 0 {
				return nil, false, nil
			}
			if st := decodeStep(it); q.Selects(st) {
				picks = append(picks, pick{st, it.int("seq")})
			} else if p := it.str("prev"); p != "" {
				prev = append(prev, stepKey(p))
			}
		}
		keys = prev
	}
	slices.SortFunc(picks, func(a, b pick) int { return cmp.Compare(a.seq, b.seq) })
	got = make([]stratus.Step, len(picks))
	for i, p := range picks {
		got[i] = p.st
	}
	return got, true, nil
}

// NodeSteps returns the steps of node in run runID newest first (last
// created first, as the run's step list orders them), at most limit (0:
// all; store.Store): NodesSteps of the one node, which reads the node's
// latest# item and its steps back by "prev", one item more than it
// returns however long the run. Errors: EINVALID for a negative limit.
func (s *Store) NodeSteps(ctx context.Context, runID, node string, limit int) ([]stratus.Step, error) {
	return s.NodesSteps(ctx, runID, []string{node}, limit)
}

// allKept reports whether every step of run runID was created with its
// node's latest# item kept: their counts add up to the run's step list.
func (s *Store) allKept(ctx context.Context, runID string) (bool, error) {
	heads, err := s.query(ctx, pkRun+runID, skLatest, false, 0)
	if err != nil {
		return false, err
	}
	counted := 0
	for _, h := range heads {
		counted += int(h.int("count"))
	}
	seq, err := s.lastSeq(ctx, pkRun+runID, skRunStep)
	return err == nil && seq == counted, err
}

// RecentSteps returns the steps of run runID numbered upto-limit+1 to
// upto in creation order, and how many the run has (store.Store): the
// run's step list numbers its entries 1 to total, so the count is its
// last entry (one Query of one item) and the page one Query of the
// entries in its range and a BatchGetItem of their steps, however long
// the run (README.md § Performance).
func (s *Store) RecentSteps(ctx context.Context, runID string, upto, limit int) ([]stratus.Step, int, error) {
	if err := store.CheckPage(upto, limit); err != nil {
		return nil, 0, err
	}
	what := "recent steps of run " + quote(runID)
	total, err := s.lastSeq(ctx, pkRun+runID, skRunStep)
	if err != nil {
		return nil, 0, wrap(what, err)
	}
	lo, hi := store.PageRange(total, upto, limit)
	if hi < lo {
		return nil, total, nil
	}
	entries, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: map[string]av{":pk": str(pkRun + runID), ":lo": str(skRunStep + pad(lo)), ":hi": str(skRunStep + pad(hi))},
		ConsistentRead:            aws.Bool(true),
	}, 0)
	if err != nil {
		return nil, 0, wrap(what, err)
	}
	steps, err := s.stepsOf(ctx, what, entries)
	return steps, total, err
}

// stepsOf reads the steps the entries of a run's step list name, in the
// entries' order.
func (s *Store) stepsOf(ctx context.Context, what string, entries []item) ([]stratus.Step, error) {
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

// NodeLatest returns each node's latest step in run runID, in creation
// order (store.Store): the run's latest# items (one a node), checked
// against the last entry of its step list, and a BatchGetItem of the
// steps they name, however long the run (README.md § Performance). When
// their counts do not add up (a run with steps from before latest# items
// were kept) it reads the run's steps (ListSteps) and picks each node's
// last: the answer is the same either way.
func (s *Store) NodeLatest(ctx context.Context, runID string) ([]stratus.Step, error) {
	what := "latest step of each node of run " + quote(runID)
	got, ok, err := s.heads(ctx, runID)
	if err != nil {
		return nil, wrap(what, err)
	} else if ok {
		return got, nil
	}
	steps, err := s.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	return store.Heads(steps), nil
}

// heads is NodeLatest from the latest# items; ok=false when they cannot
// answer.
func (s *Store) heads(ctx context.Context, runID string) (got []stratus.Step, ok bool, err error) {
	heads, err := s.query(ctx, pkRun+runID, skLatest, false, 0)
	if err != nil {
		return nil, false, err
	}
	counted := 0
	keys := make([]item, len(heads))
	for i, h := range heads {
		counted += int(h.int("count"))
		keys[i] = stepKey(h.str("tid"))
	}
	if seq, err := s.lastSeq(ctx, pkRun+runID, skRunStep); err != nil || seq != counted {
		return nil, false, err
	} else if seq == 0 {
		return nil, true, nil
	}
	found, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, false, err
	}
	type pick struct {
		st  stratus.Step
		seq int64
	}
	picks := make([]pick, 0, len(keys))
	for _, k := range keys {
		it, present := found[k.str(PartitionKey)]
		if !present || it.int("seq") == 0 {
			return nil, false, nil
		}
		picks = append(picks, pick{decodeStep(it), it.int("seq")})
	}
	slices.SortFunc(picks, func(a, b pick) int { return cmp.Compare(a.seq, b.seq) })
	got = make([]stratus.Step, len(picks))
	for i, p := range picks {
		got[i] = p.st
	}
	return got, true, nil
}

// kindsPrefix starts each member of a latest# item's "kinds" (a string
// set, which holds no empty string; a step's kind may be empty).
const kindsPrefix = "k:"

// skipsAll reports whether q skips every kind a latest# item h says its
// node's steps have ("kinds"): none of them is selected, so LatestSteps
// need not read them. False for an item without kinds (kept before it
// recorded them).
func skipsAll(h item, q store.LatestQuery) bool {
	ss, ok := h["kinds"].(*types.AttributeValueMemberSS)
	if !ok || len(ss.Value) == 0 {
		return false
	}
	for _, k := range ss.Value {
		if !slices.Contains(q.SkipKinds, strings.TrimPrefix(k, kindsPrefix)) {
			return false
		}
	}
	return true
}

// NodesSteps returns the steps of any of nodes in run runID newest first
// (last created first: by their "seq", the run's step list order), at
// most limit (0: all; store.Store), reading one item more per node than
// it returns however long the run: each node's latest# item and its
// steps back by "prev" (NodeSteps), merged by seq. When a node's walk
// ends while more steps are wanted, it checks that the run's latest#
// counts add up to its step list (allKept: a node may have steps from
// before latest# items, older than its walk's end yet newer than other
// nodes' steps), and when they do not — or a walk cannot answer — reads
// the run's steps (ListSteps) and picks, as NodeSteps does. Errors:
// EINVALID for a negative limit.
func (s *Store) NodesSteps(ctx context.Context, runID string, nodes []string, limit int) ([]stratus.Step, error) {
	if err := store.CheckLimit(limit); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	what := fmt.Sprintf("steps of nodes %q in run %q", nodes, runID)
	got, ok, err := s.nodesChains(ctx, runID, nodes, limit)
	if err != nil {
		return nil, wrap(what, err)
	} else if ok {
		return got, nil
	}
	steps, err := s.ListSteps(ctx, runID)
	if err != nil {
		return nil, err
	}
	return newestOf(steps, nodes, limit), nil
}

// newestOf is the steps of steps (a run's, in creation order) whose node
// is one of nodes, newest first, at most limit (0: all): NodeSteps' and
// NodesSteps' answer from a read of the whole run.
func newestOf(steps []stratus.Step, nodes []string, limit int) []stratus.Step {
	var got []stratus.Step
	for i := len(steps) - 1; i >= 0 && (limit == 0 || len(got) < limit); i-- {
		if slices.Contains(nodes, steps[i].Node) {
			got = append(got, steps[i])
		}
	}
	return got
}

// nodesChains is NodesSteps from the nodes' latest# items and their steps'
// "prev"; ok=false when they cannot answer (NodesSteps).
func (s *Store) nodesChains(ctx context.Context, runID string, nodes []string, limit int) (got []stratus.Step, ok bool, err error) {
	type chain struct {
		next  item  // the chain's newest step not taken yet; nil: none
		count int64 // steps the latest# item counts
		taken int64
	}
	var chains []*chain
	for _, node := range slices.Compact(slices.Sorted(slices.Values(nodes))) {
		head, err := s.get(ctx, latestKey(runID, node))
		if err != nil {
			return nil, false, err
		}
		c := &chain{count: head.int("count")}
		if tid := head.str("tid"); tid != "" {
			if c.next, err = s.get(ctx, stepKey(tid)); err != nil {
				return nil, false, err
			} else if c.next == nil || c.next.int("seq") == 0 {
				return nil, false, nil
			}
		}
		chains = append(chains, c)
	}
	// kept: every step of the run was created with its node's latest# item
	// kept, so a walk's end is its node's first step; read (allKept) when
	// the first walk ends while more steps are wanted, since a step of a
	// node from before latest# items could be newer than the other nodes'
	// steps still to come.
	checked := false
	kept := func() (bool, error) {
		if checked {
			return true, nil
		}
		checked = true
		return s.allKept(ctx, runID)
	}
	for limit == 0 || len(got) < limit {
		var c *chain
		for _, d := range chains {
			if d.next != nil && (c == nil || d.next.int("seq") > c.next.int("seq")) {
				c = d
			}
		}
		if c == nil {
			all, err := kept() // each walk reached its node's first kept step
			return got, all, err
		}
		if c.taken++; c.taken > c.count {
			return nil, false, nil // a chain longer than its count: not as written
		}
		got = append(got, decodeStep(c.next))
		prev := c.next.str("prev")
		c.next = nil
		if limit > 0 && len(got) == limit {
			break // nothing is read past what is returned
		}
		if prev != "" {
			if c.next, err = s.get(ctx, stepKey(prev)); err != nil {
				return nil, false, err
			} else if c.next == nil || c.next.int("seq") == 0 {
				return nil, false, nil
			}
		} else if limit == 0 || len(got) < limit {
			if all, err := kept(); err != nil || !all {
				return nil, false, err
			}
		}
	}
	return got, true, nil
}
