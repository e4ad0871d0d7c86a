package lambdas

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// MaxAPIBodyBytes is API Gateway HTTP API's limit on a request body: 10 MB.
// A body under it whose event is over MaxPayloadBytes fails at Lambda.
const MaxAPIBodyBytes = 10 << 20

// APIFront is the HTTP API of template.yaml in front of a function: each
// request matching one of routes becomes an API Gateway HTTP API payload
// format 2.0 event, as API Gateway and `sam local start-api` send it
// (version "2.0", routeKey, rawPath, rawQueryString, cookies, headers
// lowercased with repeated values comma-joined, queryStringParameters,
// pathParameters, requestContext with http.method/path/protocol/sourceIp/
// userAgent and the Host as domainName, body base64-encoded unless it is
// text), and the function's response is written back (statusCode,
// headers, multiValueHeaders, cookies as Set-Cookie, body, base64; a
// response that is not such an object is a 200 JSON body, as API Gateway
// infers it). API Gateway's own answers, as JSON {"message": …}: no
// matching route 404 "Not Found"; a body over MaxAPIBodyBytes, or an
// event over Lambda's 6 MB, 413 "Request Entity Too Large"; the
// function's error or a malformed response 500 "Internal Server Error";
// its timeout 503 "Service Unavailable". A route whose event names the
// AWS_IAM authorizer (Route.Auth) takes only a request signed with SigV4
// by a principal WithIAM names, as API Gateway's IAM authorizer does
// (authorizeIAM): anything else is a 403 before the function runs —
// "Forbidden" unsigned, "The security token included in the request is
// invalid." for an unknown key, "The request signature we calculated does
// not match …" for a bad signature — and the event of a signed one
// carries the caller in requestContext.authorizer.iam.
func APIFront(routes []Route, fn Invoker, opts ...FrontOption) http.Handler {
	a := &apiFront{routes: routes, fn: fn}
	for _, o := range opts {
		o(a)
	}
	return a
}

type apiFront struct {
	routes []Route
	fn     Invoker
	iam    *IAM
}

func apiError(w http.ResponseWriter, status int, msg string) {
	apiErrorOfType(w, status, "", msg)
}

// apiErrorOfType is apiError with API Gateway's x-amzn-ErrorType header
// ("" none).
func apiErrorOfType(w http.ResponseWriter, status int, errorType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", newRequestID())
	if errorType != "" {
		w.Header().Set("X-Amzn-Errortype", errorType)
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{msg})
	w.Write(b)
}

func (a *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	route, params, ok := match(a.routes, r.Method, r.URL.Path)
	if !ok {
		apiError(w, http.StatusNotFound, "Not Found")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxAPIBodyBytes+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "Bad Request")
		return
	}
	if len(body) > MaxAPIBodyBytes {
		apiError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	}
	ev := requestEvent(r, route, params, body)
	if route.Auth == AuthIAM {
		iam, refused := a.authorizeIAM(r, body)
		if refused != nil {
			apiErrorOfType(w, http.StatusForbidden, refused.errorType, refused.message)
			return
		}
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: iam}
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		apiError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	out, err := a.fn.Invoke(r.Context(), payload)
	switch {
	case errors.Is(err, ErrPayloadTooLarge) && len(payload) > MaxPayloadBytes:
		apiError(w, http.StatusRequestEntityTooLarge, "Request Entity Too Large")
		return
	case errors.Is(err, ErrTimeout):
		apiError(w, http.StatusServiceUnavailable, "Service Unavailable")
		return
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		return // the client left
	case err != nil:
		apiError(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	if err := writeResponse(w, out); err != nil {
		apiError(w, http.StatusInternalServerError, "Internal Server Error")
	}
}

// match finds the route of method and path: literal segments before
// {param} before {greedy+}, a method before ANY, as API Gateway
// prioritises them; and the path parameters it binds.
func match(routes []Route, method, path string) (Route, map[string]string, bool) {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var best Route
	var bestParams map[string]string
	bestScore := -1
	for _, rt := range routes {
		if rt.Method != "ANY" && rt.Method != method {
			continue
		}
		params, score, ok := matchPath(strings.Split(strings.TrimPrefix(rt.Path, "/"), "/"), segs)
		if !ok {
			continue
		}
		score *= 2
		if rt.Method != "ANY" {
			score++
		}
		if score > bestScore {
			best, bestParams, bestScore = rt, params, score
		}
	}
	return best, bestParams, bestScore >= 0
}

// matchPath matches a route's segments against a request's: the score
// ranks literal segments over parameters over a greedy tail.
func matchPath(pattern, segs []string) (map[string]string, int, bool) {
	params := map[string]string{}
	score := 0
	for i, p := range pattern {
		if strings.HasPrefix(p, "{") && strings.HasSuffix(p, "+}") {
			if i >= len(segs) {
				return nil, 0, false
			}
			params[p[1:len(p)-2]] = strings.Join(segs[i:], "/")
			return params, score * 4, true
		}
		if i >= len(segs) {
			return nil, 0, false
		}
		switch {
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			if segs[i] == "" {
				return nil, 0, false
			}
			params[p[1:len(p)-1]] = segs[i]
			score = score*4 + 1
		case p == segs[i]:
			score = score*4 + 2
		default:
			return nil, 0, false
		}
	}
	if len(segs) != len(pattern) {
		return nil, 0, false
	}
	return params, score*4 + 3, true
}

// requestEvent is the payload format 2.0 event of r.
func requestEvent(r *http.Request, route Route, params map[string]string, body []byte) events.APIGatewayV2HTTPRequest {
	now := time.Now().UTC()
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       route.Key(),
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:     route.Key(),
			AccountID:    "123456789012",
			Stage:        "$default",
			RequestID:    newRequestID(),
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: strings.SplitN(r.Host, ".", 2)[0],
			Time:         now.Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	if len(params) > 0 {
		ev.PathParameters = params
	}
	for k, vs := range r.Header {
		k = strings.ToLower(k)
		if k == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						ev.Cookies = append(ev.Cookies, c)
					}
				}
			}
			continue
		}
		ev.Headers[k] = strings.Join(vs, ",")
	}
	ev.Headers["host"] = r.Host
	// What API Gateway adds in front of the function.
	proto, port := "http", "80"
	if r.TLS != nil {
		proto, port = "https", "443"
	}
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		port = p
	}
	if xff := ev.Headers["x-forwarded-for"]; xff != "" {
		ev.Headers["x-forwarded-for"] = xff + ", " + sourceIP(r)
	} else {
		ev.Headers["x-forwarded-for"] = sourceIP(r)
	}
	ev.Headers["x-forwarded-proto"], ev.Headers["x-forwarded-port"] = proto, port
	if r.ContentLength > 0 || len(body) > 0 {
		ev.Headers["content-length"] = strconv.Itoa(len(body))
	}
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = strings.Join(vs, ",")
		}
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type"), body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// isText reports whether a body of this content type reaches the
// function as text: UTF-8 with a text, JSON, XML, form or JavaScript type.
func isText(contentType string, body []byte) bool {
	if !utf8.Valid(body) {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return contentType == ""
	}
	switch {
	case strings.HasPrefix(mt, "text/"), strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"):
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/x-www-form-urlencoded", "application/javascript", "application/yaml", "application/x-yaml":
		return true
	}
	return false
}

// writeResponse writes the function's payload format 2.0 response.
func writeResponse(w http.ResponseWriter, out []byte) error {
	var probe map[string]json.RawMessage
	if json.Unmarshal(out, &probe) != nil || probe["statusCode"] == nil {
		// Not a response object: API Gateway infers a 200 JSON response
		// whose body is the payload.
		if !json.Valid(out) {
			return errors.New("the response is not JSON")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(out)
		return err
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return err
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return errors.New("the response's statusCode is out of range")
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return err
		}
		body = b
	}
	h := w.Header()
	keys := make([]string, 0, len(resp.Headers))
	for k := range resp.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Set(k, resp.Headers[k])
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		h.Add("Set-Cookie", c)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Apigw-Requestid", newRequestID())
	w.WriteHeader(resp.StatusCode)
	_, err := w.Write(body)
	return err
}
