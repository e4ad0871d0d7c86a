package lambdas

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// FunctionSpec is an AWS::Serverless::Function of a template as SAM
// deploys it: its own properties over Globals.Function's.
type FunctionSpec struct {
	LogicalID     string
	CodeURI       string        // functions/<name>: make lambdas builds bin/lambdas/<name>/bootstrap
	MemoryMB      int           // MemorySize; DefaultMemoryMB when neither gives one
	Timeout       time.Duration // Timeout; DefaultTimeout when neither gives one
	Architectures []string
	// Env is Environment.Variables, Globals' and the function's merged,
	// values as written: a string, or an intrinsic function ({"Ref": …},
	// {"Fn::If": …}) the deployed stack resolves.
	Env map[string]any
}

// Route is an HttpApi event of a function: "METHOD /path" as API Gateway's
// route key, the path's {name} and {name+} segments as written.
type Route struct {
	Event  string // the event's name in the template
	Method string // GET, POST, … or ANY
	Path   string // /v1/agents/{name}/render-size
	Auth   string // AuthIAM for API Gateway's IAM authorizer; "" none
}

// Key is the route key, "GET /v1/healthz".
func (r Route) Key() string { return r.Method + " " + r.Path }

// SQSMapping is a function's SQS event: the event source mapping Lambda
// polls the queue through.
type SQSMapping struct {
	Event                   string
	QueueLogicalID          string // the queue resource of Queue: !GetAtt Q.Arn (or !Ref)
	BatchSize               int    // default 10, as SAM's
	ReportBatchItemFailures bool   // FunctionResponseTypes holds ReportBatchItemFailures
}

// template is the parts of a SAM template read here, intrinsic functions
// left as written.
type template struct {
	Globals struct {
		Function map[string]any
	}
	Resources map[string]struct {
		Type       string
		Properties map[string]any
	}
}

func parseTemplate(templateYAML []byte) (*template, error) {
	raw, err := intrinsics.ProcessYAML(templateYAML, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return nil, fmt.Errorf("lambdas: the template does not parse: %w", err)
	}
	var t template
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("lambdas: the template does not parse: %w", err)
	}
	return &t, nil
}

// function returns the properties of the AWS::Serverless::Function id.
func (t *template) function(id string) (map[string]any, error) {
	r, ok := t.Resources[id]
	if !ok || r.Type != "AWS::Serverless::Function" {
		var fns []string
		for k, r := range t.Resources {
			if r.Type == "AWS::Serverless::Function" {
				fns = append(fns, k)
			}
		}
		slices.Sort(fns)
		return nil, fmt.Errorf("lambdas: the template has no AWS::Serverless::Function %q; it has %s", id, strings.Join(fns, ", "))
	}
	return r.Properties, nil
}

// FunctionsFromTemplate returns the template's AWS::Serverless::Function
// resources, sorted by logical id.
func FunctionsFromTemplate(templateYAML []byte) ([]FunctionSpec, error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return nil, err
	}
	var out []FunctionSpec
	for id, r := range t.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		g, p := t.Globals.Function, r.Properties
		prop := func(k string) any {
			if v, ok := p[k]; ok {
				return v
			}
			return g[k]
		}
		s := FunctionSpec{LogicalID: id, MemoryMB: DefaultMemoryMB, Timeout: DefaultTimeout, Env: map[string]any{}}
		s.CodeURI, _ = prop("CodeUri").(string)
		if v, ok := number(prop("MemorySize")); ok {
			s.MemoryMB = v
		}
		if v, ok := number(prop("Timeout")); ok {
			s.Timeout = time.Duration(v) * time.Second
		}
		for _, a := range asList(prop("Architectures")) {
			if a, ok := a.(string); ok {
				s.Architectures = append(s.Architectures, a)
			}
		}
		for _, src := range []map[string]any{g, p} {
			for k, v := range asMap(asMap(src["Environment"])["Variables"]) {
				s.Env[k] = v
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b FunctionSpec) int { return strings.Compare(a.LogicalID, b.LogicalID) })
	return out, nil
}

// RoutesFromTemplate returns the HttpApi events of the function
// (its logical id), sorted by path then method. Errors: no such function,
// an HttpApi event without a Path and Method (SAM's implicit catch-all is
// not supported), a PayloadFormatVersion other than "2.0".
func RoutesFromTemplate(templateYAML []byte, function string) ([]Route, error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return nil, err
	}
	p, err := t.function(function)
	if err != nil {
		return nil, err
	}
	var routes []Route
	for name, ev := range asMap(p["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "HttpApi" {
			continue
		}
		props := asMap(ev["Properties"])
		method, _ := props["Method"].(string)
		path, _ := props["Path"].(string)
		if method == "" || path == "" {
			return nil, fmt.Errorf("lambdas: %s event %s: an HttpApi event needs Path and Method (the implicit $default route is not emulated)", function, name)
		}
		if v, ok := props["PayloadFormatVersion"]; ok && fmt.Sprint(v) != "2.0" {
			return nil, fmt.Errorf("lambdas: %s event %s: PayloadFormatVersion %v; only \"2.0\" is emulated", function, name, v)
		}
		method = strings.ToUpper(method)
		if method == "X-AMAZON-APIGATEWAY-ANY-METHOD" {
			method = "ANY"
		}
		auth, err := t.routeAuth(function, name, props)
		if err != nil {
			return nil, err
		}
		routes = append(routes, Route{Event: name, Method: method, Path: path, Auth: auth})
	}
	slices.SortFunc(routes, func(a, b Route) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(a.Method, b.Method)
	})
	return routes, nil
}

// routeAuth is the authorizer of HttpApi event name of function: its
// Auth.Authorizer, else its API's Auth.DefaultAuthorizer, "NONE" or none
// being ""; AWS_IAM needs the API's Auth.EnableIamAuthorizer, as SAM
// requires. Errors: an authorizer the front does not emulate (JWT and
// Lambda authorizers), AWS_IAM on an API that does not enable it.
func (t *template) routeAuth(function, name string, props map[string]any) (string, error) {
	api := asMap(t.Resources[refTarget(props["ApiId"])].Properties["Auth"])
	auth, ok := asMap(props["Auth"])["Authorizer"].(string)
	if !ok {
		auth, _ = api["DefaultAuthorizer"].(string)
	}
	switch auth {
	case "", "NONE":
		return "", nil
	case AuthIAM:
		if api["EnableIamAuthorizer"] != true {
			return "", fmt.Errorf("lambdas: %s event %s: Auth.Authorizer AWS_IAM, but its HttpApi does not set Auth.EnableIamAuthorizer: true (SAM refuses it)", function, name)
		}
		return AuthIAM, nil
	}
	return "", fmt.Errorf("lambdas: %s event %s: Auth.Authorizer %q is not emulated; valid: AWS_IAM, NONE", function, name, auth)
}

// SQSMappingFromTemplate returns the function's SQS event. Errors: no
// such function, none or more than one SQS event, a Queue that names no
// resource of the template.
func SQSMappingFromTemplate(templateYAML []byte, function string) (SQSMapping, error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return SQSMapping{}, err
	}
	p, err := t.function(function)
	if err != nil {
		return SQSMapping{}, err
	}
	var found []SQSMapping
	for name, ev := range asMap(p["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "SQS" {
			continue
		}
		props := asMap(ev["Properties"])
		m := SQSMapping{Event: name, BatchSize: 10, QueueLogicalID: refTarget(props["Queue"])}
		if m.QueueLogicalID == "" {
			return SQSMapping{}, fmt.Errorf("lambdas: %s event %s: Queue %v is not !GetAtt or !Ref of a queue of the template", function, name, props["Queue"])
		}
		if _, ok := t.Resources[m.QueueLogicalID]; !ok {
			return SQSMapping{}, fmt.Errorf("lambdas: %s event %s: Queue names %s, which is not a resource of the template", function, name, m.QueueLogicalID)
		}
		if v, ok := number(props["BatchSize"]); ok {
			m.BatchSize = v
		}
		for _, r := range asList(props["FunctionResponseTypes"]) {
			if r == "ReportBatchItemFailures" {
				m.ReportBatchItemFailures = true
			}
		}
		found = append(found, m)
	}
	if len(found) != 1 {
		return SQSMapping{}, fmt.Errorf("lambdas: %s has %d SQS events; want one", function, len(found))
	}
	return found[0], nil
}

// refTarget is the logical id of {"Fn::GetAtt": [id, attr]}, {"Fn::GetAtt":
// "id.attr"} or {"Ref": id}; "" for anything else.
func refTarget(v any) string {
	m := asMap(v)
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) > 0 {
			s, _ := g[0].(string)
			return s
		}
	case string:
		id, _, _ := strings.Cut(g, ".")
		return id
	}
	return ""
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asList(v any) []any         { l, _ := v.([]any); return l }

// number reads a template number written as a number or a string.
func number(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		return int(n), true
	case string:
		i, err := strconv.Atoi(n)
		return i, err == nil
	}
	return 0, false
}
