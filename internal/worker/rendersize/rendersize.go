package rendersize

import (
	"context"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// Invoke serves GET /v1/agents/{name}/render-size (docs/contracts.md § Routes):
// the last observed size (bytes) of the agent's baked system prompt, to a worker
// of that agent — its wh- handle or capability token (verb FetchPrompt). worc's
// contract leaves the route open; Stratus does not, since whoever reaches the
// API (any local user on loopback, anyone on a stack's URL) is no one trusted
// (docs/security.md § Who is trusted).
//
// Errors: see Authorize (EUNAUTHORIZED without a credential, before the
// name is read); EFORBIDDEN, field "name", for an agent other than the
// credential's own; ENOTFOUND when the agent was never rendered.
func Invoke(ctx context.Context, s *core.Service, authorization, agent string) (stratus.RenderSize, error) {
	c, err := s.Authorize(ctx, authorization, captoken.FetchPrompt, "")
	if err != nil {
		return stratus.RenderSize{}, err
	}
	if agent != c.Attempt.Agent {
		return stratus.RenderSize{}, stratus.FieldErrorf(stratus.EFORBIDDEN, "name", "%q is not the agent this credential was issued for (%q)", agent, c.Attempt.Agent)
	}
	return s.Store.GetRenderSize(ctx, agent)
}
