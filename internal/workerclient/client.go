// Package workerclient is the worker's side of the worker API
// (docs/contracts.md § Routes): fetch the prompt and its baked system bytes,
// stage parts, submit, post a result, relay stats and degradations. The
// runner, the bundled engines and `stratus worker` use it. Transient failures
// (connection errors, 429, 5xx) are retried with exponential backoff and full
// jitter; 4xx answers are returned at once as *APIError.
//
// Bodies are sent exactly as given: inline up to InlineBytes, larger ones
// through an upload (docs/security.md § Upload size limits). The
// `@file:<abs-path>` sentinel (docs/contracts.md § Output is a tool call) is
// resolved on the worker side, by the caller, with ResolveFileSentinel
// (DESIGN.md § Limits: the server never reads the worker's disk); the client
// methods themselves never look inside a body.
package workerclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/worker"
)

// Client calls one worker API with one Bearer credential.
type Client struct {
	BaseURL    string // e.g. http://127.0.0.1:4000 (no trailing slash needed)
	Credential string // wh- handle or capability token
	HTTP       *http.Client
	// Retries is how many times a transient failure is retried (default 4).
	Retries int
	// Backoff is the first retry's upper bound (default 200 ms), doubling.
	Backoff time.Duration
	// InlineBytes is the largest body sent inside a request (default
	// worker.DefaultInlineBytes, 4 MiB, the AWS limit); a larger one, or
	// one the API refuses inline with 413, goes through an upload (Upload,
	// docs/security.md § Upload size limits), so a caller never needs to know
	// the runtime's limits.
	InlineBytes int64
}

// APIError is a non-2xx answer.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// Error reads "worker API <status> <code>: [<field>: ]<message>".
func (e *APIError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("worker API %d %s: %s: %s", e.Status, e.Code, e.Field, e.Message)
	}
	return fmt.Sprintf("worker API %d %s: %s", e.Status, e.Code, e.Message)
}

// Transient reports whether the answer may succeed on retry: 429 and 5xx,
// but not 507 (the server's disk is full: retrying at once only fills the
// logs; docs/security.md § Output that did not persist).
func (e *APIError) Transient() bool {
	return e.Status == 429 || (e.Status >= 500 && e.Status != http.StatusInsufficientStorage)
}

// Blob reads one file of the workspace transport: its presigned URL as is, or
// the worker API path with the credential.
func (c *Client) Blob(ctx context.Context, b worker.Blob) ([]byte, error) {
	if b.URL == "" {
		return b.Body, nil
	}
	var out []byte
	err := c.do(ctx, "GET", b.URL, "", nil, &out)
	return out, err
}

// PutBlob stores body at b (a presigned PUT URL, or PUT
// /v1/worker/workspace/blob with the credential).
func (c *Client) PutBlob(ctx context.Context, b worker.Blob, body []byte) error {
	ctype := "application/octet-stream"
	if strings.HasPrefix(b.URL, "http") {
		ctype = "" // a presigned PUT is signed without a content type
	}
	return c.do(ctx, "PUT", b.URL, ctype, body, nil)
}

// WorkspaceUpload asks where the attempt's step bundle of size bytes goes
// (POST /v1/worker/workspace/upload): a URL that takes exactly that many
// bytes (docs/security.md § Upload size limits). Errors: the API's (413
// over the bundle limit, 409 when fenced).
func (c *Client) WorkspaceUpload(ctx context.Context, size int64) (worker.Upload, error) {
	req, _ := json.Marshal(worker.UploadRequest{Bytes: size})
	var u worker.Upload
	err := c.do(ctx, "POST", "/v1/worker/workspace/upload", "application/json", req, &u)
	return u, err
}

// AdvanceHead moves the run's workspace head (POST
// /v1/worker/workspace/head).
func (c *Client) AdvanceHead(ctx context.Context, h worker.HeadAdvance) error {
	body, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return c.do(ctx, "POST", "/v1/worker/workspace/head", "application/json", body, nil)
}

// Prompt fetches the prompt payload (GET /v1/worker/prompt?task_id=).
func (c *Client) Prompt(ctx context.Context, taskID string) (*worker.Payload, error) {
	var p worker.Payload
	err := c.do(ctx, "GET", "/v1/worker/prompt?task_id="+url.QueryEscape(taskID), "", nil, &p)
	return &p, err
}

// System fetches the exact baked system bytes of (taskID, attempt) (GET
// /v1/worker/prompt/system?task_id=&attempt=,
// docs/contracts.md § Request and response bodies): the text/plain target of
// Payload.SystemRef.URI. The bytes are returned unverified; compare them with
// SystemRef.SHA256.
func (c *Client) System(ctx context.Context, taskID string, attempt int) ([]byte, error) {
	q := url.Values{"task_id": {taskID}, "attempt": {strconv.Itoa(attempt)}}
	var b []byte
	err := c.do(ctx, "GET", "/v1/worker/prompt/system?"+q.Encode(), "", nil, &b)
	return b, err
}

// Artifact stages a named part (POST /v1/worker/artifact?name=,
// docs/contracts.md § Output is a tool call); the body is sent verbatim,
// inline or through an upload (postBody). A name the part-name rule refuses
// (projection.CheckPartName: docs/security.md § Part names) is refused here
// with the server's error, EINVALID on field "name", before anything is sent
// or uploaded; the server checks it again.
func (c *Client) Artifact(ctx context.Context, name string, body []byte) error {
	if err := projection.CheckPartName(name); err != nil {
		return err
	}
	return c.postBody(ctx, "/v1/worker/artifact?name="+url.QueryEscape(name), body, nil)
}

// Upload stores body where POST /v1/worker/upload says (a presigned S3 PUT
// on AWS, the API's blob route embedded) and returns the key to name as
// ?upload= or "upload" (docs/security.md § Upload size limits). Errors: the
// API's (413 over the upload limit, 409 when fenced) or the PUT's.
func (c *Client) Upload(ctx context.Context, body []byte) (string, error) {
	req, _ := json.Marshal(worker.UploadRequest{Bytes: int64(len(body))})
	var u worker.Upload
	if err := c.do(ctx, "POST", "/v1/worker/upload", "application/json", req, &u); err != nil {
		return "", err
	}
	if err := c.PutBlob(ctx, worker.Blob{Key: u.Key, URL: u.URL}, body); err != nil {
		return "", fmt.Errorf("upload %d bytes to %s: %w", len(body), u.Key, err)
	}
	return u.Key, nil
}

func (c *Client) inlineBytes() int64 {
	if c.InlineBytes > 0 {
		return c.InlineBytes
	}
	return worker.DefaultInlineBytes
}

// tooLarge reports whether err is the API refusing a body inline.
func tooLarge(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusRequestEntityTooLarge
}

// postBody POSTs body to path (a route that takes ?upload=): inline when
// it is at most InlineBytes and the API takes it, else through an upload
// with no body of its own.
func (c *Client) postBody(ctx context.Context, path string, body []byte, out any) error {
	if int64(len(body)) <= c.inlineBytes() {
		if err := c.do(ctx, "POST", path, "application/octet-stream", body, out); !tooLarge(err) {
			return err
		}
	}
	key, err := c.Upload(ctx, body)
	if err != nil {
		return err
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return c.do(ctx, "POST", path+sep+"upload="+url.QueryEscape(key), "", nil, out)
}

// Submit posts the final body (POST /v1/worker/submit): SubmitOK with ok=true.
func (c *Client) Submit(ctx context.Context, taskID string, body []byte) (*worker.StepValue, error) {
	return c.SubmitOK(ctx, taskID, body, true)
}

// SubmitOK posts the final body verbatim (POST /v1/worker/submit,
// docs/contracts.md § Request and response bodies). ok=false records a failed
// Final whose body is the reason. An empty taskID leaves the task to the
// credential; a non-empty one must be the credential's own (403 otherwise).
func (c *Client) SubmitOK(ctx context.Context, taskID string, body []byte, ok bool) (*worker.StepValue, error) {
	q := url.Values{}
	if taskID != "" {
		q.Set("task_id", taskID)
	}
	if !ok {
		q.Set("ok", "false")
	}
	path := "/v1/worker/submit"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var sv worker.StepValue
	err := c.postBody(ctx, path, body, &sv)
	return &sv, err
}

// Result posts {task_id, value, ok} (POST /v1/worker/result,
// docs/contracts.md § Request and response bodies). A JSON string value is
// the body as is; any other value is its JSON text. A nil Value is sent as
// null. A successful result whose body is over InlineBytes (or refused inline
// with 413) is sent as an upload of that body
// (docs/security.md § Upload size limits).
func (c *Client) Result(ctx context.Context, rb worker.ResultBody) (*worker.StepValue, error) {
	if rb.Value == nil && rb.Upload == "" {
		rb.Value = json.RawMessage("null")
	}
	body, err := json.Marshal(rb)
	if err != nil {
		return nil, fmt.Errorf("result body: %w", err)
	}
	var sv worker.StepValue
	ok := rb.OK != nil && *rb.OK
	if !ok || rb.Upload != "" || int64(len(body)) <= c.inlineBytes() {
		err = c.do(ctx, "POST", "/v1/worker/result", "application/json", body, &sv)
		if !ok || rb.Upload != "" || !tooLarge(err) {
			return &sv, err
		}
	}
	key, err := c.Upload(ctx, rb.Body())
	if err != nil {
		return nil, err
	}
	up := worker.ResultBody{TaskID: rb.TaskID, OK: rb.OK, Upload: key}
	body, _ = json.Marshal(up)
	err = c.do(ctx, "POST", "/v1/worker/result", "application/json", body, &sv)
	return &sv, err
}

// Fail posts a failed result (POST /v1/worker/result, ok=false) whose
// value is f: a terminal (docs/contracts.md § Terminal classification), its
// reason, and its failure class and reset (internal/failclass).
func (c *Client) Fail(ctx context.Context, taskID string, f worker.FailureValue) error {
	v, _ := json.Marshal(f)
	body, _ := json.Marshal(map[string]any{"task_id": taskID, "value": json.RawMessage(v), "ok": false})
	return c.do(ctx, "POST", "/v1/worker/result", "application/json", body, nil)
}

// Stats relays counters (POST /v1/worker/stats).
// Bootstrap exchanges the client's credential, the one-time bootstrap
// value a worker is launched with, for the step's handle (POST
// /v1/worker/bootstrap, docs/security.md § Handles) and makes the handle the
// client's credential. The value works once: a second call is a 401.
func (c *Client) Bootstrap(ctx context.Context) (worker.Bootstrapped, error) {
	var b worker.Bootstrapped
	if err := c.do(ctx, "POST", "/v1/worker/bootstrap", "", nil, &b); err != nil {
		return b, err
	}
	c.Credential = b.Handle
	return b, nil
}

func (c *Client) Stats(ctx context.Context, s worker.Stats) error {
	body, _ := json.Marshal(s)
	return c.do(ctx, "POST", "/v1/worker/stats", "application/json", body, nil)
}

// Degradation records that a tool degraded to a fallback (POST
// /v1/worker/degradation {tool, error, fallback, note?},
// docs/contracts.md § Request and response bodies). It never becomes step
// output; the server answers 204 even when the task has no run to record it
// on.
func (c *Client) Degradation(ctx context.Context, d worker.DegradationBody) error {
	body, _ := json.Marshal(d)
	return c.do(ctx, "POST", "/v1/worker/degradation", "application/json", body, nil)
}

func (c *Client) do(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	retries, backoff := c.Retries, c.Backoff
	if retries == 0 {
		retries = 4
	}
	if backoff == 0 {
		backoff = 200 * time.Millisecond
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	var last error
	for try := 0; try <= retries; try++ {
		if try > 0 {
			d := time.Duration(rand.Int64N(int64(backoff << (try - 1))))
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
			}
		}
		target, presigned := strings.TrimRight(c.BaseURL, "/")+path, strings.HasPrefix(path, "https://") || strings.HasPrefix(path, "http://")
		if presigned {
			target = path
		}
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return err
		}
		if !presigned {
			// A presigned URL carries its own authorization; S3 refuses a
			// request that carries two.
			req.Header.Set("Authorization", "Bearer "+c.Credential)
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			last = err
			continue
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			last = err
			continue
		}
		if resp.StatusCode/100 == 2 {
			if raw, ok := out.(*[]byte); ok {
				*raw = data // a text/plain answer, taken byte for byte
				return nil
			}
			if out != nil && len(data) > 0 {
				return json.Unmarshal(data, out)
			}
			return nil
		}
		ae := &APIError{Status: resp.StatusCode}
		var eb struct {
			Error struct{ Code, Message, Field string } `json:"error"`
		}
		if json.Unmarshal(data, &eb) == nil {
			ae.Code, ae.Message, ae.Field = eb.Error.Code, eb.Error.Message, eb.Error.Field
		} else {
			ae.Message = strings.TrimSpace(string(data))
			if ae.Message == "" {
				ae.Message = http.StatusText(resp.StatusCode) + " (not a worker API answer; is " + c.BaseURL + " the worker API?)"
			}
		}
		if !ae.Transient() {
			return ae
		}
		last = ae
	}
	return fmt.Errorf("%s %s: gave up after %d tries: %w", method, path, retries+1, last)
}
