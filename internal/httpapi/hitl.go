package httpapi

import (
	"context"
	"net/http"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
)

// OperatorHITLPath is the path of the IAM-authorised reply route, with
// its {run_id} and {node} as API Gateway and http.ServeMux write them:
// on AWS, API Gateway's AWS_IAM authorizer verifies the operator's SigV4
// signature and execute-api:Invoke permission before the request reaches
// the function (docs/security.md § Operator replies on AWS).
const OperatorHITLPath = "/v1/operator/runs/{run_id}/nodes/{node}/hitl"

// registerHITL adds the routes of human-in-the-loop replies: the operator
// token route, and the IAM-authorised one.
func (h *Handler) registerHITL() {
	h.mux.HandleFunc("POST /v1/runs/{run_id}/nodes/{node}/hitl", h.wrap(h.hitl))
	h.mux.HandleFunc("POST /v1/operator/runs/{run_id}/nodes/{node}/hitl", h.wrap(h.operatorHITL))
}

// POST /v1/runs/{run_id}/nodes/{node}/hitl {decision, text?} with an
// operator token (README.md § A human gate, step by step; worc reference.md §
// hitl node): a human's reply to the request node waits with. Answers the
// step's value.
func (h *Handler) hitl(w http.ResponseWriter, r *http.Request) error {
	run := r.PathValue("run_id")
	if err := h.Service.AuthorizeOperator(r.Header.Get("Authorization"), run); err != nil {
		return err
	}
	return h.reply(w, r, run, "")
}

// POST /v1/operator/runs/{run_id}/nodes/{node}/hitl {decision, text?}: the
// same reply, authorised by the operator's AWS identity, which API
// Gateway's IAM authorizer verified and the Lambda adapter put in the
// request's context (WithIAMIdentity). The reply records who it was (its
// ARN). A server not behind that authorizer — the embedded one, or a
// function reached another way — never has an identity, and answers 403
// naming the route that takes an operator token.
func (h *Handler) operatorHITL(w http.ResponseWriter, r *http.Request) error {
	id, ok := IAMIdentityFrom(r.Context())
	if !ok || id.UserARN == "" {
		return stratus.FieldErrorf(stratus.EFORBIDDEN, "Authorization",
			"POST %s is authorised by API Gateway's AWS_IAM authorizer (a SigV4-signed request on a deployed stack: stratus approve|reject|answer --target aws) and this server is not behind one; "+
				"here reply with an operator token on POST /v1/runs/{run_id}/nodes/{node}/hitl (stratus approve|reject|answer --dir DIR)", OperatorHITLPath)
	}
	return h.reply(w, r, r.PathValue("run_id"), id.UserARN)
}

// reply decodes a reply body and applies it for by ("" = an operator
// token's holder, whose Bearer credential was checked).
func (h *Handler) reply(w http.ResponseWriter, r *http.Request, run, by string) error {
	var reply worker.Reply
	var b []byte
	var err error
	if by == "" {
		b, err = h.readBody(r)
	} else {
		// Signed with SigV4, not a Bearer credential: API Gateway checked it.
		b, err = h.readLimited(r, 0)
	}
	if err != nil {
		return err
	}
	if err := strictJSON(b, &reply); err != nil {
		return err
	}
	reply.By = by
	v, err := h.Service.Human(r.Context(), run, r.PathValue("node"), reply)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// IAMIdentity is the caller API Gateway's IAM authorizer verified: the
// requestContext.authorizer.iam object of an HTTP API payload format 2.0
// event (API Gateway Developer Guide § Working with AWS Lambda proxy
// integrations for HTTP APIs), present only on a route whose
// authorization type is AWS_IAM.
type IAMIdentity struct {
	AccessKey      string // the access key id the request was signed with
	AccountID      string // the caller's AWS account
	CallerID       string // the principal's unique id (an IAM user's AIDA…, a role session's AROA…:session)
	UserARN        string // arn:aws:iam::<account>:user/<name>, arn:aws:sts::<account>:assumed-role/<role>/<session>
	UserID         string
	PrincipalOrgID string // the caller's AWS Organizations id, when it has one
}

type iamKey struct{}

// WithIAMIdentity returns ctx carrying id: the Lambda adapter
// (functions/handler) calls it with the identity of an IAM-authorised
// route's event, and nothing else may (the routes trust it).
func WithIAMIdentity(ctx context.Context, id IAMIdentity) context.Context {
	return context.WithValue(ctx, iamKey{}, id)
}

// IAMIdentityFrom returns the identity WithIAMIdentity put in ctx, and
// whether there is one.
func IAMIdentityFrom(ctx context.Context) (IAMIdentity, bool) {
	id, ok := ctx.Value(iamKey{}).(IAMIdentity)
	return id, ok
}
