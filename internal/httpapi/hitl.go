package httpapi

import (
	"net/http"

	"github.com/stratusflow/stratus/internal/worker"
)

// registerHITL adds the operator route of human-in-the-loop replies.
func (h *Handler) registerHITL() {
	h.mux.HandleFunc("POST /v1/runs/{run_id}/nodes/{node}/hitl", h.wrap(h.hitl))
}

// POST /v1/runs/{run_id}/nodes/{node}/hitl {decision, text?} with an
// operator token (issue 5 § 4; worc reference.md § hitl node): a human's
// reply to the request node waits with. Answers the step's value.
func (h *Handler) hitl(w http.ResponseWriter, r *http.Request) error {
	run := r.PathValue("run_id")
	if err := h.Service.AuthorizeOperator(r.Header.Get("Authorization"), run); err != nil {
		return err
	}
	var reply worker.Reply
	if err := h.decodeStrict(r, &reply); err != nil {
		return err
	}
	v, err := h.Service.Human(r.Context(), run, r.PathValue("node"), reply)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
