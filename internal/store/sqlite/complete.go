package sqlite

import (
	"context"
	"fmt"

	"github.com/stratusflow/stratus"
)

// CompleteAttempt appends final to its attempt's tail and replaces the
// attempt and step records, in one transaction: all three happen or none.
// Errors: as AppendOutput (ECONFLICT for a second Final), UpdateAttempt and
// UpdateStep (ENOTFOUND).
func (s *Store) CompleteAttempt(ctx context.Context, final stratus.OutputEvent, a stratus.Attempt, st stratus.Step) (int, error) {
	row, err := s.spill(final) // before the transaction: see spill
	if err != nil {
		return 0, err
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("complete attempt %d of task %q: begin: %w", a.N, a.TID, err)
	}
	defer tx.Rollback()
	q := s.wq.in(tx)
	if err := s.keepBlob(row); err != nil {
		return 0, err
	}
	seq, err := row.insert(ctx, q)
	if err != nil {
		return 0, err
	}
	if err := updateAttempt(ctx, q, a); err != nil {
		return 0, err
	}
	if err := updateStep(ctx, q, st); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("complete attempt %d of task %q: commit: %w", a.N, a.TID, err)
	}
	return seq, nil
}
