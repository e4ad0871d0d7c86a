package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/httpapi"
)

// The routes FuzzWorkerAPI drives, all POST.
const (
	fzSubmit = iota
	fzArtifact
	fzResult
	fzDegradation
	fzStats
	fzRoutes
)

// docs/contracts.md § Routes and § Bearer authentication: whatever the body,
// query value and Authorization header sent to submit, artifact, result,
// degradation and stats (with the worker's valid handle, a minted token, or
// anything else), the API never answers 5xx, and every non-2xx answer is the
// JSON error shape {"error": {"code", "message", "field"?}} with the status
// its code maps to. "{tid}" in a body or query value stands for the current
// attempt's dispatch task id.
func FuzzWorkerAPI(f *testing.F) {
	type seed struct {
		route, auth uint8
		cred, param string
		body        string
	}
	for _, s := range []seed{
		{fzSubmit, 0, "", "", "planned"},
		{fzSubmit, 0, "", "false", "it broke"},
		{fzSubmit, 0 + 8, "", "{tid}", "```json\n{\"a\":1}\n```"},
		{fzSubmit, 0, "", "maybe", "x"},
		{fzSubmit, 0, "", "", "@file:/etc/passwd\n"},
		{fzSubmit, 0 + 8, "", "r1.review.1", "x"},
		{fzSubmit, 5, "", "", "\xff\x00 binary"},
		{fzSubmit, 1, "Basic abc", "", "x"},
		{fzSubmit, 2, "abc.def", "", "x"},
		{fzSubmit, 2, "wh-00000000", "", "x"},
		{fzSubmit, 3, "bearer\t", "", "x"},
		{fzSubmit, 4, " trailing", "", "x"},
		{fzArtifact, 0, "", "plan.md", "# Plan\n"},
		{fzArtifact, 0, "", "../x", "x"},
		{fzArtifact, 0, "", "", "x"},
		{fzArtifact, 0, "", "planning.md", "x"},
		{fzArtifact, 0, "", "a\x00b", "x"},
		{fzArtifact, 0, "", "notes.md", "@file:notes.md"},
		{fzArtifact, 5, "", "ünïcødé 名前.md", ""},
		{fzArtifact, 0, "", strings.Repeat("n", 255-len(".")-len(".tmp-")-16+1), "x"},
		{fzResult, 0, "", "", `{"task_id":"{tid}","ok":true,"value":"done"}`},
		{fzResult, 0, "", "", `{"task_id":"{tid}","ok":false,"value":{"terminal":"TimedOut","reason":"deadline"}}`},
		{fzResult, 0, "", "", `{"task_id":"{tid}","ok":true,"value":{"findings":[]}}`},
		{fzResult, 0, "", "", `{"task_id":"{tid}","ok":true}`},
		{fzResult, 0, "", "", `{"task_id":"{tid}"}`},
		{fzResult, 0, "", "", `{"task_id":"other","ok":true,"value":1}`},
		{fzResult, 0, "", "", `[`},
		{fzResult, 0, "", "", ``},
		{fzDegradation, 0, "", "", `{"tool":"web","error":"timeout","fallback":"cache","note":"n"}`},
		{fzDegradation, 0, "", "", `{"tool":"web","error":"timeout","fallback":" "}`},
		{fzDegradation, 0, "", "", `{"tool":"web","error":"e","fallback":"f","extra":1}`},
		{fzDegradation, 0, "", "", `{"tool":"web","error":"e","fallback":"f"} {}`},
		{fzDegradation, 2, "x", "", `{"tool":"t","error":"e","fallback":"f"}`},
		{fzStats, 0, "", "", `{"steps":3,"prompt_tokens":10,"completion_tokens":5,"cost_usd":0.01,"engine_started_at_ms":1700000000000}`},
		{fzStats, 0, "", "", `{"steps":-1,"engine_started_at_ms":9223372036854775807,"cost_usd":1e308}`},
		{fzStats, 0, "", "", `{}`},
		{fzStats, 0, "", "", `{"steps":"three"}`},
		{fzStats, 5, "", "", `{"steps":1}`},
	} {
		f.Add(s.route, s.auth, s.cred, s.param, []byte(s.body))
	}

	// The handler is driven directly, not through the bundle's server.
	h := setup(f)
	var lastErr error
	h.handler.OnError = func(_ *http.Request, err error) { lastErr = err }
	cur := h.dispatchFresh(f)

	f.Fuzz(func(t *testing.T, route, authSel uint8, cred, param string, body []byte) {
		tid := cur.TaskID
		param = strings.ReplaceAll(param, "{tid}", tid)
		body = bytes.ReplaceAll(body, []byte("{tid}"), []byte(tid))

		var target string
		switch route % fzRoutes {
		case fzSubmit:
			target = "/v1/worker/submit"
			if param != "" {
				key := "ok"
				if route/fzRoutes%2 == 1 {
					key = "task_id"
				}
				target += "?" + url.Values{key: {param}}.Encode()
			}
		case fzArtifact:
			target = "/v1/worker/artifact?" + url.Values{"name": {param}}.Encode()
		case fzResult:
			target = "/v1/worker/result"
		case fzDegradation:
			target = "/v1/worker/degradation"
		case fzStats:
			target = "/v1/worker/stats"
		}
		var auth string
		switch authSel % 6 {
		case 0:
			auth = "Bearer " + cur.Handle
		case 1:
			auth = cred
		case 2:
			auth = "Bearer " + cred
		case 3:
			auth = cred + cur.Handle
		case 4:
			auth = "Bearer " + cur.Handle + cred
		case 5:
			tok, _, err := h.svc.Minter.Mint("r1", tid, cur.Attempt)
			if err != nil {
				t.Fatal(err)
			}
			auth = "Bearer " + tok
		}

		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body))
		if auth != "" {
			req.Header["Authorization"] = []string{auth}
		}
		rec := httptest.NewRecorder()
		lastErr = nil
		h.handler.ServeHTTP(rec, req)
		code, resp := rec.Code, rec.Body.Bytes()

		if code >= 500 {
			t.Fatalf("POST %s (Authorization %q, body %q) = %d %s; cause: %v", target, auth, body, code, resp, lastErr)
		}
		if code < 200 {
			t.Fatalf("POST %s = %d, want a final status", target, code)
		}
		if code >= 300 {
			var eb httpapi.ErrorBody
			dec := json.NewDecoder(bytes.NewReader(resp))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&eb); err != nil || dec.More() {
				t.Fatalf("POST %s = %d with body %q: not the JSON error shape (%v)", target, code, resp, err)
			}
			if eb.Error.Code == "" || eb.Error.Message == "" || httpapi.ErrorStatus(eb.Error.Code) != code {
				t.Fatalf("POST %s = %d with error %+v: want a code that maps to %d and a message", target, code, eb.Error, code)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("POST %s = %d with Content-Type %q, want application/json", target, code, ct)
			}
			return
		}
		// A submit or result that succeeded ended the attempt; the next
		// input gets a fresh one, so the fuzzer keeps reaching past fencing.
		if r := route % fzRoutes; r == fzSubmit || r == fzResult {
			if !json.Valid(resp) {
				t.Fatalf("POST %s = %d with body %q, want the step value as JSON", target, code, resp)
			}
			cur = h.dispatchFresh(t)
		}
	})
}
