package functions_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"

	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

const templatePath = "../template.yaml"

// goformationLags lists properties template.yaml uses that goformation
// v7.14.9's schema does not know (its HttpApi has "AccessLogSetting" and
// an Auth without EnableIamAuthorizer; its ECS service predates
// AvailabilityZoneRebalancing), a nested one as "Outer.Inner".
// cfn-lint validates them against the real schema (`make lint-cfn`); here
// they are taken out before goformation's strict decode, and
// TestTemplate_Parses checks they are still where they belong.
var goformationLags = map[string][]string{
	"AWS::Serverless::HttpApi": {"AccessLogSettings", "Auth.EnableIamAuthorizer"},
	"AWS::ECS::Service":        {"AvailabilityZoneRebalancing"},
}

// tmpl is template.yaml three ways: goformation's typed template (intrinsic
// functions resolved), and the raw resources and globals with intrinsic
// functions left as written ({"Ref": ...}, {"Fn::GetAtt": ...}).
type tmpl struct {
	typed      *cloudformation.Template
	raw        map[string]map[string]any // logical id -> resource
	globals    map[string]any            // Globals.Function
	params     map[string]map[string]any
	outputs    map[string]any
	conditions map[string]any
}

func loadTemplate(t *testing.T) *tmpl {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	resolved, err := intrinsics.ProcessYAML(data, nil)
	if err != nil {
		t.Fatalf("goformation cannot read %s: %v", templatePath, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(resolved, &doc); err != nil {
		t.Fatal(err)
	}
	for _, r := range asMap(doc["Resources"]) {
		res := asMap(r)
		for _, prop := range goformationLags[str(res["Type"])] {
			outer, inner, nested := strings.Cut(prop, ".")
			if !nested {
				delete(asMap(res["Properties"]), prop)
				continue
			}
			m := asMap(asMap(res["Properties"])[outer])
			delete(m, inner)
			if len(m) == 0 {
				delete(asMap(res["Properties"]), outer)
			}
		}
	}
	resolved, _ = json.Marshal(doc)
	out := &tmpl{typed: &cloudformation.Template{}, raw: map[string]map[string]any{}, params: map[string]map[string]any{}}
	if err := json.Unmarshal(resolved, out.typed); err != nil {
		t.Fatalf("goformation cannot decode %s: %v", templatePath, err)
	}
	raw, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for id, r := range asMap(doc["Resources"]) {
		out.raw[id] = asMap(r)
	}
	for id, p := range asMap(doc["Parameters"]) {
		out.params[id] = asMap(p)
	}
	out.globals = asMap(asMap(doc["Globals"])["Function"])
	out.outputs = asMap(doc["Outputs"])
	out.conditions = asMap(doc["Conditions"])
	return out
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func str(v any) string { s, _ := v.(string); return s }

// props returns a raw resource's Properties.
func (tp *tmpl) props(id string) map[string]any { return asMap(tp.raw[id]["Properties"]) }

// ofType returns the logical ids of the raw resources of a type, sorted.
func (tp *tmpl) ofType(typ string) []string {
	var ids []string
	for id, r := range tp.raw {
		if str(r["Type"]) == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// fnProp is a function's property with Globals.Function as its default.
func (tp *tmpl) fnProp(id, name string) any {
	if v, ok := tp.props(id)[name]; ok {
		return v
	}
	return tp.globals[name]
}

// env is a function's environment: Globals' variables and its own.
func (tp *tmpl) env(id string) map[string]any {
	out := map[string]any{}
	for k, v := range asMap(asMap(tp.globals["Environment"])["Variables"]) {
		out[k] = v
	}
	for k, v := range asMap(asMap(tp.props(id)["Environment"])["Variables"]) {
		out[k] = v
	}
	return out
}

// refTo reports whether v is {"Ref": id}, {"Fn::GetAtt": [id, ...]} or
// {"Fn::GetAtt": "id.Attr"}.
func refTo(v any, id string) bool {
	m := asMap(v)
	if str(m["Ref"]) == id {
		return true
	}
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		return len(g) > 0 && str(g[0]) == id
	case string:
		return strings.HasPrefix(g, id+".")
	}
	return false
}

// refTarget returns the logical id v refers to ("" when it is no Ref or GetAtt).
func refTarget(v any) string {
	m := asMap(v)
	if r := str(m["Ref"]); r != "" {
		return r
	}
	switch g := m["Fn::GetAtt"].(type) {
	case []any:
		if len(g) > 0 {
			return str(g[0])
		}
	case string:
		id, _, _ := strings.Cut(g, ".")
		return id
	}
	return ""
}

// The template is one goformation can read, and the properties its schema
// lags on are still present (so removing them for the decode hides nothing).
func TestTemplate_Parses(t *testing.T) {
	tp := loadTemplate(t)
	if len(tp.typed.GetAllServerlessFunctionResources()) == 0 || len(tp.typed.GetAllServerlessStateMachineResources()) == 0 {
		t.Fatal("goformation found no AWS::Serverless::Function or AWS::Serverless::StateMachine")
	}
	for typ, lagging := range goformationLags {
		ids := tp.ofType(typ)
		if len(ids) == 0 {
			t.Errorf("no %s resource left: drop it from goformationLags", typ)
		}
		for _, id := range ids {
			for _, p := range lagging {
				props := tp.props(id)
				outer, inner, nested := strings.Cut(p, ".")
				if nested {
					props, p = asMap(props[outer]), inner
				}
				if _, ok := props[p]; !ok {
					t.Errorf("%s (%s) has no %s: drop it from goformationLags", id, typ, p)
				}
			}
		}
	}
}

// Every CodeUri is a functions/<name> directory with a main.go (package
// main), built by SAM's go1.x builder as `bootstrap` for provided.al2023 on
// arm64 with at most 256 MB; and every functions/<name> with a main.go is
// deployed by exactly one function.
func TestTemplate_EveryCodeUriIsAFunctionDir(t *testing.T) {
	tp := loadTemplate(t)
	deployed := map[string]string{}
	for id, fn := range tp.typed.GetAllServerlessFunctionResources() {
		if fn.CodeUri == nil || fn.CodeUri.String == nil {
			t.Errorf("%s: CodeUri is not a local path", id)
			continue
		}
		uri := filepath.Clean(*fn.CodeUri.String)
		dir, ok := strings.CutPrefix(uri, "functions"+string(filepath.Separator))
		if !ok || strings.ContainsRune(dir, filepath.Separator) {
			t.Errorf("%s: CodeUri %q is not functions/<name>", id, *fn.CodeUri.String)
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, "main.go"))
		if err != nil {
			t.Errorf("%s: CodeUri %s has no main.go: %v", id, uri, err)
		} else if !regexp.MustCompile(`(?m)^package main$`).Match(src) {
			t.Errorf("%s: %s/main.go is not package main", id, uri)
		}
		if other, dup := deployed[dir]; dup {
			t.Errorf("%s and %s both deploy %s", id, other, uri)
		}
		deployed[dir] = id
		if bm := str(fn.AWSCloudFormationMetadata["BuildMethod"]); bm != "go1.x" {
			t.Errorf("%s: Metadata.BuildMethod = %q; want go1.x (`make sam-build`)", id, bm)
		}
		if rt := str(tp.fnProp(id, "Runtime")); rt != "provided.al2023" {
			t.Errorf("%s: Runtime = %q; want provided.al2023", id, rt)
		}
		if h := str(tp.fnProp(id, "Handler")); h != "bootstrap" {
			t.Errorf("%s: Handler = %q; want bootstrap", id, h)
		}
		if a := asList(tp.fnProp(id, "Architectures")); len(a) != 1 || str(a[0]) != "arm64" {
			t.Errorf("%s: Architectures = %v; want [arm64]", id, a)
		}
		// The worker API holds an uploaded body of up to MaxUploadBytes
		// (at most 64 MiB) and its copies in memory
		// (docs/security.md § Upload size limits); the other functions move
		// references.
		limit := 256.0
		if id == "WorkerApiFunction" {
			limit = 512
		}
		if m, ok := tp.fnProp(id, "MemorySize").(float64); !ok || m > limit {
			t.Errorf("%s: MemorySize = %v; want at most %v", id, tp.fnProp(id, "MemorySize"), limit)
		}
	}
	for _, name := range functionDirs(t) {
		if _, ok := deployed[name]; !ok {
			t.Errorf("functions/%s/main.go is deployed by no AWS::Serverless::Function", name)
		}
	}
}

// registration matches a route registration in internal/httpapi (the same
// pattern internal/httpapi/openapi_test.go reads).
var registration = regexp.MustCompile(`\.Handle(?:Func)?\(\s*"([^"]*)"`)

// workerRoutes reads "METHOD /path" of every route internal/httpapi
// registers, with ServeMux's {name...} written as API Gateway's {name}.
func workerRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../internal/httpapi/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range registration.FindAllStringSubmatch(string(b), -1) {
			if method, path, ok := strings.Cut(m[1], " "); ok {
				routes = append(routes, method+" "+strings.ReplaceAll(path, "...}", "}"))
			}
		}
	}
	if len(routes) == 0 {
		t.Fatal("no route registrations found in internal/httpapi")
	}
	sort.Strings(routes)
	return routes
}

// Every worker API route (internal/httpapi, hitl included) has
// an HttpApi event on the worker API function, on the stack's HttpApi with
// payload format 2.0, and no event names a route the handler does not serve.
func TestTemplate_EveryWorkerAPIRouteHasAnHttpApiEvent(t *testing.T) {
	tp := loadTemplate(t)
	events := map[string]string{} // "METHOD /path" -> function id
	for id, fn := range tp.typed.GetAllServerlessFunctionResources() {
		for name, ev := range fn.Events {
			if ev.Type != "HttpApi" {
				continue
			}
			h := ev.Properties.HttpApiEvent
			if h == nil || h.Method == nil || h.Path == nil {
				t.Errorf("%s event %s: an HttpApi event without Method and Path", id, name)
				continue
			}
			route := strings.ToUpper(*h.Method) + " " + *h.Path
			if other, dup := events[route]; dup {
				t.Errorf("route %s has two events (%s and %s)", route, other, id)
			}
			events[route] = id
			if fn.CodeUri == nil || fn.CodeUri.String == nil || filepath.Clean(*fn.CodeUri.String) != filepath.Join("functions", "workerapi") {
				t.Errorf("route %s is served by %s, not the worker API function (functions/workerapi)", route, id)
			}
			if h.PayloadFormatVersion == nil || *h.PayloadFormatVersion != "2.0" {
				t.Errorf("route %s: PayloadFormatVersion is not 2.0 (functions/handler reads payload 2.0)", route)
			}
			rawEv := asMap(asMap(asMap(tp.props(id)["Events"])[name])["Properties"])
			if target := refTarget(rawEv["ApiId"]); str(tp.raw[target]["Type"]) != "AWS::Serverless::HttpApi" {
				t.Errorf("route %s: ApiId %v is not the stack's AWS::Serverless::HttpApi", route, rawEv["ApiId"])
			}
		}
	}
	routes := workerRoutes(t)
	for _, r := range routes {
		if _, ok := events[r]; !ok {
			t.Errorf("route %s (internal/httpapi) has no HttpApi event in template.yaml", r)
		}
	}
	for r := range events {
		if !slices.Contains(routes, r) {
			t.Errorf("template.yaml routes %s, which internal/httpapi does not serve", r)
		}
	}
}

// One state machine per flow file in statemachine/ (the built-in flows;
// statemachine/worc/ holds worc's peer flows compiled structurally, for
// validation and parity, and is not deployed), and every DefinitionUri
// exists.
func TestTemplate_OneStateMachinePerFlowFile(t *testing.T) {
	tp := loadTemplate(t)
	files, err := filepath.Glob("../statemachine/*.asl.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no statemachine/*.asl.json (%v)", err)
	}
	deployed := map[string]string{}
	for id, sm := range tp.typed.GetAllServerlessStateMachineResources() {
		if sm.DefinitionUri == nil || sm.DefinitionUri.String == nil {
			t.Errorf("%s: DefinitionUri is not a local path", id)
			continue
		}
		uri := filepath.Clean(*sm.DefinitionUri.String)
		if _, err := os.Stat(filepath.Join("..", uri)); err != nil {
			t.Errorf("%s: DefinitionUri %s does not exist", id, uri)
		}
		if other, dup := deployed[uri]; dup {
			t.Errorf("%s and %s both deploy %s", id, other, uri)
		}
		deployed[uri] = id
		if sm.Type == nil || *sm.Type != "STANDARD" {
			t.Errorf("%s: Type is not STANDARD (.waitForTaskToken needs a standard workflow)", id)
		}
	}
	for _, f := range files {
		rel, _ := filepath.Rel("..", f)
		if _, ok := deployed[rel]; !ok {
			t.Errorf("%s is deployed by no AWS::Serverless::StateMachine", rel)
		}
	}
}

// substitution matches a DefinitionSubstitutions placeholder.
var substitution = regexp.MustCompile(`\$\{([^}]*)\}`)

// Every ${Name} an ASL file uses is defined in its state machine's
// DefinitionSubstitutions (CloudFormation leaves an undefined one in the
// definition, which then fails at run time), each defined one is used, and
// each value refers to a resource of the stack.
func TestTemplate_EverySubstitutionIsDefined(t *testing.T) {
	tp := loadTemplate(t)
	for _, id := range tp.ofType("AWS::Serverless::StateMachine") {
		p := tp.props(id)
		asl, err := os.ReadFile(filepath.Join("..", str(p["DefinitionUri"])))
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		subs := asMap(p["DefinitionSubstitutions"])
		used := map[string]bool{}
		for _, m := range substitution.FindAllStringSubmatch(string(asl), -1) {
			used[m[1]] = true
			if _, ok := subs[m[1]]; !ok {
				t.Errorf("%s: %s uses ${%s}, which DefinitionSubstitutions does not define", id, str(p["DefinitionUri"]), m[1])
			}
		}
		for name, v := range subs {
			if !used[name] {
				t.Errorf("%s: DefinitionSubstitutions defines %s, which %s does not use", id, name, str(p["DefinitionUri"]))
			}
			if target := refTarget(v); target == "" || tp.raw[target] == nil {
				t.Errorf("%s: substitution %s = %v refers to no resource of the stack", id, name, v)
			}
		}
	}
}

// The dispatch function is fed by the dispatch queue with
// ReportBatchItemFailures (only messages that failed are redelivered), the
// queue's visibility outlasts the function (else a message is delivered twice
// while its first delivery still runs) and it redrives to a DLQ.
func TestTemplate_DispatchReportsBatchItemFailures(t *testing.T) {
	tp := loadTemplate(t)
	fn := "DispatchFunction"
	if str(tp.raw[fn]["Type"]) != "AWS::Serverless::Function" || str(tp.props(fn)["CodeUri"]) != "functions/dispatch" {
		t.Fatalf("%s is not the function of functions/dispatch", fn)
	}
	var queue string
	for name, ev := range asMap(tp.props(fn)["Events"]) {
		e := asMap(ev)
		if str(e["Type"]) != "SQS" {
			continue
		}
		ep := asMap(e["Properties"])
		queue = refTarget(ep["Queue"])
		if !slices.ContainsFunc(asList(ep["FunctionResponseTypes"]), func(v any) bool { return v == "ReportBatchItemFailures" }) {
			t.Errorf("%s event %s: FunctionResponseTypes lacks ReportBatchItemFailures", fn, name)
		}
	}
	if queue == "" {
		t.Fatalf("%s has no SQS event on a queue of the stack", fn)
	}
	for _, sm := range tp.ofType("AWS::Serverless::StateMachine") {
		if !refTo(asMap(tp.props(sm)["DefinitionSubstitutions"])["DispatchQueueUrl"], queue) {
			t.Errorf("%s sends dispatch messages to %v, not the queue %s feeds on", sm, asMap(tp.props(sm)["DefinitionSubstitutions"])["DispatchQueueUrl"], fn)
		}
	}
	q := tp.props(queue)
	timeout, _ := tp.fnProp(fn, "Timeout").(float64)
	if vis, _ := q["VisibilityTimeout"].(float64); timeout == 0 || vis < timeout {
		t.Errorf("%s VisibilityTimeout %v is under %s's Timeout %v", queue, q["VisibilityTimeout"], fn, timeout)
	}
	redrive := asMap(q["RedrivePolicy"])
	if dlq := refTarget(redrive["deadLetterTargetArn"]); str(tp.raw[dlq]["Type"]) != "AWS::SQS::Queue" || redrive["maxReceiveCount"] == nil {
		t.Errorf("%s has no dead-letter queue with a maxReceiveCount: %v", queue, redrive)
	}
}

// The table is the store's (internal/store/dynamodb.Tables): its keys,
// index and TTL attribute, on-demand.
func TestTemplate_TableIsTheStoresTable(t *testing.T) {
	tp := loadTemplate(t)
	tables := tp.ofType("AWS::DynamoDB::Table")
	want := dynamodb.Tables("")
	if len(tables) != len(want) {
		t.Fatalf("template declares tables %v; the store has %d", tables, len(want))
	}
	p := tp.props(tables[0])
	w := want[0]
	attrs := map[string]string{}
	for _, a := range asList(p["AttributeDefinitions"]) {
		attrs[str(asMap(a)["AttributeName"])] = str(asMap(a)["AttributeType"])
	}
	keys := func(v any) string {
		var s []string
		for _, k := range asList(v) {
			s = append(s, str(asMap(k)["AttributeName"])+":"+str(asMap(k)["KeyType"]))
		}
		return strings.Join(s, ",")
	}
	check := func(what string, a dynamodb.Attribute) {
		if attrs[a.Name] != string(a.Type) {
			t.Errorf("%s attribute %s is %q in the template; the store's is %q", what, a.Name, attrs[a.Name], a.Type)
		}
	}
	check("key", w.PartitionKey)
	check("key", w.SortKey)
	if got, wantKeys := keys(p["KeySchema"]), w.PartitionKey.Name+":HASH,"+w.SortKey.Name+":RANGE"; got != wantKeys {
		t.Errorf("KeySchema %s; want %s", got, wantKeys)
	}
	gsis := map[string]map[string]any{}
	for _, g := range asList(p["GlobalSecondaryIndexes"]) {
		gsis[str(asMap(g)["IndexName"])] = asMap(g)
	}
	for _, ix := range w.Indexes {
		g, ok := gsis[ix.Name]
		if !ok {
			t.Errorf("index %s is missing", ix.Name)
			continue
		}
		check("index "+ix.Name, ix.PartitionKey)
		check("index "+ix.Name, ix.SortKey)
		if got, wantKeys := keys(g["KeySchema"]), ix.PartitionKey.Name+":HASH,"+ix.SortKey.Name+":RANGE"; got != wantKeys {
			t.Errorf("index %s KeySchema %s; want %s", ix.Name, got, wantKeys)
		}
		if pt := str(asMap(g["Projection"])["ProjectionType"]); pt != string(ix.Projection) {
			t.Errorf("index %s projection %s; want %s", ix.Name, pt, ix.Projection)
		}
	}
	if len(gsis) != len(w.Indexes) || len(attrs) != len(gsis)*2+2 {
		t.Errorf("template has indexes %v and attributes %v beyond the store's", gsis, attrs)
	}
	ttl := asMap(p["TimeToLiveSpecification"])
	if str(ttl["AttributeName"]) != w.TTLAttribute || ttl["Enabled"] != true {
		t.Errorf("TimeToLiveSpecification %v; want %s enabled", ttl, w.TTLAttribute)
	}
	if str(p["BillingMode"]) != "PAY_PER_REQUEST" {
		t.Errorf("BillingMode %v; want PAY_PER_REQUEST", p["BillingMode"])
	}
}

// The functions are configured through internal/awsapp's variables and no
// others, each has what awsapp.New requires, and the dispatch function
// knows the API URL it hands to workers (the worker API function takes it
// from its requests: setting it there would be a dependency cycle).
func TestTemplate_FunctionEnvironmentIsAwsapps(t *testing.T) {
	tp := loadTemplate(t)
	required := []string{awsapp.EnvTable, awsapp.EnvBucket, awsapp.EnvSecretID, awsapp.EnvCluster, awsapp.EnvTaskDefinition, awsapp.EnvSubnets, awsapp.EnvSecurityGroups}
	for _, id := range tp.ofType("AWS::Serverless::Function") {
		env := tp.env(id)
		required := required
		if id == eventsFunction || id == claimFunction { // awsapp.NewEvents, the claim: the table and the bucket
			required = []string{awsapp.EnvTable, awsapp.EnvBucket}
		}
		for k := range env {
			if !slices.Contains(awsapp.Vars, k) {
				t.Errorf("%s sets %s, which internal/awsapp does not read", id, k)
			}
		}
		for _, k := range required {
			if _, ok := env[k]; !ok {
				t.Errorf("%s does not set %s (awsapp.New needs it)", id, k)
			}
		}
		if c := str(env[awsapp.EnvContainer]); c != "" && c != runnerContainer(t, tp) {
			t.Errorf("%s: %s = %q, but the runner's container is %q", id, awsapp.EnvContainer, c, runnerContainer(t, tp))
		}
	}
	if _, ok := tp.env("DispatchFunction")[awsapp.EnvAPIURL]; !ok {
		t.Errorf("DispatchFunction has no %s: workers would not know where to call", awsapp.EnvAPIURL)
	}
	// The worker API function may take STRATUS_API_URL only from
	// ApiUrlOverride: the HttpApi depends on the function, so its own
	// address cannot be given to it.
	if v, ok := tp.env("WorkerApiFunction")[awsapp.EnvAPIURL]; ok {
		if b, _ := json.Marshal(v); strings.Contains(string(b), "WorkerApi") || !strings.Contains(string(b), "ApiUrlOverride") {
			t.Errorf("WorkerApiFunction sets %s to %s: only ApiUrlOverride may be given to it", awsapp.EnvAPIURL, b)
		}
	}
}

func runnerContainer(t *testing.T, tp *tmpl) string {
	t.Helper()
	defs := asList(tp.props("RunnerTaskDefinition")["ContainerDefinitions"])
	if len(defs) != 1 {
		t.Fatalf("RunnerTaskDefinition has %d containers; want the runner alone", len(defs))
	}
	return str(asMap(defs[0])["Name"])
}

// docs/architecture.md § The path of one step, 4: the worker receives "never
// the task token nor an AWS credential": the runner's task has no task role,
// runs on Fargate from the ImageUri parameter, and logs to a log group. Pool
// mode (README.md § Warm runners (pool mode)) is the one exception: the task
// role of a pool service's runners may receive, delete and hide messages of its
// own assignment queue and nothing else; no other task definition has a role.
func TestTemplate_WorkersHoldNoAWSCredential(t *testing.T) {
	tp := loadTemplate(t)
	p := tp.props("RunnerTaskDefinition")
	if _, ok := p["TaskRoleArn"]; ok {
		t.Error("RunnerTaskDefinition has a TaskRoleArn: workers would get AWS credentials")
	}
	pooled := map[string]bool{} // task definitions a pool service runs
	for _, svc := range tp.ofType("AWS::ECS::Service") {
		pooled[refTarget(tp.props(svc)["TaskDefinition"])] = true
	}
	roles := map[string]string{} // task role -> its task definition
	for _, td := range tp.ofType("AWS::ECS::TaskDefinition") {
		r, ok := tp.props(td)["TaskRoleArn"]
		if !ok {
			continue
		}
		queue, _ := poolCommand(tp, td)
		if !pooled[td] || queue == "" {
			t.Errorf("%s has a TaskRoleArn but is no pool service's runner (`pool --queue URL`): its workers would hold AWS credentials", td)
			continue
		}
		role := refTarget(r)
		if other, dup := roles[role]; dup {
			t.Errorf("%s and %s share the task role %s: each pool's role takes its own queue only", td, other, role)
		}
		roles[role] = td
		checkPoolTaskRole(t, tp, role, queue)
	}
	if !slices.Contains(asList(p["RequiresCompatibilities"]), any("FARGATE")) || str(p["NetworkMode"]) != "awsvpc" {
		t.Errorf("RunnerTaskDefinition is not a Fargate (awsvpc) task: %v %v", p["RequiresCompatibilities"], p["NetworkMode"])
	}
	c := asMap(asList(p["ContainerDefinitions"])[0])
	if !refTo(c["Image"], "ImageUri") {
		t.Errorf("the runner's image is %v; want the ImageUri parameter", c["Image"])
	}
	if c["Name"] != awsapp.DefaultContainer {
		t.Errorf("the runner's container is %v; awsapp's default is %q", c["Name"], awsapp.DefaultContainer)
	}
	lc := asMap(c["LogConfiguration"])
	if str(lc["LogDriver"]) != "awslogs" || str(tp.raw[refTarget(asMap(lc["Options"])["awslogs-group"])]["Type"]) != "AWS::Logs::LogGroup" {
		t.Errorf("the runner does not log to a log group of the stack: %v", lc)
	}
}

// The bucket is encrypted, blocks every form of public access and refuses
// requests that are not over TLS.
func TestTemplate_BucketIsPrivateEncryptedTLSOnly(t *testing.T) {
	tp := loadTemplate(t)
	buckets := tp.ofType("AWS::S3::Bucket")
	if len(buckets) != 1 {
		t.Fatalf("buckets %v; want one", buckets)
	}
	b := buckets[0]
	p := tp.props(b)
	if len(asList(asMap(p["BucketEncryption"])["ServerSideEncryptionConfiguration"])) == 0 {
		t.Error("the bucket has no default encryption")
	}
	pab := asMap(p["PublicAccessBlockConfiguration"])
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if pab[k] != true {
			t.Errorf("PublicAccessBlockConfiguration.%s = %v; want true", k, pab[k])
		}
	}
	tls := false
	for _, pol := range tp.ofType("AWS::S3::BucketPolicy") {
		if !refTo(tp.props(pol)["Bucket"], b) {
			continue
		}
		for _, s := range asList(asMap(tp.props(pol)["PolicyDocument"])["Statement"]) {
			st := asMap(s)
			if str(st["Effect"]) == "Deny" && asMap(asMap(st["Condition"])["Bool"])["aws:SecureTransport"] == "false" {
				tls = true
			}
		}
	}
	if !tls {
		t.Error("no bucket policy denies requests without aws:SecureTransport")
	}
}

// internal/secret/secretsmanager reads the key as base64 of at least 32
// bytes: GenerateSecretString must give alphanumerics only, a length that
// is a multiple of 4 and at least 44 characters; and every function that
// builds a worker.Service may read it.
func TestTemplate_HmacSecretIsABase64Key(t *testing.T) {
	tp := loadTemplate(t)
	secrets := tp.ofType("AWS::SecretsManager::Secret")
	if len(secrets) != 1 {
		t.Fatalf("secrets %v; want one", secrets)
	}
	g := asMap(tp.props(secrets[0])["GenerateSecretString"])
	n, _ := g["PasswordLength"].(float64)
	if int(n)%4 != 0 || n < 44 || g["ExcludePunctuation"] != true || g["IncludeSpace"] == true {
		t.Errorf("GenerateSecretString %v does not make a base64 key of at least 32 bytes", g)
	}
	for _, id := range serviceFunctions {
		if !refTo(tp.env(id)[awsapp.EnvSecretID], secrets[0]) {
			t.Errorf("%s: %s is %v; want the stack's secret", id, awsapp.EnvSecretID, tp.env(id)[awsapp.EnvSecretID])
		}
		if !allows(tp, id, "secretsmanager:GetSecretValue", secrets[0]) {
			t.Errorf("%s may not read the HMAC key secret", id)
		}
	}
}

// statements returns the inline policy statements of a function or state
// machine (SAM policy templates are not statements and are skipped), those
// of a policy given under a condition (!If [Cond, policy, AWS::NoValue])
// included.
func statements(tp *tmpl, id string) []map[string]any {
	var out []map[string]any
	for _, p := range asList(tp.props(id)["Policies"]) {
		policies := []any{p}
		if b := asList(asMap(p)["Fn::If"]); len(b) == 3 {
			policies = b[1:]
		}
		for _, p := range policies {
			for _, s := range asList(asMap(p)["Statement"]) {
				out = append(out, asMap(s))
			}
		}
	}
	return out
}

func actionsOf(st map[string]any) []string {
	switch a := st["Action"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			out = append(out, str(v))
		}
		return out
	}
	return nil
}

// allows reports whether an Allow statement of id grants action on resource.
func allows(tp *tmpl, id, action, resource string) bool {
	for _, st := range statements(tp, id) {
		if str(st["Effect"]) != "Allow" || !slices.Contains(actionsOf(st), action) {
			continue
		}
		if refTo(st["Resource"], resource) || slices.ContainsFunc(asList(st["Resource"]), func(r any) bool { return refTo(r, resource) }) {
			return true
		}
	}
	return false
}

// Least privilege: no wildcard action; "*" as a resource only
// for the actions that take no other (SendTask*: a task token names its
// execution; vended log delivery); each function may run the runner's task
// definition, pass its execution role, use the table and complete tokens.
func TestTemplate_LeastPrivilege(t *testing.T) {
	tp := loadTemplate(t)
	starOnly := []string{"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat",
		"logs:CreateLogDelivery", "logs:GetLogDelivery", "logs:UpdateLogDelivery", "logs:DeleteLogDelivery",
		"logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:DescribeResourcePolicies", "logs:DescribeLogGroups",
		"ecs:ListTasks"} // ListTasks takes no task resource; the statement is conditioned on ecs:cluster
	// The calls the code makes that tests on moto (which checks no IAM)
	// cannot catch: a stop finds its task with ecs:ListTasks (launch/ecs
	// StopTask); the S3 sink tells a missing key (404) from a failure only
	// with s3:ListBucket (else S3 answers 403).
	for _, fn := range []string{"DispatchFunction", "WorkerApiFunction"} {
		for _, a := range []string{"ecs:RunTask", "ecs:StopTask", "ecs:ListTasks", "s3:GetObject", "s3:PutObject", "s3:ListBucket", "secretsmanager:GetSecretValue"} {
			found := false
			for _, st := range statements(tp, fn) {
				if str(st["Effect"]) == "Allow" && slices.Contains(actionsOf(st), a) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s is not granted %s, which the code calls", fn, a)
			}
		}
	}
	ids := append(tp.ofType("AWS::Serverless::Function"), tp.ofType("AWS::Serverless::StateMachine")...)
	for _, id := range ids {
		for _, st := range statements(tp, id) {
			for _, a := range actionsOf(st) {
				if strings.Contains(a, "*") {
					t.Errorf("%s grants the wildcard action %s", id, a)
				}
				if st["Resource"] == "*" && !slices.Contains(starOnly, a) {
					t.Errorf("%s grants %s on every resource", id, a)
				}
			}
		}
	}
	for _, id := range serviceFunctions {
		for _, need := range []struct{ action, resource string }{
			{"ecs:RunTask", "RunnerTaskDefinition"},
			{"ecs:RunTask", "NetworkRunnerTaskDefinition"},
			{"iam:PassRole", "RunnerExecutionRole"},
		} {
			if !allows(tp, id, need.action, need.resource) {
				t.Errorf("%s may not %s on %s", id, need.action, need.resource)
			}
		}
		tokens := false
		for _, st := range statements(tp, id) {
			tokens = tokens || slices.Contains(actionsOf(st), "states:SendTaskSuccess") && slices.Contains(actionsOf(st), "states:SendTaskFailure")
		}
		if !tokens {
			t.Errorf("%s may not complete task tokens", id)
		}
	}
	for _, id := range tp.ofType("AWS::Serverless::Function") {
		crud := false
		for _, p := range asList(tp.props(id)["Policies"]) {
			if refTo(asMap(asMap(p)["DynamoDBCrudPolicy"])["TableName"], "StoreTable") {
				crud = true
			}
		}
		if !crud {
			t.Errorf("%s has no DynamoDBCrudPolicy on StoreTable", id)
		}
		// Objects only under the prefix the function stores under.
		prefix := str(tp.env(id)[awsapp.EnvBucketPrefix])
		objects := false
		for _, st := range statements(tp, id) {
			if slices.Contains(actionsOf(st), "s3:PutObject") {
				objects = true
				if got, want := fmt.Sprint(asMap(st["Resource"])["Fn::Sub"]), "${DataBucket.Arn}/"+prefix+"*"; prefix == "" || got != want {
					t.Errorf("%s may write %s; want %s (%s = %q)", id, got, want, awsapp.EnvBucketPrefix, prefix)
				}
			}
		}
		if !objects {
			t.Errorf("%s may not write to the bucket", id)
		}
	}
}

// The stack says where its worker API is.
func TestTemplate_OutputsTheAPIURL(t *testing.T) {
	tp := loadTemplate(t)
	v := asMap(tp.outputs["ApiUrl"])["Value"]
	b, _ := json.Marshal(v)
	if !strings.Contains(string(b), `"https://${WorkerApi}.execute-api.`) || !strings.Contains(string(b), "ApiUrlOverride") {
		t.Errorf("Outputs.ApiUrl = %s; want ApiUrlOverride, else the HttpApi's https URL", b)
	}
	if d, _ := json.Marshal(tp.env("DispatchFunction")[awsapp.EnvAPIURL]); string(d) != string(b) {
		t.Errorf("the dispatch function's %s is %s, Outputs.ApiUrl %s: they must agree", awsapp.EnvAPIURL, d, b)
	}
}

// A model provider's key reaches a worker only as a task definition secret
// from a parameter (one per engine variable the installed providers name:
// ANTHROPIC_API_KEY, OPENAI_API_KEY, DEEPSEEK), each dropped when its
// parameter is empty; the execution role may read exactly those secrets and
// nothing else.
func TestTemplate_EngineKeysAreTaskDefinitionSecrets(t *testing.T) {
	tp := loadTemplate(t)
	want := map[string]string{"ANTHROPIC_API_KEY": "AnthropicApiKeySecretArn", "OPENAI_API_KEY": "OpenAIApiKeySecretArn", "DEEPSEEK": "DeepseekSecretArn"}
	c := asMap(asList(tp.props("RunnerTaskDefinition")["ContainerDefinitions"])[0])
	got := map[string]string{}
	for _, s := range asList(c["Secrets"]) {
		// !If [Condition, {Name, ValueFrom}, !Ref AWS::NoValue]
		branches := asList(asMap(s)["Fn::If"])
		if len(branches) != 3 || !refTo(branches[2], "AWS::NoValue") {
			t.Errorf("secret %v is not dropped when its parameter is empty", s)
			continue
		}
		sec := asMap(branches[1])
		got[str(sec["Name"])] = refTarget(sec["ValueFrom"])
	}
	if !maps.Equal(got, want) {
		t.Errorf("runner secrets %v, want %v", got, want)
	}
	for name, param := range want {
		if p, ok := tp.params[param]; !ok || p["Default"] != "" {
			t.Errorf("parameter %s (for %s) is missing or not empty by default", param, name)
		}
	}
	// The execution role reads those ARNs only.
	var read []string
	for _, pol := range asList(tp.props("RunnerExecutionRole")["Policies"]) {
		doc := asMap(asMap(asList(asMap(pol)["Fn::If"])[1])["PolicyDocument"])
		for _, st := range asList(doc["Statement"]) {
			if br := asList(asMap(st)["Fn::If"]); len(br) == 3 {
				// Under a customer-managed key: kms:Decrypt on that key,
				// through Secrets Manager only (issue: engine secrets
				// under a CMK could not be read).
				kms := asMap(br[1])
				via := asMap(asMap(kms["Condition"])["StringEquals"])["kms:ViaService"]
				if str(br[0]) != "HasEngineSecretsKey" || str(kms["Action"]) != "kms:Decrypt" || !refTo(kms["Resource"], "EngineSecretsKmsKeyArn") ||
					!strings.Contains(fmt.Sprint(via), "secretsmanager.${AWS::Region}") || !refTo(br[2], "AWS::NoValue") {
					t.Errorf("the execution role's conditional statement is %v; want kms:Decrypt on EngineSecretsKmsKeyArn via Secrets Manager when it is given", br)
				}
				continue
			}
			if str(asMap(st)["Action"]) != "secretsmanager:GetSecretValue" {
				t.Errorf("the runner's execution role may also %v", asMap(st)["Action"])
			}
			for _, r := range asList(asMap(st)["Resource"]) {
				read = append(read, refTarget(asList(asMap(r)["Fn::If"])[1]))
			}
		}
	}
	slices.Sort(read)
	if w := slices.Sorted(maps.Values(want)); !slices.Equal(read, w) {
		t.Errorf("the execution role reads %v, want exactly %v", read, w)
	}
	if p, ok := tp.params["EngineSecretsKmsKeyArn"]; !ok || p["Default"] != "" {
		t.Errorf("parameter EngineSecretsKmsKeyArn is missing or not empty by default")
	}
}

// The stack survives real traffic and its own recreation — no fixed table
// name, throttles and dispatch concurrency as parameters sized for bursts,
// the worker size refused unless Fargate takes it, current objects that
// expire, and alarms on what goes wrong unseen.
func TestTemplate_HardenedForRealTraffic(t *testing.T) {
	tp := loadTemplate(t)
	table := tp.props(tp.ofType("AWS::DynamoDB::Table")[0])
	if _, fixed := table["TableName"]; fixed {
		t.Errorf("the table has a fixed TableName: a stack deleted (table retained) cannot be created again")
	}
	if d := fmt.Sprint(tp.params["DispatchConcurrency"]["Default"]); d != "20" {
		t.Errorf("DispatchConcurrency defaults to %s; want 20 (RunTask's 20 calls a second)", d)
	}
	api := asMap(tp.props("WorkerApi")["DefaultRouteSettings"])
	if fmt.Sprint(api["ThrottlingRateLimit"]) != "map[Ref:WorkerApiRateLimit]" || fmt.Sprint(api["ThrottlingBurstLimit"]) != "map[Ref:WorkerApiBurstLimit]" {
		t.Errorf("the worker API throttle is %v; want the WorkerApiRateLimit/WorkerApiBurstLimit parameters", api)
	}
	data, _ := os.ReadFile(templatePath)
	raw, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	json.Unmarshal(raw, &doc)
	rule, _ := json.Marshal(asMap(asMap(doc["Rules"])["WorkerSize"]))
	for _, cpu := range asList(tp.params["WorkerCpu"]["AllowedValues"]) {
		if !strings.Contains(string(rule), fmt.Sprintf(`"WorkerCpu %s takes WorkerMemory`, str(cpu))) {
			t.Errorf("the WorkerSize rule says nothing of WorkerCpu %s", str(cpu))
		}
	}
	if !strings.Contains(string(rule), `WorkerCpu 1024 takes WorkerMemory 2048, 3072`) {
		t.Errorf("the default size (1024 CPU, 2048 MiB) is not a pair the rule takes: %s", rule)
	}
	lifecycle, _ := json.Marshal(tp.props("DataBucket")["LifecycleConfiguration"])
	if !strings.Contains(string(lifecycle), `"expire-current-objects"`) || !strings.Contains(string(lifecycle), "DataExpirationDays") {
		t.Errorf("no expiry of current objects: %s", lifecycle)
	}
	// docs/security.md § Upload size limits: uploads, bounded as the worker
	// API's configuration allows, and never kept past a day.
	up := tp.params["MaxUploadBytes"]
	if up["Default"] != float64(worker.DefaultMaxUploadBytes) || up["MaxValue"] != float64(awsapp.MaxUploadBytes) {
		t.Errorf("MaxUploadBytes default %v, max %v; want %d (as embedded) and %d (awsapp.MaxUploadBytes)", up["Default"], up["MaxValue"], worker.DefaultMaxUploadBytes, awsapp.MaxUploadBytes)
	}
	env, _ := json.Marshal(tp.fnProp("WorkerApiFunction", "Environment"))
	if !strings.Contains(string(env), awsapp.EnvMaxUploadBytes) || !strings.Contains(string(env), "MaxUploadBytes") {
		t.Errorf("the worker API is not given %s from MaxUploadBytes: %s", awsapp.EnvMaxUploadBytes, env)
	}
	if !strings.Contains(string(lifecycle), `"expire-uploads"`) || !strings.Contains(string(lifecycle), "stratus/.stratus/uploads/") {
		t.Errorf("no expiry of uploads: %s", lifecycle)
	}
	alarms := map[string]bool{}
	for _, id := range tp.ofType("AWS::CloudWatch::Alarm") {
		p := tp.props(id)
		alarms[str(p["Namespace"])+"/"+str(p["MetricName"])] = true
		if len(asList(p["AlarmActions"])) == 0 {
			t.Errorf("alarm %s notifies no one", id)
		}
	}
	for _, want := range []string{"AWS/SQS/ApproximateNumberOfMessagesVisible", "AWS/Events/TriggeredRules", "AWS/Lambda/Errors"} {
		if !alarms[want] {
			t.Errorf("no alarm on %s (have %v)", want, alarms)
		}
	}
}

// A stopped worker task reaches the dispatch function: an EventBridge rule
// on the cluster's "ECS Task State Change" events of STOPPED tasks targets
// the queue the function feeds on, and the queue's policy lets that rule,
// and only it, send there (awsapp.TaskStopped reads the event).
func TestTemplate_StoppedWorkerTasksReachDispatch(t *testing.T) {
	tp := loadTemplate(t)
	var queue string
	for _, ev := range asMap(tp.props("DispatchFunction")["Events"]) {
		if e := asMap(ev); str(e["Type"]) == "SQS" {
			queue = refTarget(asMap(e["Properties"])["Queue"])
		}
	}
	var rule string
	for _, id := range tp.ofType("AWS::Events::Rule") {
		p := asMap(tp.props(id)["EventPattern"])
		if slices.Contains(asList(p["source"]), any("aws.ecs")) {
			rule = id
		}
	}
	if rule == "" || queue == "" {
		t.Fatalf("no AWS::Events::Rule on source aws.ecs (%q), or no dispatch queue (%q)", rule, queue)
	}
	p := asMap(tp.props(rule)["EventPattern"])
	d := asMap(p["detail"])
	if !slices.Contains(asList(p["detail-type"]), any("ECS Task State Change")) || !slices.Contains(asList(d["lastStatus"]), any("STOPPED")) {
		t.Errorf("%s pattern %v: want detail-type ECS Task State Change, lastStatus STOPPED", rule, p)
	}
	if cl := asList(d["clusterArn"]); len(cl) != 1 || !refTo(cl[0], "RunnerCluster") {
		t.Errorf("%s matches clusters %v; want the RunnerCluster alone", rule, d["clusterArn"])
	}
	targets := asList(tp.props(rule)["Targets"])
	if len(targets) != 1 || !refTo(asMap(targets[0])["Arn"], queue) {
		t.Errorf("%s targets %v; want the dispatch queue %s", rule, targets, queue)
	}
	var allowed bool
	for _, id := range tp.ofType("AWS::SQS::QueuePolicy") {
		qs := asList(tp.props(id)["Queues"])
		if len(qs) != 1 || !refTo(qs[0], queue) {
			continue
		}
		for _, st := range asList(asMap(tp.props(id)["PolicyDocument"])["Statement"]) {
			s := asMap(st)
			src := asMap(asMap(s["Condition"])["ArnEquals"])["aws:SourceArn"]
			if str(s["Effect"]) == "Allow" && str(asMap(s["Principal"])["Service"]) == "events.amazonaws.com" &&
				str(s["Action"]) == "sqs:SendMessage" && refTo(src, rule) {
				allowed = true
			}
		}
	}
	if !allowed {
		t.Errorf("no queue policy on %s lets events.amazonaws.com send from %s alone", queue, rule)
	}
}

// The worker API function ends before API Gateway gives up on it (HTTP
// APIs' integration timeout is at most 30 s, the default): otherwise the
// gateway answers 503 while the function goes on writing, and the
// worker's retry races it. No route may lower its integration timeout
// under the function's.
func TestTemplate_WorkerAPIEndsBeforeTheGateway(t *testing.T) {
	tp := loadTemplate(t)
	timeout, _ := tp.props("WorkerApiFunction")["Timeout"].(float64)
	if timeout == 0 || timeout >= 30 {
		t.Fatalf("WorkerApiFunction's Timeout is %v; want under API Gateway's 30 s integration ceiling", tp.props("WorkerApiFunction")["Timeout"])
	}
	for name, ev := range asMap(tp.props("WorkerApiFunction")["Events"]) {
		if ms, ok := asMap(asMap(ev)["Properties"])["TimeoutInMillis"].(float64); ok && ms <= timeout*1000 {
			t.Errorf("route %s times out after %v ms, before the function's %v s", name, ms, timeout)
		}
	}
}

// Between the dispatch's heartbeat at launch and the runner's first stats
// nothing can heartbeat a worker step: the Fargate task's cold start
// (provisioning and the image pull: 53-62 s measured for the runner
// image). A window the template allows must cover it twice over, or a
// healthy worker times out before it starts.
func TestTemplate_HeartbeatWindowCoversAColdStart(t *testing.T) {
	const minWindow = 120 // about twice the longest cold start measured
	p := loadTemplate(t).params["HeartbeatSeconds"]
	if min, _ := p["MinValue"].(float64); min < minWindow {
		t.Errorf("HeartbeatSeconds may be %v; want at least %d s, about twice a cold start", p["MinValue"], minWindow)
	}
}

// docs/security.md § Network profiles says what the offline profile
// reaches on AWS; the template's offline security group must be exactly
// that (HTTPS only, to any address), so neither the code nor the docs
// claim a boundary the stack does not give.
func TestTemplate_OfflineProfileIsWhatTheDocsSay(t *testing.T) {
	tp := loadTemplate(t)
	egress := asList(tp.props("WorkerSecurityGroup")["SecurityGroupEgress"])
	if len(egress) != 1 {
		t.Fatalf("the offline security group has %d egress rules: %v", len(egress), egress)
	}
	e := asMap(egress[0])
	got := fmt.Sprintf("%v %v-%v %v", e["IpProtocol"], e["FromPort"], e["ToPort"], e["CidrIp"])
	if got != "tcp 443-443 0.0.0.0/0" {
		t.Fatalf("the offline security group lets out %s; docs/security.md § Network profiles says HTTPS to anywhere: change both", got)
	}
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "## Network profiles") || !strings.Contains(string(doc), "HTTPS (tcp 443) to anywhere") {
		t.Errorf("docs/security.md has no § Network profiles saying the offline profile is HTTPS (tcp 443) to anywhere")
	}
}
