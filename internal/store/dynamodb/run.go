package dynamodb

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

func runKey(id string) item { return key(pkRun+id, skRun) }

// CreateRun inserts r; ECONFLICT if a run with r.ID exists.
func (s *Store) CreateRun(ctx context.Context, r stratus.Run) error {
	it, entry, err := runItems(r)
	if err != nil {
		return err
	}
	// The run and its entry in the run list, in one transaction.
	err = s.transact(ctx, s.createTx(it), s.createTx(entry))
	return createRunErr(r, it, err)
}

// createRunErr maps the error of a transaction whose first item created
// run item it: nil when the run exists because this very write made it
// (the SDK retried the transaction after it had committed), ECONFLICT when
// another did.
func createRunErr(r stratus.Run, it item, err error) error {
	codes, olds, canceledTx := canceled(err)
	switch {
	case err == nil:
		return nil
	case canceledTx && reason(codes, 0) == codeConditionFailed && mine(olds[0], it.str(attrWID)):
		return nil // the SDK retried this transaction after it had committed
	case canceledTx && reason(codes, 0) == codeConditionFailed:
		return stratus.Errorf(stratus.ECONFLICT, "run %q already exists (DynamoDB ConditionalCheckFailedException)", r.ID)
	}
	return wrap("create run "+quote(r.ID), err)
}

// runItems are the items CreateRun writes: the run and its entry in the
// run list.
func runItems(r stratus.Run) (it, entry item, err error) {
	it = runKey(r.ID).setAll(map[string]av{
		attrRecord: str("run"), attrWID: str(newWID()),
		"id": str(r.ID), "task_id": text(r.TaskID), "task_title": text(r.TaskTitle), "flow": text(r.Flow),
		"status": text(r.Status), "work_dir": text(r.WorkDir), "task_path": text(r.TaskPath), "execution": text(r.Execution),
		"owner": text(r.Owner), "resumes": num(int64(r.Resumes)),
		"max_cost_usd": capCost(r.MaxCostUSD), "max_tokens": num(r.MaxTokens),
		"created_at": millis(r.CreatedAt), "ended_at": millis(r.EndedAt), "pruned_at": millis(r.PrunedAt),
		"resumed_at": millis(r.ResumedAt), "active_ms": num(r.ActiveMS),
		attrCounted:   &types.AttributeValueMemberBOOL{Value: true},
		attrSpendKept: boolean(true), attrSpendCost: num(0), attrSpendTokens: num(0), attrSpendUnpriced: num(0),
	})
	if w := r.Workspace; w != nil {
		b, err := json.Marshal(w)
		if err != nil {
			return nil, nil, err
		}
		it.set("workspace", str(string(b)))
		it.set("ws_head", str(w.Head))
	}
	if p := r.Publication; p != nil {
		b, err := json.Marshal(p)
		if err != nil {
			return nil, nil, err
		}
		it.set("publication", str(string(b)))
	}
	entry = key(pkRuns, runListKey(r)).setAll(map[string]av{
		attrRecord: str("run_entry"), attrWID: it[attrWID], "id": str(r.ID),
	})
	return it, entry, nil
}

// runListKey orders the run list: creation time (UTC milliseconds, padded
// to 15 digits) then the id, so that a reverse query is newest first.
func runListKey(r stratus.Run) string {
	var ms int64
	if !r.CreatedAt.IsZero() {
		ms = r.CreatedAt.UnixMilli()
	}
	return fmt.Sprintf("%015d#%s", ms, r.ID)
}

// ListRuns returns the runs newest first (CreatedAt descending, then id
// descending), at most limit of them (0: all): a query of the run list
// partition, then a batch read of the runs.
func (s *Store) ListRuns(ctx context.Context, limit int) ([]stratus.Run, error) {
	entries, err := s.query(ctx, pkRuns, "0", true, limit) // every key starts with a 0 digit of its padded time
	if err != nil {
		return nil, wrap("list runs", err)
	}
	keys := make([]item, len(entries))
	for i, e := range entries {
		keys[i] = runKey(e.str("id"))
	}
	found, err := s.batchGet(ctx, keys)
	if err != nil {
		return nil, wrap("list runs", err)
	}
	runs := make([]stratus.Run, 0, len(entries))
	for _, e := range entries {
		if it, ok := found[pkRun+e.str("id")]; ok {
			runs = append(runs, decodeRun(it))
		}
	}
	return runs, nil
}

// FindRuns returns the runs q selects, newest first (CreatedAt descending,
// then id descending), at most q.Limit of them (0: all): the run list
// partition's entries, whose id is matched against q.IDPrefix, then the
// runs of those that match, read in batches until q.Limit matched (the
// task id is on the run, not its entry).
func (s *Store) FindRuns(ctx context.Context, q store.RunQuery) ([]stratus.Run, error) {
	entries, err := s.query(ctx, pkRuns, "0", true, 0)
	if err != nil {
		return nil, wrap("find runs", err)
	}
	var ids []string
	for _, e := range entries {
		if id := e.str("id"); strings.HasPrefix(id, q.IDPrefix) {
			ids = append(ids, id)
		}
	}
	var runs []stratus.Run
	for len(ids) > 0 && (q.Limit <= 0 || len(runs) < q.Limit) {
		n := len(ids)
		if q.Limit > 0 {
			n = min(n, max(q.Limit-len(runs), 25))
		}
		keys := make([]item, n)
		for i, id := range ids[:n] {
			keys[i] = runKey(id)
		}
		found, err := s.batchGet(ctx, keys)
		if err != nil {
			return nil, wrap("find runs", err)
		}
		for _, id := range ids[:n] {
			if it, ok := found[pkRun+id]; ok {
				if r := decodeRun(it); q.Selects(r) && (q.Limit <= 0 || len(runs) < q.Limit) {
					runs = append(runs, r)
				}
			}
		}
		ids = ids[n:]
	}
	return runs, nil
}

// GetRun returns the run with id; ENOTFOUND if there is none.
func (s *Store) GetRun(ctx context.Context, id string) (stratus.Run, error) {
	it, err := s.get(ctx, runKey(id))
	if err != nil {
		return stratus.Run{}, wrap("get run "+quote(id), err)
	} else if it == nil {
		return stratus.Run{}, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", id)
	}
	return decodeRun(it), nil
}

func decodeRun(it item) stratus.Run {
	r := stratus.Run{
		ID: it.str("id"), TaskID: it.str("task_id"), TaskTitle: it.str("task_title"), Flow: it.str("flow"),
		Status: it.str("status"), WorkDir: it.str("work_dir"), TaskPath: it.str("task_path"), Execution: it.str("execution"),
		Owner: it.str("owner"), Resumes: int(it.int("resumes")),
		MaxTokens: it.int("max_tokens"),
		CreatedAt: it.time("created_at"), EndedAt: it.time("ended_at"), PrunedAt: it.time("pruned_at"),
		ResumedAt: it.time("resumed_at"), ActiveMS: it.int("active_ms"),
	}
	if c := it.float("max_cost_usd"); c != nil {
		r.MaxCostUSD = *c
	}
	if ws := it.str("workspace"); ws != "" {
		r.Workspace = new(stratus.Workspace)
		if json.Unmarshal([]byte(ws), r.Workspace) != nil {
			r.Workspace = nil // written by this package only; unreadable means none
		}
	}
	if p := it.str("publication"); p != "" {
		r.Publication = new(stratus.Publication)
		if json.Unmarshal([]byte(p), r.Publication) != nil {
			r.Publication = nil
		}
	}
	return r
}

// SetPublication records run runID's publication (store.Store): one
// UpdateItem conditioned on the run's existence. ENOTFOUND if there is no
// such run.
func (s *Store) SetPublication(ctx context.Context, runID string, p stratus.Publication) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: runKey(runID),
		UpdateExpression:          aws.String("SET #pub = :pub"),
		ConditionExpression:       aws.String("attribute_exists(#id)"),
		ExpressionAttributeNames:  map[string]string{"#pub": "publication", "#id": "id"},
		ExpressionAttributeValues: map[string]av{":pub": str(string(b))},
	})
	if _, ok := conditionFailed(err); ok {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q not found (DynamoDB ConditionalCheckFailedException)", runID)
	} else if err != nil {
		return wrap("record the publication of run "+quote(runID), err)
	}
	return nil
}

// AdvanceWorkspace moves the workspace head of run runID from `from` to
// `to` and appends bundle if the head is still from: a read, then an
// UpdateItem conditioned on the ws_head attribute (store.Store). ECONFLICT
// when the head moved; ENOTFOUND for no such run or a run without a
// workspace.
func (s *Store) AdvanceWorkspace(ctx context.Context, runID, from, to, bundle string) error {
	it, err := s.get(ctx, runKey(runID))
	if err != nil {
		return wrap("advance workspace of run "+quote(runID), err)
	}
	r := decodeRun(it)
	if it == nil || r.Workspace == nil {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q has no workspace", runID)
	}
	w := *r.Workspace
	if w.Head != from {
		return stratus.Errorf(stratus.ECONFLICT, "run %q: the workspace head is %s, not %s: another attempt advanced it", runID, w.Head, from)
	}
	w.Head, w.Bundles = to, append(w.Bundles, bundle)
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	_, err = s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: runKey(runID),
		UpdateExpression:          aws.String("SET #ws = :ws, #head = :to"),
		ConditionExpression:       aws.String("#head = :from"),
		ExpressionAttributeNames:  map[string]string{"#ws": "workspace", "#head": "ws_head"},
		ExpressionAttributeValues: map[string]av{":ws": str(string(b)), ":to": str(to), ":from": str(from)},
	})
	if _, ok := conditionFailed(err); ok {
		return stratus.Errorf(stratus.ECONFLICT, "run %q: the workspace head is no longer %s: another attempt advanced it (DynamoDB ConditionalCheckFailedException)", runID, from)
	} else if err != nil {
		return wrap("advance workspace of run "+quote(runID), err)
	}
	return nil
}

// capCost is a cost cap attribute: a Number, absent for 0 (no cap).
func capCost(c float64) av {
	if c == 0 {
		return nil
	}
	return float(&c)
}

// UpdateRun replaces Status, Execution, Owner, Resumes, the caps, EndedAt,
// ResumedAt and ActiveMS of run r.ID; ENOTFOUND if there is no such run.
func (s *Store) UpdateRun(ctx context.Context, r stratus.Run) error {
	missing, err := s.apply(ctx, runUpdate(r))
	if err != nil {
		return wrap("update run "+quote(r.ID), err)
	} else if missing {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q not found (DynamoDB ConditionalCheckFailedException)", r.ID)
	}
	return nil
}

// UpdateRunUnlessResumed is UpdateRun on condition that the stored run's
// resume count is still r.Resumes, in one conditional write: the end of an
// execution, recorded by a process that read the run before a resume made
// it running again under a new execution (the events function, a
// follower: lifecycle.Finish), never overwrites the resumed run — the
// resume's own write (UpdateRunLocked) counts one more. Errors: ENOTFOUND
// for no such run; ECONFLICT naming the count found when the run was
// resumed since (nothing written).
func (s *Store) UpdateRunUnlessResumed(ctx context.Context, r stratus.Run) error {
	u := runUpdate(r)
	if err := checkSize(u.k, u.set); err != nil {
		return err
	}
	expr, cond, names, values := u.expr()
	names["#seen_resumes"] = "resumes"
	if values == nil {
		values = map[string]av{}
	}
	values[":seen_resumes"] = num(int64(r.Resumes))
	if r.Resumes == 0 {
		cond += " AND (attribute_not_exists(#seen_resumes) OR #seen_resumes = :seen_resumes)"
	} else {
		cond += " AND #seen_resumes = :seen_resumes"
	}
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: u.k, UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if _, failed := conditionFailed(err); failed {
		cur, gerr := s.GetRun(ctx, r.ID)
		if gerr != nil {
			return gerr
		}
		return stratus.Errorf(stratus.ECONFLICT, "run %q was resumed (%d times, not %d) since it was read: it is %s, execution %s; not written (DynamoDB ConditionalCheckFailedException)",
			r.ID, cur.Resumes, r.Resumes, cur.Status, cur.Execution)
	} else if err != nil {
		return wrap("update run "+quote(r.ID), err)
	}
	return nil
}

// EndingStore is the store a run's end is recorded through
// (lifecycle.Finish) by a process that may have read the run before a
// resume: its UpdateRun is UpdateRunUnlessResumed.
type EndingStore struct{ *Store }

// UpdateRun is UpdateRunUnlessResumed.
func (s EndingStore) UpdateRun(ctx context.Context, r stratus.Run) error {
	return s.Store.UpdateRunUnlessResumed(ctx, r)
}

// runUpdate is UpdateRun's update of run r.
func runUpdate(r stratus.Run) update {
	return update{runKey(r.ID), map[string]av{
		"status": text(r.Status), "execution": text(r.Execution), "owner": text(r.Owner), "resumes": num(int64(r.Resumes)),
		"max_cost_usd": capCost(r.MaxCostUSD), "max_tokens": num(r.MaxTokens),
		"ended_at": millis(r.EndedAt), "resumed_at": millis(r.ResumedAt), "active_ms": num(r.ActiveMS),
	}}
}
