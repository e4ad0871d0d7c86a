package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/stratusflow/stratus"
)

// PutHandle stores h; ECONFLICT if h.Handle exists.
func (s *Store) PutHandle(ctx context.Context, h stratus.Handle) error {
	_, err := s.wq.ExecContext(ctx, "INSERT INTO handles (handle, run_id, tid, attempt, expires_at) VALUES (?, ?, ?, ?, ?)",
		h.Handle, h.RunID, h.TID, h.Attempt, millis(h.ExpiresAt))
	if isUniqueViolation(err) {
		return stratus.Errorf(stratus.ECONFLICT, "handle %q already exists", h.Handle)
	} else if err != nil {
		return fmt.Errorf("put handle %q: %w", h.Handle, err)
	}
	return nil
}

// TakeHandle deletes the handle and returns it; ENOTFOUND if it is
// absent (or was taken).
func (s *Store) TakeHandle(ctx context.Context, handle string) (stratus.Handle, error) {
	row := s.wq.QueryRowContext(ctx, "DELETE FROM handles WHERE handle = ? RETURNING run_id, tid, attempt, expires_at", handle)
	return scanHandle(row, handle, "take", " (or already taken)")
}

// GetHandle returns the handle; ENOTFOUND if it is absent. An expired
// handle is returned like any other: expiry is the caller's check.
func (s *Store) GetHandle(ctx context.Context, handle string) (stratus.Handle, error) {
	row := s.rq.QueryRowContext(ctx, "SELECT run_id, tid, attempt, expires_at FROM handles WHERE handle = ?", handle)
	return scanHandle(row, handle, "get", "")
}

// scanHandle reads handle's (run_id, tid, attempt, expires_at) row; verb and
// absent word its errors.
func scanHandle(row *sql.Row, handle, verb, absent string) (stratus.Handle, error) {
	h := stratus.Handle{Handle: handle}
	var expires sql.NullInt64
	err := row.Scan(&h.RunID, &h.TID, &h.Attempt, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Handle{}, stratus.Errorf(stratus.ENOTFOUND, "handle %q not found%s", handle, absent)
	} else if err != nil {
		return stratus.Handle{}, fmt.Errorf("%s handle %q: %w", verb, handle, err)
	}
	h.ExpiresAt = fromMillis(expires)
	return h, nil
}

// RenewHandle sets the handle's expiry; ENOTFOUND if it is absent (or
// was taken).
func (s *Store) RenewHandle(ctx context.Context, handle string, expiresAt time.Time) error {
	res, err := s.wq.ExecContext(ctx, "UPDATE handles SET expires_at = ? WHERE handle = ?", millis(expiresAt), handle)
	if err != nil {
		return fmt.Errorf("renew handle %q: %w", handle, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("renew handle %q: %w", handle, err)
	} else if n == 0 {
		return stratus.Errorf(stratus.ENOTFOUND, "handle %q not found (or already taken)", handle)
	}
	return nil
}
