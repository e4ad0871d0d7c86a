package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/launch"
)

// SystemRef points at an attempt's baked system prompt (seed 001 §
// worker_prompt_system): the Http-mode fetch target and what to verify.
type SystemRef struct {
	URI    string `json:"uri"`    // path and query of GET /v1/worker/prompt/system, relative to the API base
	SHA256 string `json:"sha256"` // hex
	Bytes  int    `json:"bytes"`
}

func SystemRefOf(tid string, attempt int, system string) *SystemRef {
	sum := sha256.Sum256([]byte(system))
	q := url.Values{"task_id": {tid}, "attempt": {fmt.Sprint(attempt)}}
	return &SystemRef{URI: "/v1/worker/prompt/system?" + q.Encode(), SHA256: hex.EncodeToString(sum[:]), Bytes: len(system)}
}

// FetchSystem serves GET /v1/worker/prompt/system?task_id=&attempt=: the exact
// baked system bytes of (task_id, attempt), for a caller whose credential is
// that attempt's. Errors: see Authorize; EINVALID for a missing or
// malformed attempt; EFORBIDDEN for another attempt.
func (s *Service) FetchSystem(ctx context.Context, authorization, tid, attempt string) ([]byte, error) {
	// The credential before the parameters (issue 14 § 5): a caller
	// without one learns nothing of what the route takes.
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, "")
	if err != nil {
		return nil, err
	}
	if tid == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "task_id", "missing; valid: the task_id of the credential's dispatch task")
	}
	if tid != c.Step.TID {
		return nil, stratus.FieldErrorf(stratus.EFORBIDDEN, "task_id", "%q is not the task this credential was issued for", tid)
	}
	var n int
	if _, err := fmt.Sscan(attempt, &n); err != nil || n < 1 || fmt.Sprint(n) != attempt {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "attempt", "%q is not a positive integer", attempt)
	}
	if c.Attempt.N != n {
		return nil, stratus.FieldErrorf(stratus.EFORBIDDEN, "attempt", "%d is not the attempt this credential was issued for (%d)", n, c.Attempt.N)
	}
	return []byte(c.Attempt.System), nil
}

// DegradationBody is the body of POST /v1/worker/degradation (seed 001 §
// worker_degradation): {tool, error, fallback, note?}.
type DegradationBody struct {
	Tool     string `json:"tool"`
	Error    string `json:"error"`
	Fallback string `json:"fallback"`
	Note     string `json:"note,omitempty"`
}

// RecordDegradation appends a degradation to the caller's run record with
// step_ref, attempt and time injected by the server. It never touches the
// output tail or the fold. When the dispatch task has no run, nothing is
// written and no error is returned (fail-open, seed 001). Errors: see
// Authorize; EINVALID naming a missing required field.
func (s *Service) RecordDegradation(ctx context.Context, authorization string, d DegradationBody) error {
	// The credential first, then the body (issue 14 § 5), then the same
	// fence as every other write (§ 4).
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return err
	}
	for _, f := range []struct{ field, v string }{{"tool", d.Tool}, {"error", d.Error}, {"fallback", d.Fallback}} {
		if strings.TrimSpace(f.v) == "" {
			return stratus.FieldErrorf(stratus.EINVALID, f.field, "missing or empty; the body is {tool, error, fallback, note?}")
		}
	}
	if err != nil {
		return nil // ENOTFOUND: no run linkage, nowhere to record it
	}
	if err := s.Fence(ctx, c); err != nil {
		return err
	}
	return s.Store.AppendDegradation(ctx, stratus.Degradation{RunID: c.Run.ID, StepRef: c.Step.StepRef, Attempt: c.Attempt.N,
		Tool: d.Tool, Error: d.Error, Fallback: d.Fallback, Note: d.Note, At: s.NowUTC()})
}

// RenderSize serves GET /v1/agents/{name}/render-size (seed 001 §
// agent_render_size): the last observed size (bytes) of the agent's baked
// system prompt, to a worker of that agent — its wh- handle or capability
// token (verb FetchPrompt). The seed leaves the route open; Stratus does
// not, since whoever reaches the API (any local user on loopback, anyone on
// a stack's URL) is no one trusted (docs/security.md § Who is trusted).
//
// Errors: see Authorize (EUNAUTHORIZED without a credential, before the
// name is read); EFORBIDDEN, field "name", for an agent other than the
// credential's own; ENOTFOUND when the agent was never rendered.
func (s *Service) RenderSize(ctx context.Context, authorization, agent string) (stratus.RenderSize, error) {
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, "")
	if err != nil {
		return stratus.RenderSize{}, err
	}
	if agent != c.Attempt.Agent {
		return stratus.RenderSize{}, stratus.FieldErrorf(stratus.EFORBIDDEN, "name", "%q is not the agent this credential was issued for (%q)", agent, c.Attempt.Agent)
	}
	return s.Store.GetRenderSize(ctx, agent)
}

// Rekick starts a new attempt of a running step: attempt n+1 with a new
// handle and worker. The previous attempt is fenced from then on (its
// writes get 409), and a fetch shows the new attempt. Errors: ECONFLICT when
// the step is no longer running.
func (s *Service) Rekick(ctx context.Context, tid string) (int, error) {
	st, run, env, err := s.StepContext(ctx, tid)
	if err != nil {
		return 0, err
	}
	if st.Status != stratus.StepRunning || stratus.RunTerminal(run.Status) {
		return 0, stratus.Errorf(stratus.ECONFLICT, "step %s is %s (run %s); only a running step can be rekicked", st.StepRef, st.Status, run.Status)
	}
	latest, err := s.Store.LatestAttempt(ctx, tid)
	if err != nil {
		return 0, err
	}
	s.StopWorker(launch.WithStopCause(ctx, fmt.Sprintf("attempt %d of the step replaced it (rekicked)", latest.N+1)), tid)
	return latest.N + 1, s.LaunchAttempt(ctx, run, env, st, latest.N+1)
}
