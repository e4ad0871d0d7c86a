// Package modelserver is a scripted model server on 127.0.0.1: it answers the
// real coding-agent CLIs — Claude Code through the Anthropic Messages API,
// Codex through the OpenAI Responses API — from a script instead of a model,
// so that Stratus runs the real binaries with no key and no network. It
// speaks only the subset those CLIs use (streaming server-sent events, usage
// on every answer) and logs every request it receives.
//
// A script lists conversations. Each conversation's first request is
// matched, by a substring of its text, to a rule; each match is one visit
// of the rule (the last visit's answers repeat); the turn is the number
// of assistant turns the request already carries. A turn answers with
// text, with a tool call (a shell command, mapped to each CLI's own shell
// tool), or with an API error.
package modelserver

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// Script is what the server answers.
type Script struct {
	Rules []Rule `yaml:"rules"`
	// Default answers a conversation no rule matches ("" = an API error
	// naming the unmatched text).
	Default string `yaml:"default"`
}

// Rule answers the conversations whose text contains Match.
type Rule struct {
	Match  string  `yaml:"match"`
	Visits []Visit `yaml:"visits"`
}

// Visit is one conversation: its turns in order (the last repeats).
type Visit struct {
	Turns []Turn `yaml:"turns"`
}

// Turn is one model answer.
type Turn struct {
	Text  string `yaml:"text"`  // the assistant's text (the final answer)
	Shell string `yaml:"shell"` // a shell command the model calls its shell tool with
	// Error answers with this HTTP status and an API error body instead:
	// {"type":"error","error":{"type":T,"message":M}} (Anthropic) or
	// {"error":{"type":T,"message":M,"code":C}} (OpenAI), T ErrorType or
	// the API's own type for the status (errorType), M ErrorMessage or
	// "scripted error".
	Error int `yaml:"error"`
	// ErrorType is the error body's type (e.g. overloaded_error,
	// rate_limit_error); "" = the API's type for the status.
	ErrorType string `yaml:"error_type"`
	// ErrorCode is the OpenAI error body's code (e.g.
	// rate_limit_exceeded); "" = null. Anthropic bodies have none.
	ErrorCode string `yaml:"error_code"`
	// ErrorMessage is the error body's message; "" = "scripted error".
	ErrorMessage string `yaml:"error_message"`
	// ErrorFields are more fields of the error object, e.g. Codex's
	// usage_limit_reached error carries resets_at (Unix seconds) and
	// plan_type. They cannot replace type, message or code.
	ErrorFields map[string]any `yaml:"error_fields"`
	// Headers are sent with the error answer, as the real APIs send
	// retry-after, anthropic-ratelimit-*-reset or x-ratelimit-reset-*
	// with a 429. Only on an error turn.
	Headers      map[string]string `yaml:"headers"`
	InputTokens  int64             `yaml:"input_tokens"`  // default 100
	OutputTokens int64             `yaml:"output_tokens"` // default 20
	CachedTokens int64             `yaml:"cached_tokens"` // read from the prompt cache (counted within input)
}

// Load reads a script file strictly: a regular file (inputfile.ReadFile:
// EINVALID otherwise).
func Load(path string) (*Script, error) {
	b, err := inputfile.ReadFile("script file", path)
	if err != nil {
		return nil, err
	}
	var s Script
	if err := yamlast.Check(b, yamlast.DefaultLimits); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := yaml.UnmarshalWithOptions(b, &s, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", path, yaml.FormatError(err, false, true))
	}
	if len(s.Rules) == 0 && s.Default == "" {
		return nil, fmt.Errorf("%s: no rules and no default: the script would answer nothing", path)
	}
	for i, r := range s.Rules {
		if r.Match == "" || len(r.Visits) == 0 {
			return nil, fmt.Errorf("%s: rules[%d]: match and at least one visit are required", path, i)
		}
		for j, v := range r.Visits {
			if len(v.Turns) == 0 {
				return nil, fmt.Errorf("%s: rules[%d].visits[%d]: at least one turn is required", path, i, j)
			}
			for k, t := range v.Turns {
				where := fmt.Sprintf("%s: rules[%d].visits[%d].turns[%d]", path, i, j, k)
				set := 0
				for _, on := range []bool{t.Text != "", t.Shell != "", t.Error != 0} {
					if on {
						set++
					}
				}
				switch {
				case set != 1:
					return nil, fmt.Errorf("%s: give exactly one of text, shell, error", where)
				case t.Error != 0 && (t.Error < 400 || t.Error > 599):
					return nil, fmt.Errorf("%s: error %d is not an HTTP error status; valid: 400-599", where, t.Error)
				case t.Error == 0 && (t.ErrorType != "" || t.ErrorCode != "" || t.ErrorMessage != "" || len(t.Headers) > 0 || len(t.ErrorFields) > 0):
					return nil, fmt.Errorf("%s: error_type, error_code, error_message, error_fields and headers go with error (an HTTP status); this turn answers with text or shell", where)
				}
				for _, k := range []string{"type", "message", "code"} {
					if _, ok := t.ErrorFields[k]; ok {
						return nil, fmt.Errorf("%s.error_fields: %q is set by error_type, error_message or error_code; valid: other fields of the error object", where, k)
					}
				}
				for k, v := range t.Headers {
					if !headerName().MatchString(k) || strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
						return nil, fmt.Errorf("%s.headers: %q: %q is not a valid HTTP header; valid: a token name and a value without control characters", where, k, v)
					}
				}
				for _, c := range []struct {
					field string
					v     int64
				}{{"input_tokens", t.InputTokens}, {"output_tokens", t.OutputTokens}, {"cached_tokens", t.CachedTokens}} {
					if c.v < 0 {
						return nil, fmt.Errorf("%s.%s: %d is negative; valid: a token count >= 0", where, c.field, c.v)
					}
				}
				if t.CachedTokens > inputOf(t) {
					return nil, fmt.Errorf("%s.cached_tokens: %d is more than the turn's input_tokens (%d); valid: 0 to input_tokens (the cached part of the input)", where, t.CachedTokens, inputOf(t))
				}
			}
		}
	}
	return &s, nil
}

// Request is one request the server received, as logged.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         json.RawMessage
	Rule         string // the matched rule's Match ("" = none)
	Visit, Turn  int    // 1-based visit, 0-based turn
}

// Server answers from a script. It is safe for concurrent use.
type Server struct {
	Script *Script
	Log    io.Writer // one JSON line per request; nil = none

	mu     sync.Mutex
	visits map[int]int // rule index → visits so far
	reqs   []Request
	ids    atomic.Int64
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// ServeHTTP answers POST /v1/messages (Anthropic) and POST /v1/responses
// (OpenAI); any other request is logged and answered 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var api string
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		api = "anthropic"
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/responses"):
		api = "openai"
	}
	if api != "" && r.ContentLength > MaxBodyBytes { // declared too large: not read
		s.record(Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: json.RawMessage("null")})
		writeError(w, api, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body of %d bytes is over %d bytes", r.ContentLength, MaxBodyBytes))
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	rec := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: rawJSON(body)}
	if api == "" {
		s.record(rec)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"error":{"type":"not_found","message":%q}}`, "the scripted model server answers POST /v1/messages and POST /v1/responses, not "+r.Method+" "+r.URL.Path)
		return
	}
	switch {
	case len(body) > MaxBodyBytes:
		s.record(rec)
		writeError(w, api, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", MaxBodyBytes))
		return
	case !json.Valid(body):
		s.record(rec)
		writeError(w, api, http.StatusBadRequest, "the request body is not JSON (or nests deeper than 10,000 levels)")
		return
	case !isObject(body):
		s.record(rec)
		writeError(w, api, http.StatusBadRequest, fmt.Sprintf("the request body is %s; want a JSON object (a Messages or Responses API request)", clip(body)))
		return
	}
	text, turn := conversation(api, body)
	t, rule, visit := s.pick(text, turn)
	rec.Rule, rec.Visit, rec.Turn = rule, visit, turn
	s.record(rec)
	if t == nil {
		writeError(w, api, http.StatusBadRequest, fmt.Sprintf("the script has no rule matching this conversation (turn %d): %.200q", turn, text))
		return
	}
	if t.Error != 0 {
		for k, v := range t.Headers {
			w.Header().Set(k, v)
		}
		msg := t.ErrorMessage
		if msg == "" {
			msg = "scripted error"
		}
		writeAPIError(w, api, t.Error, t.ErrorType, t.ErrorCode, msg, t.ErrorFields)
		return
	}
	id := s.ids.Add(1)
	if api == "anthropic" {
		anthropicStream(w, *t, id, structuredOutput(body))
	} else {
		openaiStream(w, *t, id)
	}
}

// MaxBodyBytes bounds a request body (larger: 413); KeptBodyBytes and
// KeptRequests bound what Requests keeps, so a long-running server does
// not grow: a larger body is kept as null, the oldest requests dropped.
const (
	MaxBodyBytes  = 64 << 20
	KeptBodyBytes = 1 << 20
	KeptRequests  = 1000
)

func (s *Server) record(r Request) {
	n := len(r.Body)
	if n > KeptBodyBytes {
		r.Body = json.RawMessage("null")
	}
	s.mu.Lock()
	if len(s.reqs) >= KeptRequests {
		s.reqs = append(s.reqs[:0:0], s.reqs[len(s.reqs)-KeptRequests+1:]...)
	}
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	if s.Log != nil {
		b, _ := json.Marshal(map[string]any{"method": r.Method, "path": r.Path, "rule": r.Rule, "visit": r.Visit, "turn": r.Turn, "bytes": n})
		s.mu.Lock()
		fmt.Fprintf(s.Log, "%s\n", b)
		s.mu.Unlock()
	}
}

// pick finds the turn for a conversation's text at turn: a turn-0 request
// starts a new visit of the first rule whose Match it contains.
func (s *Server) pick(text string, turn int) (*Turn, string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.visits == nil {
		s.visits = map[int]int{}
	}
	for i, r := range s.Script.Rules {
		if !strings.Contains(text, r.Match) {
			continue
		}
		if turn == 0 || s.visits[i] == 0 {
			s.visits[i]++
		}
		v := r.Visits[min(s.visits[i], len(r.Visits))-1]
		if len(v.Turns) == 0 {
			return nil, r.Match, s.visits[i]
		}
		t := v.Turns[min(turn, len(v.Turns)-1)]
		return &t, r.Match, s.visits[i]
	}
	if s.Script.Default != "" {
		return &Turn{Text: s.Script.Default}, "", 0
	}
	return nil, "", 0
}

// conversation returns the text a request's rules are matched against
// (its system prompt and first user message) and its turn: how many
// assistant turns it already carries.
func conversation(api string, body []byte) (string, int) {
	var req struct {
		System       json.RawMessage   `json:"system"`       // anthropic: string or blocks
		Messages     []json.RawMessage `json:"messages"`     // anthropic
		Instructions string            `json:"instructions"` // openai
		Input        json.RawMessage   `json:"input"`        // openai: string or items
	}
	json.Unmarshal(body, &req)
	var text strings.Builder
	turn := 0
	if api == "anthropic" {
		text.WriteString(flatten(req.System))
		for _, m := range req.Messages {
			var msg struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			}
			json.Unmarshal(m, &msg)
			if msg.Role == "assistant" {
				turn++
			} else if turn == 0 {
				text.WriteString("\n" + flatten(msg.Content))
			}
		}
		return text.String(), turn
	}
	text.WriteString(req.Instructions)
	var items []json.RawMessage
	if json.Unmarshal(req.Input, &items) != nil {
		text.WriteString("\n" + flatten(req.Input))
		return text.String(), 0
	}
	for _, it := range items {
		var item struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		json.Unmarshal(it, &item)
		switch {
		case item.Type == "function_call" || item.Type == "custom_tool_call" || item.Type == "local_shell_call" || (item.Role == "assistant" && item.Type == "message"):
			turn++
		case turn == 0:
			text.WriteString("\n" + flatten(item.Content))
		}
	}
	return text.String(), turn
}

// flatten is the text of a JSON string, or of every "text" field in it.
func flatten(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return ""
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				b.WriteString(t + "\n")
			}
			for k, c := range x {
				if k != "text" {
					walk(c)
				}
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return b.String()
}

func rawJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

// inputOf is the input tokens a turn reports (100 when it sets none).
func inputOf(t Turn) int64 {
	in, _, _ := usageOf(t)
	return in
}

func usageOf(t Turn) (in, out, cached int64) {
	in, out = t.InputTokens, t.OutputTokens
	if in == 0 && out == 0 {
		in, out = 100, 20
	}
	return in, out, t.CachedTokens
}

// sse writes one server-sent event.
func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// headerName is what a scripted header may be named: letters, digits and
// hyphens (every header the real APIs send is so named).
var headerName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*$`) })

// writeError answers a request the server refuses itself (a bad body, no
// rule): an invalid_request_error.
func writeError(w http.ResponseWriter, api string, status int, msg string) {
	writeAPIError(w, api, status, "invalid_request_error", "", msg, nil)
}

// writeAPIError writes an API error body of type typ ("" = the API's type
// for status, errorType), with, for OpenAI, code ("" = null), and the
// extra fields of the error object.
func writeAPIError(w http.ResponseWriter, api string, status int, typ, code, msg string, extra map[string]any) {
	if typ == "" {
		typ = errorType(api, status)
	}
	e := map[string]any{}
	for k, v := range extra {
		e[k] = v
	}
	e["type"], e["message"] = typ, msg
	var body map[string]any
	if api == "anthropic" {
		body = map[string]any{"type": "error", "error": e}
	} else {
		e["code"] = nil
		if code != "" {
			e["code"] = code
		}
		body = map[string]any{"error": e}
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// errorType is the error type each API documents for an HTTP status:
// Anthropic's errors page (docs.anthropic.com/en/api/errors: 400
// invalid_request_error, 401 authentication_error, 403 permission_error,
// 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 500
// api_error, 529 overloaded_error) and OpenAI's error codes page (429
// requests or tokens, 500 server_error, 503 the same, "the engine is
// currently overloaded"). A status neither lists is
// invalid_request_error below 500 and api_error (server_error) above.
func errorType(api string, status int) string {
	if api == "anthropic" {
		switch status {
		case 401:
			return "authentication_error"
		case 403:
			return "permission_error"
		case 404:
			return "not_found_error"
		case 413:
			return "request_too_large"
		case 429:
			return "rate_limit_error"
		case 529:
			return "overloaded_error"
		}
		if status >= 500 {
			return "api_error"
		}
		return "invalid_request_error"
	}
	switch {
	case status == 429:
		return "requests"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// structuredTool is the tool Claude Code offers for --json-schema.
const structuredTool = "StructuredOutput"

// structuredOutput reports whether an Anthropic request offers the
// StructuredOutput tool and has not called it yet.
func structuredOutput(body []byte) bool {
	var req struct {
		Tools    []struct{ Name string } `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return false
	}
	offered := false
	for _, t := range req.Tools {
		offered = offered || t.Name == structuredTool
	}
	for _, m := range req.Messages {
		var blocks []struct{ Type, Name string }
		if m.Role == "assistant" && json.Unmarshal(m.Content, &blocks) == nil {
			for _, b := range blocks {
				if b.Type == "tool_use" && b.Name == structuredTool {
					return false
				}
			}
		}
	}
	return offered
}

// anthropicStream answers a Messages request with a stream (Anthropic
// Messages API, streaming: message_start, content blocks, message_delta
// with the usage, message_stop).
func anthropicStream(w http.ResponseWriter, t Turn, id int64, structured bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	in, out, cached := usageOf(t)
	msgID := fmt.Sprintf("msg_scripted_%d", id)
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": "scripted", "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in - cached, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached},
	}})
	stop := "end_turn"
	if structured && t.Shell == "" && json.Valid([]byte(t.Text)) {
		// Claude Code with --json-schema offers a StructuredOutput tool and
		// takes the answer from its call: a JSON answer is that call.
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_scripted_%d", id), "name": structuredTool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": t.Text}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		stop = "tool_use"
	} else if t.Shell != "" {
		input, _ := json.Marshal(map[string]any{"command": t.Shell, "description": "scripted command"})
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_scripted_%d", id), "name": "Bash", "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		stop = "tool_use"
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": t.Text}})
		sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"input_tokens": in - cached, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

// openaiStream answers a Responses request with a stream (OpenAI
// Responses API, streaming: response.created, one output item, and
// response.completed with the usage).
func openaiStream(w http.ResponseWriter, t Turn, id int64) {
	w.Header().Set("Content-Type", "text/event-stream")
	in, out, cached := usageOf(t)
	respID := fmt.Sprintf("resp_scripted_%d", id)
	sse(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": respID, "object": "response", "status": "in_progress", "output": []any{}}})
	var item map[string]any
	if t.Shell != "" {
		args, _ := json.Marshal(map[string]any{"cmd": t.Shell})
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_scripted_%d", id), "call_id": fmt.Sprintf("call_scripted_%d", id),
			"name": "exec_command", "arguments": string(args), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_scripted_%d", id), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": t.Text, "annotations": []any{}}}}
	}
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item})
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{
		"id": respID, "object": "response", "status": "completed", "output": []any{item},
		"usage": map[string]any{"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": cached},
			"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + out},
	}})
}

func isObject(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c == '{'
	}
	return false
}

// clip shows a body in a message: at most 40 bytes of it.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
