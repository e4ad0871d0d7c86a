// Package httpapi maps the worker API routes of docs/contracts.md § Routes
// onto the worker service. The same http.Handler serves the embedded server
// (127.0.0.1) and the workerapi Lambda (through the API Gateway proxy
// adapter). It owns status codes and the one JSON error shape {"error":
// {"code", "message", "field"?}}; handlers return errors and never write
// statuses by hand.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path"
	"runtime/trace"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
)

// DefaultMaxBodyBytes bounds a request body when the service sets no limit
// (embedded default, 32 MiB; on AWS the limit is set under API Gateway's
// 10 MB request and Lambda's 6 MB payload, docs/architecture.md § Limits).
const DefaultMaxBodyBytes = 32 << 20

// ErrorStatus maps an error code to its HTTP status.
func ErrorStatus(code string) int {
	switch code {
	case stratus.EINVALID:
		return http.StatusBadRequest
	case stratus.EUNAUTHORIZED:
		return http.StatusUnauthorized
	case stratus.EFORBIDDEN:
		return http.StatusForbidden
	case stratus.ENOTFOUND:
		return http.StatusNotFound
	case stratus.EMETHOD:
		return http.StatusMethodNotAllowed
	case stratus.ECONFLICT:
		return http.StatusConflict
	case stratus.ETOOLARGE:
		return http.StatusRequestEntityTooLarge
	case stratus.EUNPROCESSABLE:
		return http.StatusUnprocessableEntity
	case stratus.ENOSPACE:
		return http.StatusInsufficientStorage
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON error shape.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field,omitempty"`
	} `json:"error"`
}

// WriteError writes err as the JSON error shape with its status.
func WriteError(w http.ResponseWriter, err error) {
	var body ErrorBody
	body.Error.Code = stratus.ErrorCode(err)
	body.Error.Message = stratus.ErrorMessage(err)
	var se *stratus.Error
	if errors.As(err, &se) {
		body.Error.Field = se.Field
	}
	writeJSON(w, ErrorStatus(body.Error.Code), body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// Handler serves the worker API.
type Handler struct {
	Service *worker.Service
	// OnError, when set, sees every error a handler returns (logging).
	OnError func(r *http.Request, err error)
	mux     *http.ServeMux
}

// New returns the worker API handler.
func New(s *worker.Service) *Handler {
	h := &Handler{Service: s, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/healthz", h.wrap(h.healthz))
	h.mux.HandleFunc("GET /v1/openapi.yaml", h.wrap(h.openapi))
	h.mux.HandleFunc("GET /v1/worker/prompt", h.wrap(h.prompt))
	h.mux.HandleFunc("POST /v1/worker/submit", h.wrap(h.submit))
	h.mux.HandleFunc("POST /v1/worker/result", h.wrap(h.result))
	h.mux.HandleFunc("POST /v1/worker/artifact", h.wrap(h.artifact))
	h.mux.HandleFunc("POST /v1/worker/stats", h.wrap(h.stats))
	h.mux.HandleFunc("POST /v1/worker/bootstrap", h.wrap(h.bootstrap))
	h.mux.HandleFunc("POST /v1/worker/upload", h.wrap(h.upload))
	h.mux.HandleFunc("GET /v1/worker/prompt/system", h.wrap(h.system))
	h.mux.HandleFunc("POST /v1/worker/degradation", h.wrap(h.degradation))
	h.mux.HandleFunc("GET /v1/worker/workspace/blob", h.wrap(h.readBlob))
	h.mux.HandleFunc("PUT /v1/worker/workspace/blob", h.wrap(h.writeBlob))
	h.mux.HandleFunc("POST /v1/worker/workspace/upload", h.wrap(h.workspaceUpload))
	h.mux.HandleFunc("POST /v1/worker/workspace/head", h.wrap(h.advanceHead))
	h.mux.HandleFunc("GET /v1/agents/{name}/render-size", h.wrap(h.renderSize))
	h.registerHITL() // hitl.go
	h.mux.HandleFunc("/", h.wrap(func(w http.ResponseWriter, r *http.Request) error {
		// A known path asked with another method is 405 with Allow (RFC 9110
		// § 15.5.6), not 404: the catch-all replaces ServeMux's own 405.
		var allow []string
		for _, m := range []string{http.MethodGet, http.MethodPost} {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := h.mux.Handler(probe); pattern != "/" && pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return stratus.Errorf(stratus.EMETHOD, "%s %s: method not allowed; allowed: %s", r.Method, r.URL.Path, strings.Join(allow, ", "))
		}
		return stratus.Errorf(stratus.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path)
	}))
	return h
}

// ServeHTTP serves the API. A path that is not in clean form ("//v1/x",
// "/v1/./x", a trailing slash) is a JSON 404 like any unknown path, not the
// redirect http.ServeMux would answer.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; p == "" || p != path.Clean(p) {
		WriteError(w, stratus.Errorf(stratus.ENOTFOUND, "no route %s %s", r.Method, p))
		return
	}
	h.mux.ServeHTTP(w, r)
}

func (h *Handler) wrap(f func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		defer trace.StartRegion(r.Context(), r.Pattern).End() // one region per route (STRATUS_TRACE)
		if err := f(w, r); err != nil {
			if h.OnError != nil {
				h.OnError(r, err)
			}
			WriteError(w, err)
		}
	}
}

// readBody reads the whole body, refusing one over the limit with a 413
// before anything is stored.
func (h *Handler) readBody(r *http.Request) ([]byte, error) {
	return h.readBodyUpTo(r, 0)
}

// readBodyUpTo is readBody with a limit of its own (0: the inline limit):
// the blob route carries uploads, bounded by the upload limit.
func (h *Handler) readBodyUpTo(r *http.Request, max int64) ([]byte, error) {
	// A request without a usable credential is answered 401 before its
	// body is read, however large it is.
	if a := strings.TrimSpace(r.Header.Get("Authorization")); a == "" || !strings.EqualFold(strings.SplitN(a, " ", 2)[0], "Bearer") {
		_, err := h.Service.Authorize(r.Context(), a, "", "")
		return nil, err
	}
	return h.readLimited(r, max)
}

// readLimited is readBodyUpTo once the request's credential is known to be
// usable (the IAM-authorised route's was verified by API Gateway).
func (h *Handler) readLimited(r *http.Request, max int64) ([]byte, error) {
	limit := h.Service.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	// The limits, stated once (worker/upload.go): inline up to limit, a
	// larger body through an upload.
	over := func(size string) error {
		if up := h.Service.MaxUpload(); up > limit {
			return stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s over the limit of %d bytes for a body sent inline; send a larger one through POST /v1/worker/upload (up to %d bytes)",
				size, limit, up)
		}
		return stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s over the limit of %d bytes for a body, inline or uploaded", size, limit)
	}
	if max > 0 {
		limit = max
		over = func(size string) error {
			return stratus.FieldErrorf(stratus.ETOOLARGE, "body", "%s over the limit of %d bytes", size, limit)
		}
	}
	if r.ContentLength > limit {
		return nil, over(strconv.FormatInt(r.ContentLength, 10) + " bytes is")
	}
	b, err := readAll(io.LimitReader(r.Body, limit+1), r.ContentLength)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "stopped arriving: each piece must come within %v, and on average %d bytes a second or faster", BodyIdleTimeout, MinBodyRate)
	} else if err != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "could not be read: the connection failed")
	}
	if int64(len(b)) > limit {
		return nil, over("the body is")
	}
	return b, nil
}

// readAll is io.ReadAll with room made at once for the size bytes a
// request's Content-Length announces (-1: unknown): io.ReadAll grows its
// buffer from 512 bytes, and a 64 KiB submit body cost twice its size in
// buffers and copies (README.md § Performance). The caller bounds size.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: the read that meets EOF needs no growth
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		} else if err != nil {
			return b, err
		}
		if len(b) == cap(b) { // more than announced: grow as io.ReadAll does
			b = append(b, 0)[:len(b)]
		}
	}
}

func (h *Handler) decodeJSON(r *http.Request, v any) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return stratus.Errorf(stratus.EINVALID, "body is not valid JSON: %v", err)
	}
	return nil
}

// decodeStrict decodes a JSON body, refusing unknown fields and trailing data.
func (h *Handler) decodeStrict(r *http.Request, v any) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	return strictJSON(b, v)
}

// strictJSON decodes body b as decodeStrict does.
func strictJSON(b []byte, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "body", "empty; valid: a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return stratus.FieldErrorf(stratus.EINVALID, te.Field, "a JSON %s is not valid here; valid: a JSON %s", te.Value, jsonKind(te.Type.Kind().String()))
		}
		return stratus.Errorf(stratus.EINVALID, "body: %v", err)
	}
	if dec.More() {
		return stratus.Errorf(stratus.EINVALID, "body: trailing data after the JSON object")
	}
	return nil
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// GET /v1/openapi.yaml: the API's own contract, as committed.
func (h *Handler) openapi(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(stratus.OpenAPI)
	return nil
}

// GET /v1/worker/prompt?task_id= (docs/contracts.md § Routes).
func (h *Handler) prompt(w http.ResponseWriter, r *http.Request) error {
	p, err := h.Service.FetchPrompt(r.Context(), r.Header.Get("Authorization"), r.URL.Query().Get("task_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// POST /v1/worker/submit[?ok=false] with a raw body
// (docs/contracts.md § Request and response bodies), or with ?upload=<key>
// and no body (docs/security.md § Upload size limits).
func (h *Handler) submit(w http.ResponseWriter, r *http.Request) error {
	ok := true
	if v := r.URL.Query().Get("ok"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return stratus.FieldErrorf(stratus.EINVALID, "ok", "%q is not a boolean; valid: true, false", v)
		}
		ok = b
	}
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	up, err := uploadParam(r)
	if err != nil {
		return err
	}
	b := worker.Body{Bytes: body, Upload: up}
	sv, err := h.Service.SubmitBody(r.Context(), r.Header.Get("Authorization"), r.URL.Query().Get("task_id"), b, ok)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sv)
	return nil
}

// POST /v1/worker/result {task_id, value, ok}
// (docs/contracts.md § Request and response bodies).
func (h *Handler) result(w http.ResponseWriter, r *http.Request) error {
	var rb worker.ResultBody
	if err := h.decodeJSON(r, &rb); err != nil {
		return err
	}
	sv, err := h.Service.Result(r.Context(), r.Header.Get("Authorization"), rb)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sv)
	return nil
}

// POST /v1/worker/artifact?name= with a raw body
// (docs/contracts.md § Output is a tool call), or with &upload=<key> and no
// body (docs/security.md § Upload size limits).
func (h *Handler) artifact(w http.ResponseWriter, r *http.Request) error {
	body, err := h.readBody(r)
	if err != nil {
		return err
	}
	up, err := uploadParam(r)
	if err != nil {
		return err
	}
	if err := h.Service.StageArtifact(r.Context(), r.Header.Get("Authorization"), r.URL.Query().Get("name"), worker.Body{Bytes: body, Upload: up}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// uploadParam is the ?upload= of a request: absent is "", present and
// empty is refused (it would submit an empty body).
func uploadParam(r *http.Request) (string, error) {
	q := r.URL.Query()
	if q.Has("upload") && q.Get("upload") == "" {
		return "", stratus.FieldErrorf(stratus.EINVALID, "upload", "empty; valid: a key from POST /v1/worker/upload, or no upload parameter")
	}
	return q.Get("upload"), nil
}

// POST /v1/worker/upload {bytes} (docs/security.md § Upload size limits):
// where to PUT a body too large to send inline.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) error {
	var u worker.UploadRequest
	if err := h.decodeStrict(r, &u); err != nil {
		return err
	}
	up, err := h.Service.NewUpload(r.Context(), r.Header.Get("Authorization"), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, up)
	return nil
}

// GET /v1/worker/prompt/system?task_id=&attempt=
// (docs/contracts.md § Request and response bodies): the exact baked bytes as
// text/plain, not JSON.
func (h *Handler) system(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	b, err := h.Service.FetchSystem(r.Context(), r.Header.Get("Authorization"), q.Get("task_id"), q.Get("attempt"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write(b)
	return nil
}

// GET /v1/worker/workspace/blob?key=: the bytes of a file of
// the caller's run's workspace, ctx or report dir, for a sink that does
// not presign URLs.
func (h *Handler) readBlob(w http.ResponseWriter, r *http.Request) error {
	b, err := h.Service.ReadBlob(r.Context(), r.Header.Get("Authorization"), r.URL.Query().Get("key"))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Write(b)
	return nil
}

// PUT /v1/worker/workspace/blob?key=: the caller's step bundle, to the upload
// key its payload named, or a body to an upload key. The service says the
// key's limit once the caller is authorized; a longer body is refused (413)
// having read at most one byte past it
// (docs/security.md § Upload size limits).
func (h *Handler) writeBlob(w http.ResponseWriter, r *http.Request) error {
	read := func(limit int64) ([]byte, error) { return readLimited(w, r, limit) }
	if err := h.Service.WriteBlobFrom(r.Context(), r.Header.Get("Authorization"), r.URL.Query().Get("key"), read); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readLimited reads r's body through http.MaxBytesReader: ETOOLARGE (field
// bytes) for a body over limit bytes, announced (Content-Length, nothing
// read) or found (at most limit+1 bytes read, and the connection is
// closed after the answer rather than drained).
func readLimited(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	over := stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the body is over the limit of %d bytes", limit)
	if r.ContentLength > limit {
		return nil, over
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, over
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "stopped arriving: each piece must come within %v, and on average %d bytes a second or faster", BodyIdleTimeout, MinBodyRate)
	case err != nil:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "could not be read: the connection failed")
	}
	return b, nil
}

// POST /v1/worker/workspace/upload {bytes} (docs/security.md § Upload size
// limits): where the caller's step bundle of that size goes.
func (h *Handler) workspaceUpload(w http.ResponseWriter, r *http.Request) error {
	var u worker.UploadRequest
	if err := h.decodeStrict(r, &u); err != nil {
		return err
	}
	up, err := h.Service.WorkspaceUpload(r.Context(), r.Header.Get("Authorization"), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, up)
	return nil
}

// POST /v1/worker/workspace/head {from, to}: advance the run's workspace head
// to the caller's commit.
func (h *Handler) advanceHead(w http.ResponseWriter, r *http.Request) error {
	var a worker.HeadAdvance
	if err := h.decodeStrict(r, &a); err != nil {
		return err
	}
	if err := h.Service.AdvanceHead(r.Context(), r.Header.Get("Authorization"), a); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// POST /v1/worker/degradation {tool, error, fallback, note?}
// (docs/contracts.md § Request and response bodies).
func (h *Handler) degradation(w http.ResponseWriter, r *http.Request) error {
	var d worker.DegradationBody
	if err := h.decodeStrict(r, &d); err != nil {
		return err
	}
	if err := h.Service.RecordDegradation(r.Context(), r.Header.Get("Authorization"), d); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// GET /v1/agents/{name}/render-size
// (docs/contracts.md § Request and response bodies), with the credential of a
// worker of that agent (worker.Service.RenderSize).
func (h *Handler) renderSize(w http.ResponseWriter, r *http.Request) error {
	rs, err := h.Service.RenderSize(r.Context(), r.Header.Get("Authorization"), r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rs)
	return nil
}

// POST /v1/worker/stats (docs/contracts.md § Request and response bodies;
// every field optional). POST /v1/worker/bootstrap
// (docs/security.md § Handles): the worker's one-time bootstrap value,
// exchanged for its step's handle.
func (h *Handler) bootstrap(w http.ResponseWriter, r *http.Request) error {
	b, err := h.Service.ExchangeBootstrap(r.Context(), r.Header.Get("Authorization"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

func (h *Handler) stats(w http.ResponseWriter, r *http.Request) error {
	var st worker.Stats
	if err := h.decodeJSON(r, &st); err != nil {
		return err
	}
	if err := h.Service.RecordStats(r.Context(), r.Header.Get("Authorization"), st); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// jsonKind names a Go kind as the JSON value it decodes from.
func jsonKind(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "integer"
	case strings.HasPrefix(kind, "float"):
		return "number"
	case kind == "struct" || kind == "map":
		return "object"
	case kind == "slice" || kind == "array":
		return "array"
	case kind == "bool":
		return "boolean"
	}
	return kind
}
