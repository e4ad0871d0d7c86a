package degradation

import (
	"context"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// Invoke appends a degradation to the caller's run record with step_ref, attempt
// and time injected by the server. It never touches the output tail or the fold.
// When the dispatch task has no run, nothing is written and no error is returned
// (fail-open: docs/contracts.md § Routes). Errors: see Authorize; EINVALID
// naming a missing required field.
func Invoke(ctx context.Context, s *core.Service, authorization string, d core.DegradationBody) error {
	// The credential first, then the body (pinned by
	// TestWorkerAPI_CredentialBeforeParameters), then the same fence as
	// every other write (TestWorkerAPI_DegradationOfASupersededAttemptIs409).
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
