package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/stratusflow/stratus"
)

// AppendDegradation appends d to its run's degradation record.
func (s *Store) AppendDegradation(ctx context.Context, d stratus.Degradation) error {
	_, err := s.wq.ExecContext(ctx,
		"INSERT INTO degradations (run_id, step_ref, attempt, tool, error, fallback, note, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		d.RunID, d.StepRef, d.Attempt, d.Tool, d.Error, d.Fallback, d.Note, millis(d.At))
	if err != nil {
		return fmt.Errorf("append degradation of run %q: %w", d.RunID, err)
	}
	return nil
}

// ListDegradations returns a run's degradations in append order.
func (s *Store) ListDegradations(ctx context.Context, runID string) ([]stratus.Degradation, error) {
	rows, err := s.rq.QueryContext(ctx,
		"SELECT step_ref, attempt, tool, error, fallback, note, at FROM degradations WHERE run_id = ? ORDER BY seq", runID)
	if err != nil {
		return nil, fmt.Errorf("list degradations of run %q: %w", runID, err)
	}
	defer rows.Close()
	var out []stratus.Degradation
	for rows.Next() {
		d := stratus.Degradation{RunID: runID}
		var at sql.NullInt64
		if err := rows.Scan(&d.StepRef, &d.Attempt, &d.Tool, &d.Error, &d.Fallback, &d.Note, &at); err != nil {
			return nil, fmt.Errorf("list degradations of run %q: %w", runID, err)
		}
		d.At = fromMillis(at)
		out = append(out, d)
	}
	return out, rows.Err()
}

// PutRenderSize records an agent's latest system-prompt size.
func (s *Store) PutRenderSize(ctx context.Context, r stratus.RenderSize) error {
	_, err := s.wq.ExecContext(ctx,
		"INSERT INTO render_sizes (agent, bytes, at) VALUES (?, ?, ?) ON CONFLICT (agent) DO UPDATE SET bytes = excluded.bytes, at = excluded.at",
		r.Agent, r.Bytes, millis(r.At))
	if err != nil {
		return fmt.Errorf("put render size of agent %q: %w", r.Agent, err)
	}
	return nil
}

// GetRenderSize returns an agent's latest system-prompt size; ENOTFOUND if none.
func (s *Store) GetRenderSize(ctx context.Context, agent string) (stratus.RenderSize, error) {
	r := stratus.RenderSize{Agent: agent}
	var at sql.NullInt64
	err := s.rq.QueryRowContext(ctx, "SELECT bytes, at FROM render_sizes WHERE agent = ?", agent).Scan(&r.Bytes, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.RenderSize{}, stratus.Errorf(stratus.ENOTFOUND, "agent %q has no observed render size", agent)
	} else if err != nil {
		return stratus.RenderSize{}, fmt.Errorf("get render size of agent %q: %w", agent, err)
	}
	r.At = fromMillis(at)
	return r, nil
}
