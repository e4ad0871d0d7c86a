package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/stratusflow/stratus"
)

// pruneRunSQL removes what a run recorded besides itself, in one
// transaction (PruneRun).
var pruneRunSQL = []string{
	"DELETE FROM outputs WHERE tid IN (SELECT tid FROM steps WHERE run_id = ?1)",
	"DELETE FROM attempts WHERE tid IN (SELECT tid FROM steps WHERE run_id = ?1)",
	"DELETE FROM handles WHERE tid IN (SELECT tid FROM steps WHERE run_id = ?1)",
	"DELETE FROM degradations WHERE run_id = ?1",
	"DELETE FROM steps WHERE run_id = ?1",
}

// PruneRun deletes run runID's steps, attempts, output tails, handles and
// degradations and sets its pruned_at, in one transaction, if the run's
// status is terminal (store.Store.PruneRun; docs/security.md § Retention).
// A blob file no remaining output names is removed inside the same
// transaction: a writer naming a blob checks the file is there inside its
// own (keepBlob), so the two never cross. ENOTFOUND for no such run;
// ECONFLICT for a run not ended.
func (s *Store) PruneRun(ctx context.Context, runID string, at time.Time) error {
	what := fmt.Sprintf("prune run %q", runID)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	var status string
	err = tx.QueryRowContext(ctx, "SELECT status FROM runs WHERE id = ?", runID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q not found", runID)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !stratus.RunTerminal(status) {
		return stratus.Errorf(stratus.ECONFLICT, "run %q is %s; only a run that ended is pruned", runID, status)
	}
	rows, err := tx.QueryContext(ctx, "SELECT DISTINCT blob FROM outputs WHERE blob <> '' AND tid IN (SELECT tid FROM steps WHERE run_id = ?)", runID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var blobs []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			rows.Close()
			return fmt.Errorf("%s: %w", what, err)
		}
		blobs = append(blobs, b)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, q := range pruneRunSQL {
		if _, err := tx.ExecContext(ctx, q, runID); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if _, err := tx.ExecContext(ctx, "UPDATE runs SET pruned_at = ? WHERE id = ? AND pruned_at IS NULL", millis(at), runID); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// The attempts are gone, and with them what the totals summed.
	if _, err := tx.ExecContext(ctx, "UPDATE runs SET spend_cost_usd = 0, spend_tokens = 0, spend_unpriced = 0 WHERE id = ?", runID); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for _, b := range blobs {
		var one int
		err := tx.QueryRowContext(ctx, blobInUseSQL, b).Scan(&one)
		if !errors.Is(err, sql.ErrNoRows) {
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			continue // another run's output has the same body
		}
		if len(b) != 64 {
			continue
		}
		if err := os.Remove(s.blobPath(b)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

// blobInUseSQL finds an output still holding a blob. Its test that the
// blob is not empty (the WHERE of the partial index outputs_blob) lets
// that index serve a bound blob; without it every output of every run was
// scanned, once per blob of a pruned run.
const blobInUseSQL = "SELECT 1 FROM outputs WHERE blob = ? AND blob <> '' LIMIT 1"
