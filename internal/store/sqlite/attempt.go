package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/stratusflow/stratus"
)

const attemptColumns = "tid, n, agent, status, terminal, reason, system, prompt, steps, prompt_tokens, completion_tokens, cost_usd, started_at, engine_started_at, ended_at, resolved, class, retry_at"

// CreateAttempt inserts attempt (a.TID, a.N); ECONFLICT if it exists.
func (s *Store) CreateAttempt(ctx context.Context, a stratus.Attempt) error {
	res, err := resolvedText(a.Resolved)
	if err != nil {
		return fmt.Errorf("create attempt %d of task %q: %w", a.N, a.TID, err)
	}
	_, err = s.wq.ExecContext(ctx, "INSERT INTO attempts ("+attemptColumns+") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		a.TID, a.N, a.Agent, a.Status, a.Terminal, a.Reason, a.System, a.Prompt, a.Steps, a.PromptTokens, a.CompletionTokens,
		cost(a.CostUSD), millis(a.StartedAt), millis(a.EngineStartedAt), millis(a.EndedAt), res, a.Class, millis(a.RetryAt))
	if isUniqueViolation(err) {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of task %q already exists", a.N, a.TID)
	} else if err != nil {
		return fmt.Errorf("create attempt %d of task %q: %w", a.N, a.TID, err)
	}
	return nil
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

// UpdateAttempt replaces every field of attempt (a.TID, a.N) but the key;
// ENOTFOUND if there is no such attempt.
func (s *Store) UpdateAttempt(ctx context.Context, a stratus.Attempt) error {
	return updateAttempt(ctx, s.wq, a)
}

// updateAttemptSQL replaces an attempt's fields; a transaction runs it
// (txStatements).
const updateAttemptSQL = `UPDATE attempts SET agent = ?, status = ?, terminal = ?, reason = ?, system = ?, prompt = ?,
	steps = ?, prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, started_at = ?, engine_started_at = ?, ended_at = ?, resolved = ?,
	class = ?, retry_at = ?
WHERE tid = ? AND n = ?`

func updateAttempt(ctx context.Context, s querier, a stratus.Attempt) error {
	resolved, err := resolvedText(a.Resolved)
	if err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	res, err := s.ExecContext(ctx, updateAttemptSQL,
		a.Agent, a.Status, a.Terminal, a.Reason, a.System, a.Prompt, a.Steps, a.PromptTokens, a.CompletionTokens,
		cost(a.CostUSD), millis(a.StartedAt), millis(a.EngineStartedAt), millis(a.EndedAt), resolved, a.Class, millis(a.RetryAt), a.TID, a.N)
	if err != nil {
		return fmt.Errorf("update attempt %d of task %q: %w", a.N, a.TID, err)
	}
	return mustAffect(res, stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found", a.N, a.TID))
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
