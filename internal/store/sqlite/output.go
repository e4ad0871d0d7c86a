package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"

	"github.com/stratusflow/stratus"
)

// AppendOutput appends e to the tail of attempt (e.TID, e.Attempt) and
// returns its sequence number, one more than the tail's last (1 for an
// empty tail); e.Seq is ignored. A second OutputFinal for one attempt
// fails with ECONFLICT and appends nothing. The sequence number is
// computed inside the INSERT and a partial unique index admits one Final
// per attempt, so concurrent appends cannot race.
func (s *Store) AppendOutput(ctx context.Context, e stratus.OutputEvent) (seq int, err error) {
	row, err := s.spill(e)
	if err != nil {
		return 0, err
	}
	return s.appendRow(ctx, row)
}

// appendRow inserts a spilled row: a row naming a blob inside a
// transaction that first makes sure the blob is there (keepBlob).
func (s *Store) appendRow(ctx context.Context, row outputRow) (seq int, err error) {
	e := row.e
	if row.blob == "" {
		return row.insert(ctx, s.wq)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("append %s output to attempt %d of task %q: begin: %w", e.Kind, e.Attempt, e.TID, err)
	}
	defer tx.Rollback()
	if err := s.keepBlob(row); err != nil {
		return 0, err
	}
	if seq, err = row.insert(ctx, s.wq.in(tx)); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("append %s output to attempt %d of task %q: commit: %w", e.Kind, e.Attempt, e.TID, err)
	}
	return seq, nil
}

// querier is what a write needs: the writer pool or a transaction on it.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// outputRow is an output event as its row stores it: a large body already
// written to its blob file.
type outputRow struct {
	e       stratus.OutputEvent
	body    []byte
	blob    string
	spilled []byte // the body its blob file holds
}

// keepBlob makes sure r's blob file is there, writing it again when it is
// not: called inside the transaction that inserts r, it cannot interleave
// with PruneRun, which removes a blob no output names inside its own
// (spill wrote the file before the writer was taken, and an identical
// body found there was kept rather than written).
func (s *Store) keepBlob(r outputRow) error {
	if r.blob == "" {
		return nil
	}
	if _, err := os.Stat(s.blobPath(r.blob)); err == nil {
		return nil
	}
	if _, err := s.putBlob(r.spilled); err != nil {
		return fmt.Errorf("append %s output to attempt %d of task %q: %w", r.e.Kind, r.e.Attempt, r.e.TID, err)
	}
	return nil
}

// spill returns e's row, writing a large body to its blob file first: the
// file is written before the writer is taken, so one submit's 64 KiB does
// not hold every other write back (README.md § Performance). A blob whose row
// is never inserted (the append fails) is an orphan file, never read.
func (s *Store) spill(e stratus.OutputEvent) (outputRow, error) {
	r := outputRow{e: e, body: e.Body}
	if r.body == nil {
		r.body = []byte{} // the column is NOT NULL; a nil []byte binds as NULL
	}
	if len(r.body) > SpillBytes {
		// A large body goes to a content-addressed file, so it neither
		// bloats the WAL nor makes every checkpoint copy it.
		sum, err := s.putBlob(r.body)
		if err != nil {
			return outputRow{}, fmt.Errorf("append %s output to attempt %d of task %q: %w", e.Kind, e.Attempt, e.TID, err)
		}
		r.body, r.blob, r.spilled = []byte{}, sum, r.body
	}
	return r, nil
}

// insertOutputSQL appends a row to its tail, MAX(seq)+1 computed inside
// the INSERT; a transaction runs it (txStatements).
const insertOutputSQL = `INSERT INTO outputs (tid, attempt, seq, kind, name, body, ok, at, blob)
SELECT ?1, ?2, COALESCE(MAX(seq), 0) + 1, ?3, ?4, ?5, ?6, ?7, ?8 FROM outputs WHERE tid = ?1 AND attempt = ?2
RETURNING seq`

// insert appends r to its tail through q (the writer, or a transaction on
// it) and returns its sequence number.
func (r outputRow) insert(ctx context.Context, q querier) (seq int, err error) {
	e := r.e
	err = q.QueryRowContext(ctx, insertOutputSQL,
		e.TID, e.Attempt, e.Kind, e.Name, r.body, boolInt(e.OK), millis(e.At), r.blob).Scan(&seq)
	if isUniqueViolation(err) && e.Kind == stratus.OutputFinal {
		return 0, stratus.Errorf(stratus.ECONFLICT, "attempt %d of task %q already has a final output", e.Attempt, e.TID)
	} else if err != nil {
		return 0, fmt.Errorf("append %s output to attempt %d of task %q: %w", e.Kind, e.Attempt, e.TID, err)
	}
	return seq, nil
}

// ListPartNames is store.Store's: one indexed read of the names (the
// primary key's (tid, attempt) prefix), no body or blob read.
func (s *Store) ListPartNames(ctx context.Context, tid string, attempt int) ([]string, error) {
	rows, err := s.rq.QueryContext(ctx,
		"SELECT name FROM outputs WHERE tid = ? AND attempt = ? AND kind = ? GROUP BY name ORDER BY MIN(seq)", tid, attempt, stratus.OutputArtifact)
	if err != nil {
		return nil, fmt.Errorf("list part names of attempt %d of task %q: %w", attempt, tid, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, fmt.Errorf("list part names of attempt %d of task %q: %w", attempt, tid, err)
		}
		names = append(names, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list part names of attempt %d of task %q: %w", attempt, tid, err)
	}
	return names, nil
}

// ListOutput returns the tail of attempt (tid, attempt) in append order;
// none (and no error) for an empty tail or an unknown attempt.
func (s *Store) ListOutput(ctx context.Context, tid string, attempt int) ([]stratus.OutputEvent, error) {
	rows, err := s.rq.QueryContext(ctx,
		"SELECT seq, kind, name, body, ok, at, blob FROM outputs WHERE tid = ? AND attempt = ? ORDER BY seq", tid, attempt)
	if err != nil {
		return nil, fmt.Errorf("list output of attempt %d of task %q: %w", attempt, tid, err)
	}
	defer rows.Close()
	var events []stratus.OutputEvent
	for rows.Next() {
		e := stratus.OutputEvent{TID: tid, Attempt: attempt}
		var at sql.NullInt64
		var blob string
		if err := rows.Scan(&e.Seq, &e.Kind, &e.Name, &e.Body, &e.OK, &at, &blob); err != nil {
			return nil, fmt.Errorf("list output of attempt %d of task %q: %w", attempt, tid, err)
		}
		if blob != "" {
			if e.Body, err = s.getBlob(blob); err != nil {
				return nil, fmt.Errorf("list output of attempt %d of task %q: %w", attempt, tid, err)
			}
		}
		if e.Body == nil {
			e.Body = []byte{}
		}
		e.At = fromMillis(at)
		events = append(events, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list output of attempt %d of task %q: %w", attempt, tid, err)
	}
	return events, nil
}
