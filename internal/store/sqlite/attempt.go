package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

const attemptColumns = "tid, n, agent, status, terminal, reason, system, prompt, steps, prompt_tokens, completion_tokens, cost_usd, started_at, engine_started_at, ended_at, resolved, class, retry_at"

// CreateAttempt inserts attempt (a.TID, a.N) and adds its usage to its
// run's totals, in one transaction; ECONFLICT if it exists.
func (s *Store) CreateAttempt(ctx context.Context, a stratus.Attempt) error {
	what := fmt.Sprintf("create attempt %d of task %q", a.N, a.TID)
	res, err := resolvedText(a.Resolved)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer tx.Rollback()
	q := s.wq.in(tx)
	_, err = q.ExecContext(ctx, insertAttemptSQL,
		a.TID, a.N, a.Agent, a.Status, a.Terminal, a.Reason, a.System, a.Prompt, a.Steps, a.PromptTokens, a.CompletionTokens,
		cost(a.CostUSD), millis(a.StartedAt), millis(a.EngineStartedAt), millis(a.EndedAt), res, a.Class, millis(a.RetryAt))
	if isUniqueViolation(err) {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of task %q already exists", a.N, a.TID)
	} else if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := addTotals(ctx, q, a.TID, store.AttemptUsage(a)); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	return nil
}

const insertAttemptSQL = "INSERT INTO attempts (" + attemptColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// addTotalsSQL adds a usage delta to the totals of the run of a step,
// when the run keeps them (spend_kept).
const addTotalsSQL = `UPDATE runs SET spend_cost_usd = spend_cost_usd + ?, spend_tokens = spend_tokens + ?, spend_unpriced = spend_unpriced + ?
WHERE spend_kept = 1 AND id = (SELECT run_id FROM steps WHERE tid = ?)`

// addTotals adds d to the totals of the run of step tid; nothing when d
// is zero, tid names no step or its run keeps no totals.
func addTotals(ctx context.Context, q querier, tid string, d store.Totals) error {
	if d.IsZero() {
		return nil
	}
	if _, err := q.ExecContext(ctx, addTotalsSQL, d.CostUSD, d.Tokens, d.Unpriced, tid); err != nil {
		return fmt.Errorf("run totals: %w", err)
	}
	return nil
}

// selectUsageSQL reads what an attempt adds to its run's totals.
const selectUsageSQL = "SELECT n, prompt_tokens, completion_tokens, cost_usd FROM attempts WHERE tid = ? AND n = ?"

// usage is what attempt (tid, n) adds to its run's totals as stored;
// ENOTFOUND if there is no such attempt.
func usage(ctx context.Context, q querier, tid string, n int) (store.Totals, error) {
	var a stratus.Attempt
	var c sql.NullFloat64
	err := q.QueryRowContext(ctx, selectUsageSQL, tid, n).Scan(&a.N, &a.PromptTokens, &a.CompletionTokens, &c)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Totals{}, stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found", n, tid)
	} else if err != nil {
		return store.Totals{}, err
	}
	if c.Valid {
		a.CostUSD = &c.Float64
	}
	return store.AttemptUsage(a), nil
}

// RunTotals returns run runID's spend totals and whether it keeps them
// (store.Store.RunTotals): one row read. ENOTFOUND for no such run.
func (s *Store) RunTotals(ctx context.Context, runID string) (store.Totals, bool, error) {
	var t store.Totals
	var kept bool
	err := s.rq.QueryRowContext(ctx, "SELECT spend_kept, spend_cost_usd, spend_tokens, spend_unpriced FROM runs WHERE id = ?", runID).
		Scan(&kept, &t.CostUSD, &t.Tokens, &t.Unpriced)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Totals{}, false, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", runID)
	} else if err != nil {
		return store.Totals{}, false, fmt.Errorf("run totals of run %q: %w", runID, err)
	} else if !kept {
		return store.Totals{}, false, nil
	}
	return t, true, nil
}

// GetAttempt returns attempt n of tid; ENOTFOUND if there is none.
func (s *Store) GetAttempt(ctx context.Context, tid string, n int) (stratus.Attempt, error) {
	a, err := scanAttempt(s.rq.QueryRowContext(ctx, "SELECT "+attemptColumns+" FROM attempts WHERE tid = ? AND n = ?", tid, n))
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Attempt{}, stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found", n, tid)
	} else if err != nil {
		return stratus.Attempt{}, fmt.Errorf("get attempt %d of task %q: %w", n, tid, err)
	}
	return a, nil
}

// LatestAttempt returns the attempt of tid with the highest N; ENOTFOUND
// if tid has no attempt.
func (s *Store) LatestAttempt(ctx context.Context, tid string) (stratus.Attempt, error) {
	a, err := scanAttempt(s.rq.QueryRowContext(ctx, "SELECT "+attemptColumns+" FROM attempts WHERE tid = ? ORDER BY n DESC LIMIT 1", tid))
	if errors.Is(err, sql.ErrNoRows) {
		return stratus.Attempt{}, stratus.Errorf(stratus.ENOTFOUND, "task %q has no attempt", tid)
	} else if err != nil {
		return stratus.Attempt{}, fmt.Errorf("latest attempt of task %q: %w", tid, err)
	}
	return a, nil
}

// UpdateAttempt replaces every field of attempt (a.TID, a.N) but the key
// and moves its run's totals by the change in its usage, in one
// transaction; ENOTFOUND if there is no such attempt.
func (s *Store) UpdateAttempt(ctx context.Context, a stratus.Attempt) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("update attempt %d of task %q: begin: %w", a.N, a.TID, err)
	}
	defer tx.Rollback()
	if err := updateAttempt(ctx, s.wq.in(tx), a); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("update attempt %d of task %q: commit: %w", a.N, a.TID, err)
	}
	return nil
}

// updateAttemptSQL replaces an attempt's fields; a transaction runs it
// (txStatements).
const updateAttemptSQL = `UPDATE attempts SET agent = ?, status = ?, terminal = ?, reason = ?, system = ?, prompt = ?,
	steps = ?, prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, started_at = ?, engine_started_at = ?, ended_at = ?, resolved = ?,
	class = ?, retry_at = ?
WHERE tid = ? AND n = ?`

// updateAttempt replaces attempt a and moves its run's totals by the
// change in its usage; s is a transaction, so the two happen together.
func updateAttempt(ctx context.Context, s querier, a stratus.Attempt) error {
	resolved, err := resolvedText(a.Resolved)
	if err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	old, err := usage(ctx, s, a.TID, a.N)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return err
	} else if err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	res, err := s.ExecContext(ctx, updateAttemptSQL,
		a.Agent, a.Status, a.Terminal, a.Reason, a.System, a.Prompt, a.Steps, a.PromptTokens, a.CompletionTokens,
		cost(a.CostUSD), millis(a.StartedAt), millis(a.EngineStartedAt), millis(a.EndedAt), resolved, a.Class, millis(a.RetryAt), a.TID, a.N)
	if err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	if err := mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found", a.N, a.TID)); err != nil {
		return err
	}
	if err := addTotals(ctx, s, a.TID, store.AttemptUsage(a).Minus(old)); err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	return nil
}

func scanAttempt(row rowScanner) (stratus.Attempt, error) {
	var a stratus.Attempt
	var costUSD sql.NullFloat64
	var started, engineStarted, ended, retryAt sql.NullInt64
	var resolved string
	if err := row.Scan(&a.TID, &a.N, &a.Agent, &a.Status, &a.Terminal, &a.Reason, &a.System, &a.Prompt, &a.Steps,
		&a.PromptTokens, &a.CompletionTokens, &costUSD, &started, &engineStarted, &ended, &resolved, &a.Class, &retryAt); err != nil {
		return stratus.Attempt{}, err
	}
	if resolved != "" {
		if err := json.Unmarshal([]byte(resolved), &a.Resolved); err != nil {
			return stratus.Attempt{}, fmt.Errorf("attempt %d of task %q: resolved: %w", a.N, a.TID, err)
		}
	}
	if costUSD.Valid {
		a.CostUSD = &costUSD.Float64
	}
	a.StartedAt, a.EngineStartedAt, a.EndedAt, a.RetryAt = fromMillis(started), fromMillis(engineStarted), fromMillis(ended), fromMillis(retryAt)
	return a, nil
}

// cost maps an optional cost to a nullable REAL: NULL for unknown, which
// is not the same as 0.
func cost(c *float64) sql.NullFloat64 {
	if c == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *c, Valid: true}
}

// resolvedText is the resolved column: stratus.Resolved as JSON, or empty
// for the zero value (an attempt that recorded none).
func resolvedText(r stratus.Resolved) (string, error) {
	if reflect.ValueOf(r).IsZero() {
		return "", nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("resolved: %w", err)
	}
	return string(b), nil
}
