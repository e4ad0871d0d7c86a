package dynamodb

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/stratusflow/stratus"
)

// attemptKey is the key of attempt n of tid; EINVALID for an n the sort
// key cannot order (attempts count from 1).
func attemptKey(tid string, n int) (item, error) {
	if n < 0 || n > maxSeq {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "attempt", "attempt number %d of task %q is out of range; want 0 to %d", n, tid, maxSeq)
	}
	return key(pkTask+tid, skAttempt+pad(n)), nil
}

// attemptFields is every attribute of a but the key: what CreateAttempt
// writes and UpdateAttempt replaces. Large prompts spill to Blobs.
func (s *Store) attemptFields(ctx context.Context, a stratus.Attempt) (map[string]av, error) {
	m := map[string]av{
		"agent": text(a.Agent), "status": text(a.Status), "terminal": text(a.Terminal), "reason": text(a.Reason),
		"steps": num(int64(a.Steps)), "prompt_tokens": num(a.PromptTokens), "completion_tokens": num(a.CompletionTokens),
		"cost_usd": float(a.CostUSD), "started_at": millis(a.StartedAt), "engine_started_at": millis(a.EngineStartedAt),
		"ended_at": millis(a.EndedAt), "resolved": nil, "class": text(a.Class), "retry_at": millis(a.RetryAt),
	}
	if !reflect.ValueOf(a.Resolved).IsZero() {
		b, err := json.Marshal(a.Resolved)
		if err != nil {
			return nil, fmt.Errorf("resolved: %w", err)
		}
		m["resolved"] = str(string(b))
	}
	for name, v := range map[string]string{"system": a.System, "prompt": a.Prompt} {
		attrs, err := s.spill(ctx, name, []byte(v), s.promptBytes, true)
		if err != nil {
			return nil, err
		}
		for k, v := range attrs {
			m[k] = v
		}
	}
	return m, nil
}

// CreateAttempt inserts attempt (a.TID, a.N), and adds its usage to its
// run's totals in the same transaction; ECONFLICT if it exists.
func (s *Store) CreateAttempt(ctx context.Context, a stratus.Attempt) error {
	what := fmt.Sprintf("create attempt %d of task %q", a.N, a.TID)
	k, err := attemptKey(a.TID, a.N)
	if err != nil {
		return err
	}
	fields, err := s.attemptFields(ctx, a)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	it := k.setAll(map[string]av{attrRecord: str("attempt"), attrWID: str(newWID()), "tid": str(a.TID), "n": num(int64(a.N))}).setAll(fields)
	exists, err := s.createAttemptUsage(ctx, what, a, it)
	if err != nil {
		return wrap(what, err)
	} else if exists {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of task %q already exists (DynamoDB ConditionalCheckFailedException)", a.N, a.TID)
	}
	return nil
}

// GetAttempt returns attempt n of tid; ENOTFOUND if there is none.
func (s *Store) GetAttempt(ctx context.Context, tid string, n int) (stratus.Attempt, error) {
	what := fmt.Sprintf("get attempt %d of task %q", n, tid)
	k, err := attemptKey(tid, n)
	if err != nil {
		return stratus.Attempt{}, err
	}
	it, err := s.get(ctx, k)
	if err != nil {
		return stratus.Attempt{}, wrap(what, err)
	} else if it == nil {
		return stratus.Attempt{}, stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found", n, tid)
	}
	return s.decodeAttempt(ctx, what, it)
}

// LatestAttempt returns the attempt of tid with the highest N; ENOTFOUND
// if tid has no attempt. The sort keys order attempts by N, so it is the
// last item of the task's attempt range.
func (s *Store) LatestAttempt(ctx context.Context, tid string) (stratus.Attempt, error) {
	what := fmt.Sprintf("latest attempt of task %q", tid)
	items, err := s.query(ctx, pkTask+tid, skAttempt, true, 1)
	if err != nil {
		return stratus.Attempt{}, wrap(what, err)
	} else if len(items) == 0 {
		return stratus.Attempt{}, stratus.Errorf(stratus.ENOTFOUND, "task %q has no attempt", tid)
	}
	return s.decodeAttempt(ctx, what, items[0])
}

// UpdateAttempt replaces every field of attempt (a.TID, a.N) but the key
// and moves its run's totals by the change in its usage, in one
// transaction conditioned on the usage it replaced; ENOTFOUND if there is
// no such attempt.
func (s *Store) UpdateAttempt(ctx context.Context, a stratus.Attempt) error {
	what := fmt.Sprintf("update attempt %d of task %q", a.N, a.TID)
	u, err := s.attemptUpdate(ctx, a)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := s.updateAttemptUsage(ctx, what, a, u); err != nil {
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			return err
		}
		return wrap(what, err)
	}
	return nil
}

func (s *Store) attemptUpdate(ctx context.Context, a stratus.Attempt) (update, error) {
	k, err := attemptKey(a.TID, a.N)
	if err != nil {
		return update{}, err
	}
	fields, err := s.attemptFields(ctx, a)
	if err != nil {
		return update{}, err
	}
	return update{k, fields}, nil
}

func attemptNotFound(a stratus.Attempt) error {
	return stratus.Errorf(stratus.ENOTFOUND, "attempt %d of task %q not found (DynamoDB ConditionalCheckFailedException)", a.N, a.TID)
}

func (s *Store) decodeAttempt(ctx context.Context, what string, it item) (stratus.Attempt, error) {
	a := stratus.Attempt{
		TID: it.str("tid"), N: int(it.int("n")), Agent: it.str("agent"), Status: it.str("status"), Terminal: it.str("terminal"),
		Reason: it.str("reason"), Steps: int(it.int("steps")), PromptTokens: it.int("prompt_tokens"),
		CompletionTokens: it.int("completion_tokens"), CostUSD: it.float("cost_usd"), StartedAt: it.time("started_at"),
		EngineStartedAt: it.time("engine_started_at"), EndedAt: it.time("ended_at"), Class: it.str("class"), RetryAt: it.time("retry_at"),
	}
	if r := it.str("resolved"); r != "" {
		if err := json.Unmarshal([]byte(r), &a.Resolved); err != nil {
			return stratus.Attempt{}, fmt.Errorf("%s: resolved: %w", what, err)
		}
	}
	for name, dst := range map[string]*string{"system": &a.System, "prompt": &a.Prompt} {
		b, err := s.unspill(ctx, it, name)
		if err != nil {
			return stratus.Attempt{}, fmt.Errorf("%s: %w", what, err)
		}
		*dst = string(b)
	}
	return a, nil
}
