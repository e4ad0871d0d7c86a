package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stratusflow/stratus"
)

const runColumns = "id, task_id, task_title, flow, status, work_dir, task_path, execution, owner, resumes, max_cost_usd, max_tokens, created_at, ended_at"

// CreateRun inserts r; ECONFLICT if a run with r.ID exists.
func (s *Store) CreateRun(ctx context.Context, r stratus.Run) error {
	_, err := s.w.ExecContext(ctx, "INSERT INTO runs ("+runColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		r.ID, r.TaskID, r.TaskTitle, r.Flow, r.Status, r.WorkDir, r.TaskPath, r.Execution, r.Owner, r.Resumes, r.MaxCostUSD, r.MaxTokens,
		millis(r.CreatedAt), millis(r.EndedAt))
	if isUniqueViolation(err) {
		return stratus.Errorf(stratus.ECONFLICT, "run %q already exists", r.ID)
	} else if err != nil {
		return fmt.Errorf("create run %q: %w", r.ID, err)
	}
	return nil
}

// GetRun returns the run with id; ENOTFOUND if there is none.
func (s *Store) GetRun(ctx context.Context, id string) (stratus.Run, error) {
	r, err := scanRun(s.r.QueryRowContext(ctx, "SELECT "+runColumns+" FROM runs WHERE id = ?", id))
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Run{}, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", id)
	} else if err != nil {
		return stratus.Run{}, fmt.Errorf("get run %q: %w", id, err)
	}
	return r, nil
}

// UpdateRun replaces Status, Execution, Owner, Resumes, MaxCostUSD,
// MaxTokens and EndedAt of run r.ID; ENOTFOUND if there is no such run.
func (s *Store) UpdateRun(ctx context.Context, r stratus.Run) error {
	res, err := s.w.ExecContext(ctx, "UPDATE runs SET status = ?, execution = ?, owner = ?, resumes = ?, max_cost_usd = ?, max_tokens = ?, ended_at = ? WHERE id = ?",
		r.Status, r.Execution, r.Owner, r.Resumes, r.MaxCostUSD, r.MaxTokens, millis(r.EndedAt), r.ID)
	if err != nil {
		return fmt.Errorf("update run %q: %w", r.ID, err)
	}
	return mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", r.ID))
}

// ListRuns returns the runs newest first (CreatedAt descending, then id
// descending), at most limit of them (0: all).
func (s *Store) ListRuns(ctx context.Context, limit int) ([]stratus.Run, error) {
	q := "SELECT " + runColumns + " FROM runs ORDER BY created_at DESC, id DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := s.r.QueryContext(ctx, q)
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

func scanRun(row rowScanner) (stratus.Run, error) {
	var r stratus.Run
	var created, ended sql.NullInt64
	if err := row.Scan(&r.ID, &r.TaskID, &r.TaskTitle, &r.Flow, &r.Status, &r.WorkDir, &r.TaskPath, &r.Execution, &r.Owner, &r.Resumes,
		&r.MaxCostUSD, &r.MaxTokens, &created, &ended); err != nil {
		return stratus.Run{}, err
	}
	r.CreatedAt, r.EndedAt = fromMillis(created), fromMillis(ended)
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
