package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"

	"github.com/stratusflow/stratus"
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

// DegradationBody is the body of POST /v1/worker/degradation (seed 001 §
// worker_degradation): {tool, error, fallback, note?}.
type DegradationBody struct {
	Tool     string `json:"tool"`
	Error    string `json:"error"`
	Fallback string `json:"fallback"`
	Note     string `json:"note,omitempty"`
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
