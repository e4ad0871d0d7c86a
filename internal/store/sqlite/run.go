package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

const runColumns = "id, task_id, task_title, flow, status, work_dir, task_path, execution, owner, resumes, max_cost_usd, max_tokens, workspace, created_at, ended_at, resumed_at, active_ms, pruned_at, publication"

// CreateRun inserts r; ECONFLICT if a run with r.ID exists.
func (s *Store) CreateRun(ctx context.Context, r stratus.Run) error {
	ws, err := encodeWorkspace(r.Workspace)
	if err != nil {
		return err
	}
	pub, err := encodeJSON(r.Publication)
	if err != nil {
		return err
	}
	_, err = s.wq.ExecContext(ctx, "INSERT INTO runs ("+runColumns+", spend_kept) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
		r.ID, r.TaskID, r.TaskTitle, r.Flow, r.Status, r.WorkDir, r.TaskPath, r.Execution, r.Owner, r.Resumes, r.MaxCostUSD, r.MaxTokens,
		ws, millis(r.CreatedAt), millis(r.EndedAt), millis(r.ResumedAt), r.ActiveMS, millis(r.PrunedAt), pub)
	if isUniqueViolation(err) {
		return stratus.Errorf(stratus.ECONFLICT, "run %q already exists", r.ID)
	} else if err != nil {
		return fmt.Errorf("create run %q: %w", r.ID, err)
	}
	return nil
}

// GetRun returns the run with id; ENOTFOUND if there is none.
func (s *Store) GetRun(ctx context.Context, id string) (stratus.Run, error) {
	r, err := scanRun(s.rq.QueryRowContext(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Run{}, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", id)
	} else if err != nil {
		return stratus.Run{}, fmt.Errorf("get run %q: %w", id, err)
	}
	return r, nil
}

// UpdateRun replaces Status, Execution, Owner, Resumes, MaxCostUSD,
// MaxTokens, EndedAt, ResumedAt and ActiveMS of run r.ID; ENOTFOUND if
// there is no such run.
func (s *Store) UpdateRun(ctx context.Context, r stratus.Run) error {
	res, err := s.wq.ExecContext(ctx, "UPDATE runs SET status = ?, execution = ?, owner = ?, resumes = ?, max_cost_usd = ?, max_tokens = ?, ended_at = ?, resumed_at = ?, active_ms = ? WHERE id = ?",
		r.Status, r.Execution, r.Owner, r.Resumes, r.MaxCostUSD, r.MaxTokens, millis(r.EndedAt), millis(r.ResumedAt), r.ActiveMS, r.ID)
	if err != nil {
		return fmt.Errorf("update run %q: %w", r.ID, err)
	}
	return mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", r.ID))
}

// SetPublication records run runID's publication (store.Store); ENOTFOUND
// if there is no such run.
func (s *Store) SetPublication(ctx context.Context, runID string, p stratus.Publication) error {
	enc, err := encodeJSON(&p)
	if err != nil {
		return err
	}
	res, err := s.wq.ExecContext(ctx, "UPDATE runs SET publication = ? WHERE id = ?", enc, runID)
	if err != nil {
		return fmt.Errorf("record the publication of run %q: %w", runID, err)
	}
	return mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", runID))
}

// encodeJSON is a JSON column: v as JSON, or "" for nil.
func encodeJSON[T any](v *T) (string, error) {
	if v == nil {
		return "", nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// encodeWorkspace is the workspace column: JSON, or "" for none.
func encodeWorkspace(w *stratus.Workspace) (string, error) {
	if w == nil {
		return "", nil
	}
	b, err := json.Marshal(w)
	return string(b), err
}

// selectWorkspaceSQL and updateWorkspaceSQL run in AdvanceWorkspace's
// transaction (txStatements).
const (
	selectWorkspaceSQL = "SELECT workspace FROM runs WHERE id = ?"
	updateWorkspaceSQL = "UPDATE runs SET workspace = ? WHERE id = ?"
)

// AdvanceWorkspace moves the workspace head of run runID from `from` to
// `to` and appends bundle, in one transaction, if the head is still from
// (store.Store.AdvanceWorkspace). ECONFLICT otherwise; ENOTFOUND for no such
// run or a run without a workspace.
func (s *Store) AdvanceWorkspace(ctx context.Context, runID, from, to, bundle string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("advance workspace of run %q: %w", runID, err)
	}
	defer tx.Rollback()
	var ws string
	q := s.wq.in(tx)
	err = q.QueryRowContext(ctx, selectWorkspaceSQL, runID).Scan(&ws)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && ws == "") {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q has no workspace", runID)
	} else if err != nil {
		return fmt.Errorf("advance workspace of run %q: %w", runID, err)
	}
	var w stratus.Workspace
	if err := json.Unmarshal([]byte(ws), &w); err != nil {
		return fmt.Errorf("run %q: workspace column: %w", runID, err)
	}
	if w.Head != from {
		return stratus.Errorf(stratus.ECONFLICT, "run %q: the workspace head is %s, not %s: another attempt advanced it", runID, w.Head, from)
	}
	w.Head, w.Bundles = to, append(w.Bundles, bundle)
	enc, err := encodeWorkspace(&w)
	if err != nil {
		return err
	}
	if _, err := q.ExecContext(ctx, updateWorkspaceSQL, enc, runID); err != nil {
		return fmt.Errorf("advance workspace of run %q: %w", runID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("advance workspace of run %q: %w", runID, err)
	}
	return nil
}

// ListRuns returns the runs newest first (CreatedAt descending, then id
// descending), at most limit of them (0: all).
func (s *Store) ListRuns(ctx context.Context, limit int) ([]stratus.Run, error) {
	q := "SELECT " + runColumns + " FROM runs ORDER BY created_at DESC, id DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.rq.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var runs []stratus.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// FindRuns returns the runs q selects, newest first (CreatedAt descending,
// then id descending), at most q.Limit of them (0: all).
func (s *Store) FindRuns(ctx context.Context, q store.RunQuery) ([]stratus.Run, error) {
	query := "SELECT " + runColumns + " FROM runs WHERE substr(id, 1, length(?)) = ? AND (? = '' OR task_id = ?) ORDER BY created_at DESC, id DESC"
	if q.Limit > 0 {
		query += fmt.Sprintf(" LIMIT %d", q.Limit)
	}
	rows, err := s.rq.QueryContext(ctx, query, q.IDPrefix, q.IDPrefix, q.TaskID, q.TaskID)
	if err != nil {
		return nil, fmt.Errorf("find runs: %w", err)
	}
	defer rows.Close()
	var runs []stratus.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("find runs: %w", err)
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

func scanRun(row rowScanner) (stratus.Run, error) {
	var r stratus.Run
	var created, ended, resumed, pruned sql.NullInt64
	var ws, pub string
	if err := row.Scan(&r.ID, &r.TaskID, &r.TaskTitle, &r.Flow, &r.Status, &r.WorkDir, &r.TaskPath, &r.Execution, &r.Owner, &r.Resumes,
		&r.MaxCostUSD, &r.MaxTokens, &ws, &created, &ended, &resumed, &r.ActiveMS, &pruned, &pub); err != nil {
		return stratus.Run{}, err
	}
	r.CreatedAt, r.EndedAt, r.ResumedAt, r.PrunedAt = fromMillis(created), fromMillis(ended), fromMillis(resumed), fromMillis(pruned)
	if ws != "" {
		r.Workspace = new(stratus.Workspace)
		if err := json.Unmarshal([]byte(ws), r.Workspace); err != nil {
			return stratus.Run{}, fmt.Errorf("run %q: workspace column: %w", r.ID, err)
		}
	}
	if pub != "" {
		r.Publication = new(stratus.Publication)
		if err := json.Unmarshal([]byte(pub), r.Publication); err != nil {
			return stratus.Run{}, fmt.Errorf("run %q: publication column: %w", r.ID, err)
		}
	}
	return r, nil
}

// mustAffect returns notFound when res changed no row.
func mustAffect(res sql.Result, notFound error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("rows affected: %w", err)
	}
	if n == 0 {
		return notFound
	}
	return nil
}
