package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

const stepColumns = "tid, run_id, node, kind, visit, step_ref, dedup_key, task_token, status, verdict, value, input, created_at, ended_at"

// CreateStep inserts st unless a step with the same non-empty DedupKey
// exists, in which case it returns that step and created=false. An empty
// DedupKey never matches. ECONFLICT if another step already has st.TID.
// The look-up and the insert run in one BEGIN IMMEDIATE transaction, and
// a unique index on dedup_key backs it.
func (s *Store) CreateStep(ctx context.Context, st stratus.Step) (got stratus.Step, created bool, err error) {
	return s.createStep(ctx, fmt.Sprintf("create step %q", st.TID), st.DedupKey, func(*prepared) (stratus.Step, error) { return st, nil })
}

// CreateNextStep creates the next visit of node in run runID
// (store.Store). The writer's BEGIN IMMEDIATE transaction is the
// condition on the node's count: it holds the file's write lock, which
// every connection of every process writing the file takes in turn, from
// reading the node's highest visit (one seek of steps_run_node_visit) to
// the insert of the step numbered one more, so no other step of the
// node can come between. number is called once.
func (s *Store) CreateNextStep(ctx context.Context, runID, node, dedupKey string, number func(visit int) (stratus.Step, error)) (stratus.Step, bool, error) {
	what := fmt.Sprintf("create the next step of node %q in run %q", node, runID)
	return s.createStep(ctx, what, dedupKey, func(q *prepared) (stratus.Step, error) {
		var last int
		if err := q.QueryRowContext(ctx, lastVisitSQL, runID, node).Scan(&last); err != nil {
			return stratus.Step{}, fmt.Errorf("%s: read its last visit: %w", what, err)
		}
		st, err := number(last + 1)
		if err != nil {
			return stratus.Step{}, err
		}
		return st, store.CheckNumbered(st, runID, node, dedupKey, last+1)
	})
}

// createStep inserts the step build returns, in one transaction after
// the look-up of dedupKey (not when it names a step: that one is
// returned, created=false).
func (s *Store) createStep(ctx context.Context, what, dedupKey string, build func(q *prepared) (stratus.Step, error)) (got stratus.Step, created bool, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return stratus.Step{}, false, fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	q := s.wq.in(tx)

	if dedupKey != "" {
		got, err := scanStep(q.QueryRowContext(ctx, selectStepByDedupSQL, dedupKey))
		if err == nil {
			return got, false, nil
		} else if !errors.Is(err, sql.ErrNoRows) {
			return stratus.Step{}, false, fmt.Errorf("%s: look up dedup key: %w", what, err)
		}
	}
	st, err := build(q)
	if err != nil {
		return stratus.Step{}, false, err
	}
	_, err = q.ExecContext(ctx, insertStepSQL,
		st.TID, st.RunID, st.Node, st.Kind, st.Visit, st.StepRef, st.DedupKey, st.TaskToken, st.Status, st.Verdict,
		blob(st.Value), blob(st.Input), millis(st.CreatedAt), millis(st.EndedAt))
	if isUniqueViolation(err) {
		return stratus.Step{}, false, stratus.Errorf(stratus.ECONFLICT, "step %q already exists", st.TID)
	} else if err != nil {
		return stratus.Step{}, false, fmt.Errorf("create step %q: %w", st.TID, err)
	}
	if err := tx.Commit(); err != nil {
		return stratus.Step{}, false, fmt.Errorf("create step %q: commit: %w", st.TID, err)
	}
	st.CreatedAt, st.EndedAt = stored(st.CreatedAt), stored(st.EndedAt)
	return st, true, nil
}

// GetStep returns the step with tid; ENOTFOUND if there is none.
func (s *Store) GetStep(ctx context.Context, tid string) (stratus.Step, error) {
	st, err := scanStep(s.rq.QueryRowContext(ctx, "SELECT "+stepColumns+" FROM steps WHERE tid = ?", tid))
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Step{}, stratus.Errorf(stratus.ENOTFOUND, "step %q not found", tid)
	} else if err != nil {
		return stratus.Step{}, fmt.Errorf("get step %q: %w", tid, err)
	}
	return st, nil
}

// ListSteps returns the steps of run runID in creation order; none (and
// no error) for a run without steps or an unknown run.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]stratus.Step, error) {
	return s.querySteps(ctx, fmt.Sprintf("list steps of run %q", runID), "SELECT "+stepColumns+" FROM steps WHERE run_id = ? ORDER BY seq", runID)
}

// querySteps runs query and decodes its rows, each a step (stepColumns);
// errors say what was being done.
func (s *Store) querySteps(ctx context.Context, what, query string, args ...any) ([]stratus.Step, error) {
	rows, err := s.rq.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var steps []stratus.Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		steps = append(steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return steps, nil
}

// CountVisits returns how many steps of node run runID has (0 for an
// unknown run or node). A node's steps are visits 1 to n (store.Store),
// so the count is the highest visit: the last entry of the node's range
// of the steps_run_node_visit index, one seek however long the run
// (README.md § Performance), where COUNT(*) read an entry a visit.
func (s *Store) CountVisits(ctx context.Context, runID, node string) (int, error) {
	var n int
	err := s.rq.QueryRowContext(ctx, lastVisitSQL, runID, node).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count visits of node %q in run %q: %w", node, runID, err)
	}
	return n, nil
}

// UpdateStep replaces Status, Verdict, Value and EndedAt of step st.TID;
// ENOTFOUND if there is no such step.
func (s *Store) UpdateStep(ctx context.Context, st stratus.Step) error {
	return updateStep(ctx, s.wq, st)
}

// UpdateStepFrom updates st on condition that its status is still from
// (store.Store): one conditional statement.
func (s *Store) UpdateStepFrom(ctx context.Context, st stratus.Step, from string) error {
	res, err := s.wq.ExecContext(ctx, updateStepSQL+" AND status = ?",
		st.Status, st.Verdict, blob(st.Value), millis(st.EndedAt), st.TID, from)
	if err != nil {
		return fmt.Errorf("update step %q: %w", st.TID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("update step %q: %w", st.TID, err)
	} else if n == 1 {
		return nil
	}
	cur, err := s.GetStep(ctx, st.TID)
	if err != nil {
		return err
	}
	return stratus.Errorf(stratus.ECONFLICT, "step %q is %s, no longer %s: another writer moved it on first", st.TID, cur.Status, from)
}

// ReenterStep makes step tid running again for a new entry of its Task
// state unless entry is already its latest (store.Store). The update is
// one conditional statement, so two deliveries of one entry cannot both
// reenter.
func (s *Store) ReenterStep(ctx context.Context, tid, token, entry string) (stratus.Step, bool, error) {
	res, err := s.wq.ExecContext(ctx, "UPDATE steps SET task_token = ?, status = ?, ended_at = NULL, entry = ? WHERE tid = ? AND entry <> ?",
		token, stratus.StepRunning, entry, tid, entry)
	if err != nil {
		return stratus.Step{}, false, fmt.Errorf("reenter step %q: %w", tid, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return stratus.Step{}, false, fmt.Errorf("reenter step %q: %w", tid, err)
	}
	st, err := s.GetStep(ctx, tid)
	return st, n > 0, err
}

// updateStepSQL, selectStepByDedupSQL, insertStepSQL and lastVisitSQL
// run in transactions (txStatements).
const (
	lastVisitSQL         = "SELECT COALESCE(MAX(visit), 0) FROM steps WHERE run_id = ? AND node = ?"
	updateStepSQL        = "UPDATE steps SET status = ?, verdict = ?, value = ?, ended_at = ? WHERE tid = ?"
	selectStepByDedupSQL = "SELECT " + stepColumns + " FROM steps WHERE dedup_key = ? AND dedup_key <> ''" // the partial index steps_dedup_key: without the second term, a scan of every step
	insertStepSQL        = "INSERT INTO steps (" + stepColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

func updateStep(ctx context.Context, s querier, st stratus.Step) error {
	res, err := s.ExecContext(ctx, updateStepSQL,
		st.Status, st.Verdict, blob(st.Value), millis(st.EndedAt), st.TID)
	if err != nil {
		return fmt.Errorf("update step %q: %w", st.TID, err)
	}
	return mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "step %q not found", st.TID))
}

func scanStep(row rowScanner) (stratus.Step, error) {
	var st stratus.Step
	var value, input []byte
	var created, ended sql.NullInt64
	if err := row.Scan(&st.TID, &st.RunID, &st.Node, &st.Kind, &st.Visit, &st.StepRef, &st.DedupKey, &st.TaskToken,
		&st.Status, &st.Verdict, &value, &input, &created, &ended); err != nil {
		return stratus.Step{}, err
	}
	if len(value) > 0 {
		st.Value = value
	}
	if len(input) > 0 {
		st.Input = input
	}
	st.CreatedAt, st.EndedAt = fromMillis(created), fromMillis(ended)
	return st, nil
}

// LatestSteps returns, per node of run runID, its latest step among those
// q selects, in creation order, reading no step it does not return
// (README.md § Performance): a skip scan of index steps_run_node_kind_status
// visits each distinct (node, kind) of the run — a handful, however long the
// run — and seeks the last entry of q's status in each; only a newer entry
// that q's verdict or tid excludes is stepped over.
func (s *Store) LatestSteps(ctx context.Context, runID string, q store.LatestQuery) ([]stratus.Step, error) {
	args := []any{runID, q.Status, q.ExceptTID}
	skip := func(col string, vals []string) string {
		var b strings.Builder
		for _, v := range vals {
			b.WriteString(" AND " + col + " <> ?")
			args = append(args, v)
		}
		return b.String()
	}
	verdicts := skip("verdict", q.SkipVerdicts)
	kinds := skip("kind", q.SkipKinds)
	// nodes: the run's distinct nodes, each one index seek past the last;
	// pairs: each node's distinct kinds, likewise; latest: per pair not
	// skipped, the last step with the status (newest first, the verdict
	// and tid filters applied as the seek walks back).
	query := `WITH RECURSIVE
nodes(node) AS (
	SELECT (SELECT MIN(node) FROM steps WHERE run_id = ?1)
	UNION ALL
	SELECT (SELECT MIN(node) FROM steps WHERE run_id = ?1 AND node > nodes.node) FROM nodes WHERE nodes.node IS NOT NULL
),
pairs(node, kind) AS (
	SELECT node, (SELECT MIN(kind) FROM steps WHERE run_id = ?1 AND node = nodes.node) FROM nodes WHERE node IS NOT NULL
	UNION ALL
	SELECT node, (SELECT MIN(kind) FROM steps WHERE run_id = ?1 AND node = pairs.node AND kind > pairs.kind) FROM pairs WHERE kind IS NOT NULL
),
latest(node, seq) AS (
	SELECT node, (SELECT seq FROM steps WHERE run_id = ?1 AND node = pairs.node AND kind = pairs.kind AND status = ?2 AND tid <> ?3` + verdicts + `
		ORDER BY seq DESC LIMIT 1)
	FROM pairs WHERE kind IS NOT NULL` + kinds + `
)
SELECT ` + stepColumns + ` FROM steps WHERE seq IN (SELECT MAX(seq) FROM latest GROUP BY node) ORDER BY seq`
	return s.querySteps(ctx, fmt.Sprintf("latest steps of run %q", runID), query, args...)
}

// NodeSteps returns the steps of node in run runID newest first (by seq,
// the creation order), at most limit (0: all; store.Store): NodesSteps of
// the one node, a read of its entries of index steps_run_node_visit and
// of just the rows it returns, however long the run (README.md §
// Performance).
func (s *Store) NodeSteps(ctx context.Context, runID, node string, limit int) ([]stratus.Step, error) {
	return s.NodesSteps(ctx, runID, []string{node}, limit)
}

// RecentSteps returns the steps of run runID numbered upto-limit+1 to
// upto in creation order, and how many the run has (store.Store). A
// node's steps are its visits 1 to n (store.Store.CreateNextStep), so
// the count is the sum of each node's highest visit: a skip scan of index
// steps_run_node_visit, one seek a node, however long the run. The
// page's seqs are read from index steps_run newest first, skipping the
// steps after upto, and only the page's rows from the table (README.md
// § Performance).
func (s *Store) RecentSteps(ctx context.Context, runID string, upto, limit int) ([]stratus.Step, int, error) {
	if err := store.CheckPage(upto, limit); err != nil {
		return nil, 0, err
	}
	what := fmt.Sprintf("recent steps of run %q", runID)
	var total int
	if err := s.rq.QueryRowContext(ctx, countStepsSQL, runID).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("%s: count them: %w", what, err)
	}
	lo, hi := store.PageRange(total, upto, limit)
	if hi < lo {
		return nil, total, nil
	}
	steps, err := s.querySteps(ctx, what, "SELECT "+stepColumns+" FROM steps WHERE seq IN (SELECT seq FROM steps INDEXED BY steps_run WHERE run_id = ? ORDER BY seq DESC LIMIT ? OFFSET ?) ORDER BY seq",
		runID, hi-lo+1, total-hi)
	return steps, total, err
}

// nodesSQL is the recursive table nodes(node): the distinct nodes of run
// ?1, each one seek of index steps_run_node_visit past the last.
const nodesSQL = `WITH RECURSIVE
nodes(node) AS (
	SELECT (SELECT MIN(node) FROM steps INDEXED BY steps_run_node_visit WHERE run_id = ?1)
	UNION ALL
	SELECT (SELECT MIN(node) FROM steps INDEXED BY steps_run_node_visit WHERE run_id = ?1 AND node > nodes.node) FROM nodes WHERE nodes.node IS NOT NULL
)
`

// countStepsSQL counts run ?1's steps: the sum of its nodes' highest
// visits.
const countStepsSQL = nodesSQL + `SELECT COALESCE(SUM((SELECT MAX(visit) FROM steps INDEXED BY steps_run_node_visit WHERE run_id = ?1 AND node = nodes.node)), 0) FROM nodes WHERE node IS NOT NULL`

// NodeLatest returns each node's latest step in run runID, in creation
// order (store.Store): a skip scan of index steps_run_node_visit visits
// each distinct node of the run — a handful, however long the run — and
// seeks the last entry of its range, its highest visit: its last created
// step, a node's visits being numbered in creation order
// (store.Store.CreateNextStep). Only those steps' rows are read
// (README.md § Performance).
func (s *Store) NodeLatest(ctx context.Context, runID string) ([]stratus.Step, error) {
	query := nodesSQL + `SELECT ` + stepColumns + ` FROM steps WHERE seq IN (
	SELECT (SELECT seq FROM steps INDEXED BY steps_run_node_visit WHERE run_id = ?1 AND node = nodes.node ORDER BY visit DESC, seq DESC LIMIT 1) FROM nodes WHERE node IS NOT NULL
) ORDER BY seq`
	return s.querySteps(ctx, fmt.Sprintf("latest step of each node of run %q", runID), query, runID)
}

// NodesSteps returns the steps of any of nodes in run runID newest first
// (by seq), at most limit (0: all; store.Store): NodeSteps' seek of
// steps_run_node_visit, once per node.
func (s *Store) NodesSteps(ctx context.Context, runID string, nodes []string, limit int) ([]stratus.Step, error) {
	if err := store.CheckLimit(limit); err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, nil
	}
	if limit == 0 {
		limit = -1 // SQLite: no limit
	}
	args := []any{runID}
	for _, n := range nodes {
		args = append(args, n)
	}
	args = append(args, limit)
	return s.querySteps(ctx, fmt.Sprintf("steps of nodes %q in run %q", nodes, runID), nodesStepsSQL(len(nodes)), args...)
}

// nodesStepsSQL selects NodesSteps' steps of n nodes: run_id, the n
// nodes, limit (-1: all).
func nodesStepsSQL(n int) string {
	return "SELECT " + stepColumns + " FROM steps WHERE seq IN (SELECT seq FROM steps INDEXED BY steps_run_node_visit WHERE run_id = ? AND node IN (?" +
		strings.Repeat(", ?", n-1) + ") ORDER BY seq DESC LIMIT ?) ORDER BY seq DESC"
}
