package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/failclass"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
)

// openAPIPath is the worker API's document, at the repository root.
var openAPIPath = filepath.Join("..", "..", "openapi.yaml")

// The subset of OpenAPI 3.1 the tests read.
type oaDoc struct {
	OpenAPI    string            `yaml:"openapi"`
	Security   []map[string]any  `yaml:"security"`
	Paths      map[string]oaPath `yaml:"paths"`
	Components struct {
		SecuritySchemes map[string]any      `yaml:"securitySchemes"`
		Responses       map[string]any      `yaml:"responses"`
		Schemas         map[string]oaSchema `yaml:"schemas"`
	} `yaml:"components"`
}

type oaPath struct {
	Get     *oaOperation `yaml:"get"`
	Put     *oaOperation `yaml:"put"`
	Post    *oaOperation `yaml:"post"`
	Delete  *oaOperation `yaml:"delete"`
	Options *oaOperation `yaml:"options"`
	Head    *oaOperation `yaml:"head"`
	Patch   *oaOperation `yaml:"patch"`
	Trace   *oaOperation `yaml:"trace"`
}

func (p oaPath) operations() map[string]*oaOperation {
	all := map[string]*oaOperation{"GET": p.Get, "PUT": p.Put, "POST": p.Post, "DELETE": p.Delete,
		"OPTIONS": p.Options, "HEAD": p.Head, "PATCH": p.Patch, "TRACE": p.Trace}
	for m, op := range all {
		if op == nil {
			delete(all, m)
		}
	}
	return all
}

type oaOperation struct {
	Description string            `yaml:"description"`
	Security    *[]map[string]any `yaml:"security"` // nil: the document's default
	Responses   map[string]any    `yaml:"responses"`
}

// iam reports whether the operation is authorised by API Gateway's
// AWS_IAM authorizer (security: sigv4) rather than a Bearer credential.
func (op *oaOperation) iam() bool {
	if op.Security == nil {
		return false
	}
	for _, s := range *op.Security {
		if _, ok := s["sigv4"]; ok {
			return true
		}
	}
	return false
}

type oaSchema struct {
	Required   []string       `yaml:"required"`
	Properties map[string]any `yaml:"properties"`
}

// route is one (method, path) pair, the path in OpenAPI template form.
type route struct{ method, path string }

func (r route) String() string { return r.method + " " + r.path }

func loadOpenAPI(t *testing.T) oaDoc {
	t.Helper()
	b, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc oaDoc
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openAPIPath, err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("%s: openapi = %q, want 3.1.0", openAPIPath, doc.OpenAPI)
	}
	return doc
}

func documentedRoutes(doc oaDoc) map[route]*oaOperation {
	out := map[route]*oaOperation{}
	for p, item := range doc.Paths {
		for m, op := range item.operations() {
			out[route{m, p}] = op
		}
	}
	return out
}

// registration matches a ServeMux registration with a literal pattern:
// h.mux.HandleFunc("GET /v1/healthz", ...) or mux.Handle("...", ...).
var registration = regexp.MustCompile(`\.Handle(?:Func)?\(\s*"([^"]*)"`)

// registeredRoutes reads the route patterns out of the package's non-test
// sources, so the route list is written once, in New.
func registeredRoutes(t *testing.T) map[route]bool {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[route]bool{}
	fallback := false
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, m := range registration.FindAllStringSubmatch(readText(t, f), -1) {
			method, path, ok := strings.Cut(m[1], " ")
			switch {
			case m[1] == "/":
				fallback = true // the JSON "no route" answer, not an API route
			case !ok || method == "" || strings.ContainsAny(method, "/{") || !strings.HasPrefix(path, "/"):
				t.Errorf("%s: pattern %q has no method or a host; register one method and path per route so openapi.yaml can list it", f, m[1])
			default:
				// ServeMux's {name...} is OpenAPI's {name}.
				out[route{method, strings.ReplaceAll(path, "...}", "}")}] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no route registrations found in the httpapi sources; has New changed how it registers routes?")
	}
	if !fallback {
		t.Error(`no "/" fallback registration found: unmatched requests would get ServeMux's plain-text 404/405 instead of the JSON error shape`)
	}
	return out
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// probeStore is the store the probes run against: every method panics on
// the nil embedded Store, which probe reports, because a request without a
// credential must be refused before the store is touched (no route that
// reads state is public).
type probeStore struct{ store.Store }

// probe sends method+path with no credential and no body to the real
// router and returns the status and, for an error answer, its body.
func probe(t *testing.T, h http.Handler, method, path string) (status int, eb httpapi.ErrorBody, ok bool) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s %s without a credential reached the service's store: %v", method, path, p)
			ok = false
		}
	}()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	if rec.Code >= 400 {
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: %d with Content-Type %q, want the JSON error shape", method, path, rec.Code, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
			t.Errorf("%s %s: %d body %q is not the JSON error shape", method, path, rec.Code, rec.Body)
		}
	}
	return rec.Code, eb, true
}

// noRoute reports whether an answer is the router's fallback, i.e. no route
// matched the method and path.
func noRoute(status int, eb httpapi.ErrorBody) bool {
	return status == http.StatusNotFound && strings.HasPrefix(eb.Error.Message, "no route ")
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

// concrete fills a path template's parameters.
func concrete(path string) string { return pathParam.ReplaceAllString(path, "probe-agent") }

// openapi.yaml documents every route of the worker API
// (docs/contracts.md § Routes) exactly: the set of (method, path) it lists
// equals the set New registers, a route added to one and not the other fails
// here.
func TestOpenAPI_DocumentsEveryRouteTheRouterRegisters(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	documented := documentedRoutes(doc)
	registered := registeredRoutes(t)
	var missing, extra []string
	for r := range registered {
		if documented[r] == nil {
			missing = append(missing, r.String())
		}
	}
	for r := range documented {
		if !registered[r] {
			extra = append(extra, r.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 {
		t.Errorf("routes registered in httpapi.New but not in openapi.yaml: %v", missing)
	}
	if len(extra) > 0 {
		t.Errorf("routes in openapi.yaml that httpapi.New does not register: %v", extra)
	}
}

// The same equality, checked against the running router rather than its
// source: every documented operation is served (not the "no route"
// fallback), every other common method on a documented path is not, an
// undocumented path is the JSON 404, and each credential-less answer is one
// of the statuses the operation documents.
func TestOpenAPI_RouterServesExactlyTheDocumentedRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	h := httpapi.New(worker.New(worker.Config{Store: probeStore{}}))
	for r, op := range documentedRoutes(doc) {
		path := concrete(r.path)
		status, eb, ok := probe(t, h, r.method, path)
		if !ok {
			continue
		}
		if noRoute(status, eb) {
			t.Errorf("%s is documented but the router has no such route (%q)", r, eb.Error.Message)
			continue
		}
		if _, listed := op.Responses[strconv.Itoa(status)]; !listed {
			t.Errorf("%s without a credential answers %d (%s), which openapi.yaml does not list for it", r, status, eb.Error.Message)
		}
		public := op.Security != nil && len(*op.Security) == 0
		switch {
		case op.iam():
			// Behind API Gateway's AWS_IAM authorizer only: the router
			// alone has no verified identity.
			if status != http.StatusForbidden {
				t.Errorf("%s is IAM-authorised per openapi.yaml (sigv4), yet answered %d without an identity; want 403", r, status)
			}
		case !public && status != http.StatusUnauthorized && status != http.StatusBadRequest:
			t.Errorf("%s requires a Bearer credential per openapi.yaml, yet answered %d without one", r, status)
		}
		if public && status/100 != 2 {
			t.Errorf("%s is public per openapi.yaml (security: []), yet answered %d without a credential", r, status)
		}
	}
	for p, item := range doc.Paths {
		ops := item.operations()
		for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			if ops[m] != nil {
				continue
			}
			// Not served: the JSON 404, or 405 (the path exists with other methods).
			if status, eb, ok := probe(t, h, m, concrete(p)); ok && !noRoute(status, eb) && status != http.StatusMethodNotAllowed {
				t.Errorf("the router serves %s %s (answered %d), but openapi.yaml does not document it", m, p, status)
			}
		}
	}
	for _, r := range []route{{"GET", "/v1/nope"}, {"POST", "/v1/worker"}, {"GET", "/v1/worker/prompt/extra"}} {
		if status, eb, _ := probe(t, h, r.method, r.path); !noRoute(status, eb) {
			t.Errorf("undocumented %s answered %d %q, want the JSON 404 \"no route\"", r, status, eb.Error.Message)
		}
	}
}

// The document is well formed where a reader relies on it: every $ref
// resolves, every operation but healthz cites a section of
// docs/contracts.md, every
// operation that takes a credential documents 401, and every one that
// reaches the service documents 500.
func TestOpenAPI_RefsResolveAndOperationsAreComplete(t *testing.T) {
	t.Parallel()
	raw := readText(t, openAPIPath)
	doc := loadOpenAPI(t)
	for _, m := range regexp.MustCompile(`\$ref: "#/components/(\w+)/(\w+)"`).FindAllStringSubmatch(raw, -1) {
		var found bool
		switch m[1] {
		case "schemas":
			_, found = doc.Components.Schemas[m[2]]
		case "responses":
			_, found = doc.Components.Responses[m[2]]
		}
		if !found {
			t.Errorf("$ref %s does not resolve", m[0])
		}
	}
	if n := strings.Count(raw, "$ref:"); n != len(regexp.MustCompile(`\$ref: "#/components/(schemas|responses)/\w+"`).FindAllString(raw, -1)) {
		t.Errorf("some of the %d $refs are not #/components/{schemas,responses}/<Name>", n)
	}
	if _, ok := doc.Components.SecuritySchemes["bearer"]; !ok || len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Errorf("the document's default security is not the bearer scheme: %v", doc.Security)
	}
	for r, op := range documentedRoutes(doc) {
		if !citesContracts.MatchString(op.Description) && r.path != "/v1/healthz" {
			t.Errorf("%s: description cites no section of docs/contracts.md", r)
		}
		if len(op.Responses) == 0 {
			t.Errorf("%s: no responses", r)
		}
		public := op.Security != nil && len(*op.Security) == 0
		if _, ok := op.Responses["401"]; !public && !op.iam() && !ok {
			t.Errorf("%s takes a credential but does not document 401", r)
		}
		if _, ok := op.Responses["403"]; op.iam() && !ok {
			t.Errorf("%s is IAM-authorised but does not document 403", r)
		}
		if _, ok := op.Responses["500"]; !ok && r.path != "/v1/healthz" {
			t.Errorf("%s does not document 500", r)
		}
	}
}

// Each body schema lists exactly the JSON fields of the Go type the handler
// encodes or decodes, so a field added to a type shows up here.
func TestOpenAPI_SchemasMatchGoTypes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	for name, v := range map[string]any{
		"Payload":         worker.Payload{},
		"SystemRef":       worker.SystemRef{},
		"Context":         worker.Context{},
		"StepPointer":     worker.StepPointer{},
		"EngineSpec":      worker.EngineSpec{},
		"StepValue":       worker.StepValue{},
		"ResultBody":      worker.ResultBody{},
		"FailureValue":    worker.FailureValue{},
		"Stats":           worker.Stats{},
		"DegradationBody": worker.DegradationBody{},
		"WorkspaceSpec":   worker.WorkspaceSpec{},
		"Blob":            worker.Blob{},
		"HeadAdvance":     worker.HeadAdvance{},
		"RenderSize":      stratus.RenderSize{},
		"Error":           httpapi.ErrorBody{},
	} {
		s, ok := doc.Components.Schemas[name]
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		want := jsonFields(reflect.TypeOf(v))
		var got []string
		for p := range s.Properties {
			got = append(got, p)
		}
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("schema %s properties %v, want the JSON fields of %T: %v", name, got, v, want)
		}
		for _, r := range s.Required {
			if _, ok := s.Properties[r]; !ok {
				t.Errorf("schema %s requires %q, which it does not define", name, r)
			}
		}
	}
}

// The FailureValue's class enum is failclass.Classes: what the result
// route accepts (internal/failclass).
func TestOpenAPI_FailureClassesAreFailclasses(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	class, _ := doc.Components.Schemas["FailureValue"].Properties["class"].(map[string]any)
	var got []string
	if enum, ok := class["enum"].([]any); ok {
		for _, v := range enum {
			got = append(got, fmt.Sprint(v))
		}
	}
	if !slices.Equal(got, failclass.Classes) {
		t.Errorf("FailureValue.class enum %v, want failclass.Classes %v", got, failclass.Classes)
	}
}

func jsonFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Sanity check of the probe itself: with a credential-less request the
// store is never reached, so the nil-embedded probeStore is safe.
func ExampleNew_probe() {
	h := httpapi.New(worker.New(worker.Config{Store: probeStore{}}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/worker/submit", nil))
	fmt.Println(rec.Code, strings.TrimSpace(rec.Body.String()))
	// Output: 401 {"error":{"code":"unauthorized","message":"missing; valid: Bearer \u003cwh- handle or capability token\u003e","field":"Authorization"}}
}

// citesContracts matches a citation of a section of docs/contracts.md (its
// headings are checked by the repository's TestDocsCitations).
var citesContracts = regexp.MustCompile(`docs/contracts\.md § [A-Z]`)
