package flow

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// Allowed keys per mapping (reference.md: every mapping is a fail-closed
// allowlist). Node keys depend on the node's kind.
var (
	topKeys           = []string{"flow"}
	flowKeys          = []string{"name", "task_type", "permission_ceiling", "output_policy", "publishing", "network_policy", "defaults", "nodes", "edges", "budgets", "supervisor", "decomposition", "submit_format", "check_policy"}
	defaultsKeys      = []string{"evaluator"}
	evalDefaultsKeys  = []string{"session_scope", "permission_profile", "max_rework_per_stage", "gate_severity"}
	supervisorKeys    = []string{"role_file", "finalize_role_file", "handoff_role_file", "emit_follow_ups", "observe"}
	observeKeys       = []string{"mode"}
	decompositionKeys = []string{"proposed_by", "sub_flow", "shared_budget"}
	edgeKeys          = []string{"from", "to", "outcome", "loop", "budget"}
	whenKeys          = []string{"fact", "equals"}
	hitlGrantKeys     = []string{"allow_question", "allow_approval"}
	verdictsKeys      = []string{"allowed", "channel"}
	contextKeys       = []string{"steps"}

	commonNodeKeys = []string{"id", "kind", "when"}
	nodeKeys       = map[string][]string{
		KindAgent: {"role_file", "resume_role_file", "session_scope", "lineage_affinity", "permission_profile",
			"network_access", "git_evidence", "provider", "model", "reasoning", "timeout_seconds",
			"output_artifact", "output_file", "output_schema", "best_effort", "hitl", "extra_args",
			"skills", "allow_skills", "submit_format", "verdicts", "context"},
		KindEvaluator: {"role", "role_file", "resume_role_file", "session_scope", "permission_profile",
			"network_access", "git_evidence", "blocking", "max_rework_per_stage", "gate_severity",
			"provider", "model", "reasoning", "submit_format", "verdicts", "context"},
		KindChecks:  {"checker", "manifest"},
		KindTool:    {"tool", "args", "timeout_seconds"},
		KindHITL:    {"signal", "timeout_s", "question"},
		KindPublish: {"policy"},
	}
)

// allowedNodeKeys returns the keys a node of kind may carry; for a missing
// or unknown kind, the union of every kind's keys (Validate reports the kind).
func allowedNodeKeys(kind string) []string {
	keys := slices.Clone(commonNodeKeys)
	if own, ok := nodeKeys[kind]; ok {
		return append(keys, own...)
	}
	for _, own := range nodeKeys {
		keys = append(keys, own...)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// Parse reads one worc flow file (`flow:` document) strictly.
//
// file names the source in problems; data is the YAML. Any unknown key, at
// any depth, fails closed with
//
//	file:line:col: unknown key "x" in <where>; allowed: a, b, c
//
// and so does a key given twice in one mapping, a value of the wrong type
// (a list where a string belongs, a nested value in a tool's args),
// invalid YAML, bytes that are not UTF-8 (named by byte offset), a file
// over MaxFlowBytes, or a file that is not one `flow:` mapping. Every such
// problem in the file is reported: the error is a *ParseError, which
// unwraps to a *stratus.Error (EINVALID) listing the problems one per line,
// sorted by position, and carries in Flow what did parse, so the other
// layers can still be checked (worc: "all fatal, all collected").
//
// As in PyYAML (worc), a leading UTF-8 byte order mark is skipped and a
// merge key `<<: *anchor` (or `<<: [*a, *b]`) merges the anchored
// mappings, keys written beside it winning. Parse checks shape only: graph
// and policy rules are Validate's.
func Parse(file string, data []byte) (*Flow, error) {
	f, probs, failed := parse(file, data)
	if len(probs) > 0 {
		SortProblems(file, probs)
		return nil, &ParseError{Problems: probs, Flow: f, failed: failed}
	}
	return f, nil
}

// parse decodes data and returns what parsed (nil when the file is not a
// `flow:` mapping at all), every problem, and the paths whose value failed.
func parse(file string, data []byte) (*Flow, []Problem, []string) {
	if len(data) > MaxFlowBytes {
		return nil, flowTooLarge(file, int64(len(data))).(*ParseError).Problems, nil
	}
	if off, line, col := InvalidUTF8(data); off >= 0 {
		return nil, []Problem{{File: file, Line: line, Col: col, Fatal: true,
			Message: fmt.Sprintf("the flow file is not valid UTF-8: byte 0x%02x at byte offset %d; save it as UTF-8", data[off], off)}}, nil
	}
	d := &decoder{file: file}
	f := d.document(StripBOM(data))
	if f != nil {
		f.byID = make(map[string]int, len(f.Nodes))
		for i, n := range f.Nodes {
			if _, dup := f.byID[n.ID]; !dup && n.ID != "" {
				f.byID[n.ID] = i
			}
		}
	}
	return f, d.problems, d.failed
}

// Load reads <flowsDir>/<taskType>.yaml and parses it.
//
// Errors: EINVALID when taskType is not a single portable path segment;
// ENOTFOUND "flow not found" naming the path when the file is absent (worc
// never falls back to a bundled copy); Parse's errors, with the path as the
// file name; a *ParseError (EINVALID) when the file's task_type differs
// from its stem. Load does not call Validate.
func Load(flowsDir, taskType string) (*Flow, error) {
	if !portableSegment(taskType) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "task_type",
			"%q is not a flow name: want one path segment of letters, digits, '.', '_' or '-', not starting with '.'", taskType)
	}
	path := filepath.Join(flowsDir, taskType+".yaml")
	data, err := readFlowFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "flow not found: %s (task_type %q has no flow file); %s", path, taskType, flowsIn(flowsDir))
	} else if _, ok := err.(*ParseError); ok {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("read flow %s: %w", path, err)
	}
	f, probs, failed := parse(path, data)
	if f != nil && f.TaskType != taskType && !slices.ContainsFunc(probs, func(p Problem) bool { return p.Path == "task_type" }) {
		p := Problem{File: path, Path: "task_type", Fatal: true,
			Message: fmt.Sprintf("task_type %q must equal the file stem %q", f.TaskType, taskType)}
		p.Line, p.Col = f.pos("task_type").Line, f.pos("task_type").Col
		probs = append(probs, p)
	}
	if len(probs) > 0 {
		SortProblems(path, probs)
		return nil, &ParseError{Problems: probs, Flow: f, failed: failed}
	}
	return f, nil
}

// WithoutCascades returns the problems of more (Validate's, run on the
// Flow pe carries) that do not restate a problem of pe: one located at or
// under the path of a value that failed to parse (a node that is not a
// mapping, a field whose value had the wrong type, left out of the Flow), or
// one about such a value (an edge whose loop names a budget that failed), is
// dropped, since the parse problem already says what to fix there. An
// unknown or duplicated key drops nothing: the value read stands. A nil pe
// returns more.
func WithoutCascades(pe *ParseError, more []Problem) []Problem {
	if pe == nil {
		return more
	}
	var out []Problem
	for _, p := range more {
		if !slices.ContainsFunc(pe.failed, func(f string) bool {
			return f != "" && (underPath(p.Path, f) || p.dependsOn != "" && underPath(p.dependsOn, f))
		}) {
			out = append(out, p)
		}
	}
	return out
}

// underPath reports whether path is prefix or lies under it ("nodes[2]"
// holds "nodes[2].id"; "nodes" holds "nodes[0]").
func underPath(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

var portableSegmentRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`) })

// portableSegment reports whether s can name one file or directory on every
// OS without escaping its parent: no separator, no "..", no leading dot.
func portableSegment(s string) bool {
	return portableSegmentRE().MatchString(s) && !strings.Contains(s, "..")
}

// decoder walks the goccy/go-yaml AST by hand so that every key is checked
// against an allowlist and every value keeps its position.
type decoder struct {
	file     string
	doc      *yamlast.Doc // anchors of the document, for aliases
	problems []Problem
	reported map[Problem]bool // a mapping merged in twice is decoded twice
	// failed are the paths whose value did not decode (WithoutCascades):
	// not those of an unknown or duplicated key, whose first value stands.
	failed []string
}

// fail records a problem with the value at path: it is left out of the Flow.
func (d *decoder) fail(at Pos, path, format string, args ...any) {
	d.failed = append(d.failed, path)
	d.keyProblem(at, path, format, args...)
}

// keyProblem records a problem with a key (unknown, given twice); the
// value at path, if any, still decodes.
func (d *decoder) keyProblem(at Pos, path, format string, args ...any) {
	p := Problem{File: d.file, Line: at.Line, Col: at.Col, Path: path, Message: fmt.Sprintf(format, args...), Fatal: true}
	if d.reported[p] {
		return
	}
	if d.reported == nil {
		d.reported = map[Problem]bool{}
	}
	d.reported[p] = true
	d.problems = append(d.problems, p)
}

// report records a problem found by yamlast: a Failed one as fail does,
// any other as keyProblem does.
func (d *decoder) report(p yamlast.Problem) {
	if p.Failed {
		d.fail(Pos(p.Pos), p.Path, "%s", p.Message)
	} else {
		d.keyProblem(Pos(p.Pos), p.Path, "%s", p.Message)
	}
}

// posOf locates a node; a mapping by its first key, which is where a
// reader looks for it (goccy positions a block mapping at its first ':').
func posOf(n ast.Node) Pos { return Pos(yamlast.PosOf(n)) }

func isNull(n ast.Node) bool {
	switch n.(type) {
	case nil, *ast.NullNode:
		return true
	}
	return false
}

func (d *decoder) document(data []byte) *Flow {
	docs, perr := yamlast.Parse(data)
	if perr != nil {
		d.report(*perr)
		return nil
	}
	if len(docs) != 1 {
		d.fail(Pos{}, "", "want exactly one YAML document holding a `flow:` mapping, found %d", len(docs))
		return nil
	}
	d.doc = yamlast.NewDoc(docs[0])

	top := d.mapping(docs[0], "", "the document")
	if top == nil {
		if len(d.problems) == 0 {
			d.fail(posOf(docs[0]), "", "the document is null; want a `flow:` mapping")
		}
		return nil
	}
	var f *Flow
	found := false
	for _, kv := range d.fields(top, "", "the document", topKeys) {
		f, found = d.flow(kv), true
	}
	if !found {
		d.fail(posOf(top), "flow", "missing key \"flow\": a flow file is one `flow:` mapping")
	}
	return f
}

// resolve strips anchors, aliases and tags down to the value node; a
// dangling alias is a problem at path, and nil.
func (d *decoder) resolve(n ast.Node, path string) ast.Node {
	r, p := d.doc.Resolve(n, path)
	if p != nil {
		d.report(*p)
	}
	return r
}

// field is one key of a mapping that passed the allowlist.
type field struct {
	key  string
	path string // dotted path of the key, e.g. "nodes[2].when.fact"
	pos  Pos
	val  ast.Node
}

// mapping returns n as a mapping, or records a type problem and returns nil.
// A null value yields nil without a problem (an absent optional block).
func (d *decoder) mapping(n ast.Node, path, where string) *ast.MappingNode {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.MappingNode:
		return x
	}
	d.fail(posOf(n), path, "%s must be a mapping, got %s", where, yamlast.Describe(n))
	return nil
}

// entries returns the key/value pairs of m with merge keys expanded and
// keys written twice reported (yamlast.Doc.Entries); prefix is the dotted
// path of m.
func (d *decoder) entries(m *ast.MappingNode, prefix string) []*ast.MappingValueNode {
	out, probs := d.doc.Entries(m, prefix)
	for _, p := range probs {
		d.report(p)
	}
	return out
}

// fields returns the keys of m that are in allowed, and records an
// "unknown key" problem, listing the allowed keys, for every other key.
// Merge keys are expanded and duplicate keys reported (entries).
func (d *decoder) fields(m *ast.MappingNode, prefix, where string, allowed []string) []field {
	return d.fieldsOf(d.entries(m, prefix), prefix, where, allowed)
}

func (d *decoder) fieldsOf(entries []*ast.MappingValueNode, prefix, where string, allowed []string) []field {
	var out []field
	for _, mv := range entries {
		key := mv.Key.GetToken().Value
		path := key
		if prefix != "" {
			path = prefix + "." + key
		}
		if !slices.Contains(allowed, key) {
			sorted := slices.Clone(allowed)
			slices.Sort(sorted)
			d.keyProblem(posOf(mv.Key), path, "unknown key %q in %s; allowed: %s", key, where, strings.Join(sorted, ", "))
			continue
		}
		out = append(out, field{key: key, path: path, pos: posOf(mv.Key), val: mv.Value})
	}
	return out
}

func (d *decoder) sequence(n ast.Node, path string) []ast.Node {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.SequenceNode:
		return x.Values
	}
	d.fail(posOf(n), path, "%s must be a list, got %s", path, yamlast.Describe(n))
	return nil
}

func (d *decoder) str(n ast.Node, path string) string {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return ""
	case *ast.StringNode:
		return x.Value
	case *ast.LiteralNode:
		return x.Value.Value
	}
	d.fail(posOf(n), path, "%s must be a string, got %s", path, yamlast.Describe(n))
	return ""
}

func (d *decoder) intp(n ast.Node, path string) *int {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.IntegerNode:
		var v int
		switch iv := x.Value.(type) {
		case int64:
			v = int(iv)
		case uint64:
			if iv > math.MaxInt32 {
				d.fail(posOf(x), path, "%s: %d is too large; the maximum is %d", path, iv, math.MaxInt32)
				return nil
			}
			v = int(iv)
		}
		if v > math.MaxInt32 {
			d.fail(posOf(x), path, "%s: %d is too large; the maximum is %d", path, v, math.MaxInt32)
			return nil
		}
		if v < math.MinInt32 {
			d.fail(posOf(x), path, "%s: %d is too small; the minimum is %d", path, v, math.MinInt32)
			return nil
		}
		return &v
	}
	d.fail(posOf(n), path, "%s must be an integer, got %s", path, yamlast.Describe(n))
	return nil
}

func (d *decoder) boolp(n ast.Node, path string) *bool {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return nil
	case *ast.BoolNode:
		v := x.Value
		return &v
	}
	d.fail(posOf(n), path, "%s must be true or false, got %s", path, yamlast.Describe(n))
	return nil
}

// scalar returns a string, int64, float64 or bool; anything else (null, a
// list, a mapping) is a problem: tool args and when.equals are flat.
func (d *decoder) scalar(n ast.Node, path string) any {
	n = d.resolve(n, path)
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value
	case *ast.LiteralNode:
		return x.Value.Value
	case *ast.BoolNode:
		return x.Value
	case *ast.FloatNode:
		return x.Value
	case *ast.IntegerNode:
		switch iv := x.Value.(type) {
		case int64:
			return iv
		case uint64:
			if iv <= math.MaxInt64 {
				return int64(iv)
			}
		}
	}
	d.fail(posOf(n), path, "%s must be a scalar (string, number or bool), got %s", path, yamlast.Describe(n))
	return nil
}

func (d *decoder) strList(n ast.Node, path string) []string {
	items := d.sequence(n, path)
	if items == nil {
		if _, ok := d.resolve(n, path).(*ast.SequenceNode); ok {
			return []string{} // an explicit empty list differs from absence
		}
		return nil
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		out = append(out, d.str(it, fmt.Sprintf("%s[%d]", path, i)))
	}
	return out
}

func (d *decoder) flow(kv field) *Flow {
	f := &Flow{File: d.file, Pos: kv.pos, Fields: map[string]Pos{}}
	m := d.mapping(kv.val, "flow", "flow")
	if m == nil {
		if isNull(d.resolve(kv.val, "flow")) {
			d.fail(kv.pos, "flow", "flow is empty; want a mapping with name, task_type, nodes, edges, ...")
		}
		return nil // nothing parsed: the other layers have nothing to check
	}
	for _, fl := range d.fields(m, "", "flow", flowKeys) {
		f.Fields[fl.path] = fl.pos
		switch fl.key {
		case "name":
			f.Name = d.str(fl.val, fl.path)
		case "task_type":
			f.TaskType = d.str(fl.val, fl.path)
		case "permission_ceiling":
			f.PermissionCeiling = d.str(fl.val, fl.path)
		case "output_policy":
			f.OutputPolicy = d.str(fl.val, fl.path)
		case "publishing":
			f.Publishing = d.str(fl.val, fl.path)
		case "network_policy":
			f.NetworkPolicy = d.str(fl.val, fl.path)
		case "defaults":
			f.Defaults = d.defaults(f, fl)
		case "nodes":
			for i, it := range d.sequence(fl.val, fl.path) {
				f.Nodes = append(f.Nodes, d.node(i, it))
			}
		case "edges":
			for i, it := range d.sequence(fl.val, fl.path) {
				f.Edges = append(f.Edges, d.edge(i, it))
			}
		case "budgets":
			f.Budgets = d.budgets(f, fl)
		case "supervisor":
			f.Supervisor = d.supervisor(f, fl)
		case "decomposition":
			f.Decomposition = d.decomposition(f, fl)
		case "submit_format":
			f.SubmitFormat = d.str(fl.val, fl.path)
		case "check_policy":
			f.CheckPolicy = d.str(fl.val, fl.path)
		}
	}
	return f
}

func (d *decoder) defaults(f *Flow, kv field) *Defaults {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	def := &Defaults{}
	for _, fl := range d.fields(m, kv.path, kv.path, defaultsKeys) {
		f.Fields[fl.path] = fl.pos
		em := d.mapping(fl.val, fl.path, fl.path)
		if em == nil {
			continue
		}
		ev := &EvaluatorDefaults{}
		for _, e := range d.fields(em, fl.path, fl.path, evalDefaultsKeys) {
			f.Fields[e.path] = e.pos
			switch e.key {
			case "session_scope":
				ev.SessionScope = d.str(e.val, e.path)
			case "permission_profile":
				ev.PermissionProfile = d.str(e.val, e.path)
			case "max_rework_per_stage":
				ev.MaxReworkPerStage = d.intp(e.val, e.path)
			case "gate_severity":
				ev.GateSeverity = d.str(e.val, e.path)
			}
		}
		def.Evaluator = ev
	}
	return def
}

func (d *decoder) budgets(f *Flow, kv field) map[string]int {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m.Values))
	for _, mv := range d.entries(m, kv.path) {
		name := mv.Key.GetToken().Value
		path := kv.path + "." + name
		f.Fields[path] = posOf(mv.Key)
		if isNull(d.resolve(mv.Value, path)) {
			d.fail(posOf(mv.Key), path, "%s must be an integer iteration cap, got null", path)
			continue
		}
		if v := d.intp(mv.Value, path); v != nil {
			out[name] = *v
		}
	}
	return out
}

func (d *decoder) supervisor(f *Flow, kv field) *Supervisor {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	s := &Supervisor{}
	for _, fl := range d.fields(m, kv.path, kv.path, supervisorKeys) {
		f.Fields[fl.path] = fl.pos
		switch fl.key {
		case "role_file":
			s.RoleFile = d.str(fl.val, fl.path)
		case "finalize_role_file":
			s.FinalizeRoleFile = d.str(fl.val, fl.path)
		case "handoff_role_file":
			s.HandoffRoleFile = d.str(fl.val, fl.path)
		case "emit_follow_ups":
			s.EmitFollowUps = d.boolp(fl.val, fl.path)
		case "observe":
			om := d.mapping(fl.val, fl.path, fl.path)
			if om == nil {
				continue
			}
			s.Observe = &Observe{}
			for _, o := range d.fields(om, fl.path, fl.path, observeKeys) {
				f.Fields[o.path] = o.pos
				s.Observe.Mode = d.str(o.val, o.path)
			}
		}
	}
	return s
}

func (d *decoder) decomposition(f *Flow, kv field) *Decomposition {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	dc := &Decomposition{}
	for _, fl := range d.fields(m, kv.path, kv.path, decompositionKeys) {
		f.Fields[fl.path] = fl.pos
		switch fl.key {
		case "proposed_by":
			dc.ProposedBy = d.str(fl.val, fl.path)
		case "sub_flow":
			dc.SubFlow = d.strList(fl.val, fl.path)
		case "shared_budget":
			dc.SharedBudget = d.str(fl.val, fl.path)
		}
	}
	return dc
}

func (d *decoder) edge(i int, n ast.Node) Edge {
	path := fmt.Sprintf("edges[%d]", i)
	e := Edge{Index: i, Pos: posOf(n), Fields: map[string]Pos{}}
	m := d.mapping(n, path, path)
	if m == nil {
		if isNull(d.resolve(n, path)) {
			d.fail(posOf(n), path, "%s is empty; want {from, to, outcome?, loop?, budget?}", path)
		}
		return e
	}
	e.Pos = posOf(m)
	for _, fl := range d.fields(m, path, path, edgeKeys) {
		e.Fields[fl.key] = fl.pos
		switch fl.key {
		case "from":
			e.From = d.str(fl.val, fl.path)
		case "to":
			e.To = d.str(fl.val, fl.path)
		case "outcome":
			e.Outcome = d.str(fl.val, fl.path)
		case "loop":
			e.Loop = d.str(fl.val, fl.path)
		case "budget":
			e.Budget = d.intp(fl.val, fl.path)
		}
	}
	return e
}

func (d *decoder) node(i int, n ast.Node) Node {
	path := fmt.Sprintf("nodes[%d]", i)
	nd := Node{Index: i, Pos: posOf(n), Fields: map[string]Pos{}}
	m := d.mapping(n, path, path)
	if m == nil {
		if isNull(d.resolve(n, path)) {
			d.fail(posOf(n), path, "%s is empty; want a node mapping with id and kind", path)
		}
		return nd
	}
	nd.Pos = posOf(m)
	// The kind decides which keys are allowed, so read id and kind first.
	entries := d.entries(m, path)
	for _, mv := range entries {
		switch mv.Key.GetToken().Value {
		case "kind":
			nd.Kind = d.str(mv.Value, path+".kind")
		case "id":
			nd.ID = d.str(mv.Value, path+".id")
		}
	}
	where := path
	if _, known := nodeKeys[nd.Kind]; known && nd.ID != "" {
		where = fmt.Sprintf("%s (%s %q)", path, nd.Kind, nd.ID)
	} else if known {
		where = fmt.Sprintf("%s (%s)", path, nd.Kind)
	}
	for _, fl := range d.fieldsOf(entries, path, where, allowedNodeKeys(nd.Kind)) {
		nd.Fields[fl.key] = fl.pos
		v, p := fl.val, fl.path
		switch fl.key {
		case "id", "kind": // read above
		case "when":
			nd.When = d.when(&nd, fl)
		case "role_file":
			nd.RoleFile = d.str(v, p)
		case "resume_role_file":
			nd.ResumeRoleFile = d.str(v, p)
		case "session_scope":
			nd.SessionScope = d.str(v, p)
		case "permission_profile":
			nd.PermissionProfile = d.str(v, p)
		case "network_access":
			nd.NetworkAccess = d.boolp(v, p)
		case "git_evidence":
			nd.GitEvidence = d.boolp(v, p)
		case "provider":
			nd.Provider = d.str(v, p)
		case "model":
			nd.Model = d.str(v, p)
		case "reasoning":
			nd.Reasoning = d.str(v, p)
		case "lineage_affinity":
			nd.LineageAffinity = d.str(v, p)
		case "output_artifact":
			nd.OutputArtifact = d.str(v, p)
		case "output_file":
			nd.OutputFile = d.str(v, p)
		case "output_schema":
			nd.OutputSchema = d.str(v, p)
		case "best_effort":
			if b := d.boolp(v, p); b != nil {
				nd.BestEffort = *b
			}
		case "hitl":
			nd.HITL = d.hitlGrant(&nd, fl)
		case "extra_args":
			nd.ExtraArgs = d.strList(v, p)
		case "skills":
			nd.Skills = d.strList(v, p)
		case "allow_skills":
			nd.AllowSkills = d.boolp(v, p)
		case "timeout_seconds":
			nd.TimeoutSeconds = d.intp(v, p)
		case "role":
			nd.Role = d.str(v, p)
		case "blocking":
			nd.Blocking = d.boolp(v, p)
		case "max_rework_per_stage":
			nd.MaxReworkPerStage = d.intp(v, p)
		case "gate_severity":
			nd.GateSeverity = d.str(v, p)
		case "checker":
			nd.Checker = d.str(v, p)
		case "manifest":
			nd.Manifest = d.str(v, p)
		case "tool":
			nd.Tool = d.str(v, p)
		case "args":
			nd.Args = d.args(&nd, fl)
		case "signal":
			nd.Signal = d.str(v, p)
		case "question":
			nd.Question = d.str(v, p)
		case "timeout_s":
			nd.TimeoutS = d.intp(v, p)
		case "policy":
			nd.Policy = d.str(v, p)
		case "submit_format":
			nd.SubmitFormat = d.str(v, p)
		case "verdicts":
			nd.Verdicts = d.verdicts(&nd, fl)
		case "context":
			nd.Context = d.context(&nd, fl)
		}
	}
	return nd
}

// context reads a node's context policy {steps: [node ids]}.
func (d *decoder) context(nd *Node, kv field) *ContextPolicy {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	c := &ContextPolicy{}
	for _, fl := range d.fields(m, kv.path, kv.path, contextKeys) {
		nd.Fields[kv.key+"."+fl.key] = fl.pos
		if fl.key == "steps" {
			c.Steps = d.strList(fl.val, fl.path)
			if c.Steps == nil {
				c.Steps = []string{}
			}
		}
	}
	return c
}

// verdicts reads a node's verdict contract {allowed: [..], channel}.
func (d *decoder) verdicts(nd *Node, kv field) *Verdicts {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	v := &Verdicts{}
	for _, fl := range d.fields(m, kv.path, kv.path, verdictsKeys) {
		nd.Fields[kv.key+"."+fl.key] = fl.pos
		switch fl.key {
		case "allowed":
			v.Allowed = d.strList(fl.val, fl.path)
		case "channel":
			v.Channel = d.str(fl.val, fl.path)
		}
	}
	return v
}

func (d *decoder) when(nd *Node, kv field) *When {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	w := &When{}
	for _, fl := range d.fields(m, kv.path, kv.path, whenKeys) {
		nd.Fields["when."+fl.key] = fl.pos
		switch fl.key {
		case "fact":
			w.Fact = d.str(fl.val, fl.path)
		case "equals":
			w.Equals = d.scalar(fl.val, fl.path)
		}
	}
	return w
}

func (d *decoder) hitlGrant(nd *Node, kv field) *HITLGrant {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	h := &HITLGrant{}
	for _, fl := range d.fields(m, kv.path, kv.path, hitlGrantKeys) {
		nd.Fields["hitl."+fl.key] = fl.pos
		b := d.boolp(fl.val, fl.path)
		if b == nil {
			continue
		}
		switch fl.key {
		case "allow_question":
			h.AllowQuestion = *b
		case "allow_approval":
			h.AllowApproval = *b
		}
	}
	return h
}

// args reads a tool's flat scalar mapping; any key is allowed (it is the
// tool's own vocabulary), nested values are not (reference.md § tool node).
func (d *decoder) args(nd *Node, kv field) map[string]any {
	m := d.mapping(kv.val, kv.path, kv.path)
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m.Values))
	for _, mv := range d.entries(m, kv.path) {
		key := mv.Key.GetToken().Value
		path := kv.path + "." + key
		nd.Fields["args."+key] = posOf(mv.Key)
		if v := d.scalar(mv.Value, path); v != nil {
			out[key] = v
		}
	}
	return out
}

// flowsIn says which flows flowsDir holds, for the error naming a flow it
// does not: "flows there: a, b" or that there are none.
func flowsIn(flowsDir string) string {
	matches, _ := filepath.Glob(filepath.Join(flowsDir, "*.yaml"))
	var names []string
	for _, m := range matches {
		names = append(names, strings.TrimSuffix(filepath.Base(m), ".yaml"))
	}
	if len(names) == 0 {
		return "there is no flow (*.yaml) in " + flowsDir
	}
	sort.Strings(names)
	return "flows there: " + strings.Join(names, ", ")
}
