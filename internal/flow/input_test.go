package flow

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// worc: "all fatal, all collected": an unknown key, a value
// of the wrong type and a key written twice do not hide the other layers.
// The ParseError carries what did parse; Validate on it finds the graph and
// security problems, and WithoutCascades leaves out what restates a parse
// problem (the missing role_file of a node whose role_file was a list).
func TestParse_ProblemsDoNotHideTheOtherLayers(t *testing.T) {
	t.Parallel()
	src := header + `  bogus: 1
  nodes:
    - id: a
      kind: agent
      role_file: [a.md]
      permission_profile: workspace-write
    - id: b
      kind: evaluator
      role: r
      role_file: b.md
      role_file: b2.md
      permission_profile: workspace-write
    - id: island
      kind: publish
      policy: pull_request
  edges:
    - {from: a, to: b, outcome: sometimes}
    - {from: b, to: nowhere}
`
	_, err := Parse("t.yaml", []byte(src))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Flow == nil {
		t.Fatalf("err = %v; want a ParseError carrying the parsed flow", err)
	}
	if got := fatalPaths(pe.Problems); strings.Join(got, " ") != "bogus nodes[0].role_file nodes[1].role_file" {
		t.Errorf("parse problems: %v\n%s", got, problemsText(pe.Problems))
	}
	if n := pe.Flow.Node("b"); n == nil || n.RoleFile != "b.md" || n.PermissionProfile != WorkspaceWrite {
		t.Errorf("node b as parsed: %+v (the first of a duplicated key is used)", n)
	}
	rest := WithoutCascades(pe, Validate(pe.Flow, ValidateOptions{RoleFileRoot: t.TempDir()}))
	want := map[string]bool{
		"nodes[1].permission_profile": false, // security: an evaluator is read-only
		"nodes[1].role_file":          false, // warning: b.md, the first of the duplicated key, is missing
		"edges[0].outcome":            false, // graph: an agent emits no "sometimes"
		"edges[1].to":                 false, // graph: no node "nowhere"
		"nodes":                       false, // graph: island is a second entry
	}
	for _, p := range rest {
		if _, ok := want[p.Path]; ok {
			want[p.Path] = true
		}
		if p.Path == "nodes[0].role_file" {
			t.Errorf("a cascade of the parse problem was kept: %s", p)
		}
	}
	for path, seen := range want {
		if !seen {
			t.Errorf("no problem at %s among:\n%s", path, problemsText(rest))
		}
	}
}

func TestWithoutCascades_DropsWhatIsUnderAParseProblem(t *testing.T) {
	t.Parallel()
	pe := &ParseError{failed: []string{"nodes[2]", "edges[0].from", "name"}}
	more := []Problem{{Path: "nodes[2].id"}, {Path: "nodes[2]"}, {Path: "nodes[20].id"}, {Path: "edges[0].from"},
		{Path: "edges[0].to"}, {Path: "name"}, {Path: "names"}, {Path: ""}}
	var kept []string
	for _, p := range WithoutCascades(pe, more) {
		kept = append(kept, p.Path)
	}
	if got := strings.Join(kept, " "); got != "nodes[20].id edges[0].to names " {
		t.Errorf("kept %q", got)
	}
}

// A budget whose value did not parse is said once: the edge naming its
// loop is not told the loop is undeclared (it is, with a bad value).
func TestWithoutCascades_ABudgetThatFailedIsNotAlsoUndeclared(t *testing.T) {
	t.Parallel()
	src := header + `  budgets: {fix: two}
  nodes:
    - {id: a, kind: agent, role_file: a.md, permission_profile: workspace-write}
    - {id: r, kind: evaluator, role: r, role_file: r.md}
    - {id: p, kind: publish, policy: pull_request}
  edges:
    - {from: a, to: r}
    - {from: r, to: a, outcome: rework, loop: fix}
    - {from: r, to: p, outcome: accept}
`
	_, err := Parse("t.yaml", []byte(src))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Flow == nil {
		t.Fatalf("err = %v; want a ParseError carrying the parsed flow", err)
	}
	if got := fatalPaths(pe.Problems); strings.Join(got, " ") != "budgets.fix" {
		t.Errorf("parse problems: %v\n%s", got, problemsText(pe.Problems))
	}
	all := Validate(pe.Flow, ValidateOptions{RoleFileRoot: t.TempDir()})
	if !slices.ContainsFunc(all, func(p Problem) bool { return p.Path == "edges[1].loop" }) {
		t.Fatalf("Validate alone does not flag the edge, so this test shows nothing:\n%s", problemsText(all))
	}
	for _, p := range WithoutCascades(pe, all) {
		if p.Path == "edges[1].loop" {
			t.Errorf("a cascade of the budget's parse problem was kept: %s", p)
		}
	}
}

// Load runs the task_type rule on what parsed, beside the parse problems.
func TestLoad_ReportsParseProblemsAndTheStemRuleTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "x.yaml"), []byte(header+"  bogus: 1\n"), 0o644)
	_, err := Load(dir, "x")
	var pe *ParseError
	if !errors.As(err, &pe) || len(pe.Problems) != 2 || pe.Flow == nil ||
		!strings.Contains(err.Error(), `unknown key "bogus"`) || !strings.Contains(err.Error(), `task_type "t" must equal the file stem "x"`) {
		t.Errorf("err = %v", err)
	}
}

// PyYAML (worc) skips a UTF-8 byte order mark; so does Parse,
// and positions stay those an editor shows.
func TestParse_ByteOrderMarkIsSkipped(t *testing.T) {
	t.Parallel()
	f, err := Parse("t.yaml", []byte("\ufeff"+header+"  nodes:\n    - {id: p, kind: publish, policy: pull_request}\n"))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if f.Name != "t" || f.Pos != (Pos{1, 1}) || f.pos("name") != (Pos{2, 3}) {
		t.Errorf("name %q, flow at %v, name at %v", f.Name, f.Pos, f.pos("name"))
	}
}

// YAML merge keys, as PyYAML reads them: `<<: *anchor` merges
// the anchored mapping, keys written beside it win, and in `<<: [*a, *b]`
// the earlier mapping wins.
func TestParse_MergeKeysMergeAnchoredMappings(t *testing.T) {
	t.Parallel()
	f := mustParse(t, `  nodes:
    - &review
      id: review
      kind: evaluator
      role: reviewer
      role_file: t/review.md
      gate_severity: high
    - <<: *review
      id: review2
      gate_severity: low
    - &pinned {id: pinned, kind: agent, role_file: t/a.md, provider: codex, model: m1}
    - <<: [{model: m2, reasoning: high}, *pinned]
      id: agent2
  edges:
    - &e {from: review, to: review2}
    - {<<: *e, from: review2, to: pinned}
`)
	r2 := f.Node("review2")
	if r2 == nil || r2.Kind != KindEvaluator || r2.Role != "reviewer" || r2.RoleFile != "t/review.md" || r2.GateSeverity != "low" {
		t.Errorf("review2 = %+v", r2)
	}
	if f.Node("review").GateSeverity != "high" {
		t.Errorf("the anchored node changed: %+v", f.Node("review"))
	}
	a2 := f.Node("agent2")
	if a2 == nil || a2.Kind != KindAgent || a2.Model != "m2" || a2.Reasoning != "high" || a2.Provider != "codex" || a2.RoleFile != "t/a.md" {
		t.Errorf("agent2 = %+v", a2)
	}
	if len(f.Edges) != 2 || f.Edges[1].From != "review2" || f.Edges[1].To != "pinned" {
		t.Errorf("edges = %+v", f.Edges)
	}
	// A merged key is checked like a written one.
	_, err := Parse("t.yaml", []byte(header+"  nodes:\n    - {id: a, kind: agent, role_file: x.md}\n    - {<<: {rolefile: y}, id: b, kind: agent}\n"))
	if err == nil || !strings.Contains(err.Error(), `unknown key "rolefile" in nodes[1] (agent "b")`) {
		t.Errorf("merged unknown key: %v", err)
	}
}

// Bytes that are not UTF-8 are refused, naming the file and the
// byte offset (they were accepted silently in a name or a role_file).
func TestParse_InvalidUTF8NamesTheByteOffset(t *testing.T) {
	t.Parallel()
	src := header + "  nodes:\n    - {id: a, kind: agent, role_file: caf\xe9.md}\n"
	_, err := Parse("t.yaml", []byte(src))
	off := strings.IndexByte(src, 0xe9)
	col := off - strings.LastIndexByte(src[:off], '\n')
	want := fmt.Sprintf("t.yaml:8:%d: the flow file is not valid UTF-8: byte 0xe9 at byte offset %d", col, off)
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

// A flow file over MaxFlowBytes is refused, naming its size
// and the cap, and Load does not read it whole.
func TestLoad_FlowFileOverTheCapIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(path, []byte(header), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, 5<<20); err != nil { // sparse: 5 MiB
		t.Fatal(err)
	}
	_, err := Load(dir, "big")
	want := fmt.Sprintf("is %d bytes, over the %d-byte (1 MiB) cap", 5<<20, MaxFlowBytes)
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v", err)
	}
}

// A role file over MaxRoleFileBytes, or not UTF-8, is a fatal problem of the
// node that names it; a BOM is skipped.
func TestValidate_RoleFileCapAndEncoding(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "t"), 0o755)
	os.WriteFile(filepath.Join(dir, "t/ok.md"), []byte("\ufeff---\nsubmit_format: text\n---\nWrite {task_path}.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "t/latin1.md"), []byte("Write the caf\xe9 menu.\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "t/huge.md"), nil, 0o644)
	os.Truncate(filepath.Join(dir, "t/huge.md"), 180<<20)
	f := mustParse(t, `  nodes:
    - {id: a, kind: agent, role_file: t/ok.md}
    - {id: b, kind: agent, role_file: t/latin1.md}
    - {id: c, kind: agent, role_file: t/huge.md}
    - {id: p, kind: publish, policy: pull_request}
  edges:
    - {from: a, to: b}
    - {from: b, to: c}
    - {from: c, to: p}
`)
	ps := Validate(f, ValidateOptions{RoleFileRoot: dir})
	if got := strings.Join(fatalPaths(ps), " "); got != "nodes[1].role_file nodes[2].role_file" {
		t.Fatalf("fatal: %s\n%s", got, problemsText(ps))
	}
	text := problemsText(ps)
	for _, want := range []string{
		"t/latin1.md is not valid UTF-8: byte 0xe9 at byte offset 13 (line 1, column 14)",
		fmt.Sprintf("t/huge.md is %d bytes, over the %d-byte (1 MiB) cap", 180<<20, MaxRoleFileBytes),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	data, err := ReadRoleFile(filepath.Join(dir, "t/ok.md"))
	if err != nil || !strings.HasPrefix(string(data), "---\n") {
		t.Errorf("ReadRoleFile kept the BOM or failed: %q %v", data, err)
	}
	if _, err := ReadRoleFile(filepath.Join(dir, "t/huge.md")); stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("huge role file: %v, want ETOOLARGE", err)
	}
	if _, err := ReadRoleFile(filepath.Join(dir, "t/none.md")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing role file: %v, want os.ErrNotExist", err)
	}
}

// bigFlow is a flow of n tool nodes, built in code as Parse builds it: a
// chain n0 -> n1 -> ..., or a star whose entry routes to n-1 terminals.
func bigFlow(n int, star bool) *Flow {
	f := &Flow{File: "big.yaml", Name: "big", TaskType: "big", PermissionCeiling: ReadOnly,
		OutputPolicy: "code_change", Publishing: "none", Fields: map[string]Pos{}, byID: map[string]int{}}
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		f.Nodes = append(f.Nodes, Node{ID: id, Kind: KindTool, Tool: "t", Index: i, Pos: Pos{i + 1, 5}})
		f.byID[id] = i
	}
	for i := 1; i < n; i++ {
		e := Edge{From: fmt.Sprintf("n%d", i-1), To: fmt.Sprintf("n%d", i), Index: i - 1}
		if star {
			e.From, e.Outcome = "n0", fmt.Sprintf("route:r%d", i)
		}
		f.Edges = append(f.Edges, e)
	}
	return f
}

// Validation is linear in the flow: the reachability checks
// are one forward and one reverse walk (a walk per terminal and a node
// lookup by scan made 16k nodes take 24 s). This checks that a large star
// (16k terminals) and a large chain come out right; BenchmarkValidate
// measures the time.
func TestValidate_LargeFlowsComeOutRight(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("large flow")
	}
	for _, star := range []bool{false, true} {
		f := bigFlow(12000, star)
		for _, p := range Fatal(Validate(f, ValidateOptions{})) {
			t.Errorf("star=%v: %s", star, p)
			break
		}
		// Cut the last node away into a loop of its own: it alone is
		// unreachable and reaches no terminal; the rest still do.
		f.Edges[len(f.Edges)-1] = Edge{From: "n11999", To: "n11999", Index: len(f.Edges) - 1}
		var paths []string
		for _, p := range Fatal(Validate(f, ValidateOptions{})) {
			paths = append(paths, p.Path)
		}
		if strings.Join(paths, " ") != "nodes[11999] nodes[11999]" {
			t.Errorf("star=%v: fatal paths %v, want nodes[11999] twice (unreachable, no terminal)", star, paths)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, tc := range []struct {
		name string
		star bool
	}{{"chain16k", false}, {"star16k", true}} {
		f := bigFlow(16000, tc.star)
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				Validate(f, ValidateOptions{})
			}
		})
	}
}

// A flow nested 20,000 deep (669 MB and 14 s in validate before) is refused
// before it is parsed, at the line and column where it crossed the limit, as
// is an alias bomb.
func TestParse_NestingAndAliasBombsRefusedAtTheLimit(t *testing.T) {
	t.Parallel()
	deep := header + "  nodes: " + strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000) + "\n"
	_, err := Parse("t.yaml", []byte(deep))
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "t.yaml:7:") || !strings.Contains(err.Error(), "nesting depth 65 is over the limit of 64") {
		t.Errorf("20,000 deep: %v", err)
	}
	bomb := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		bomb += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	_, err = Parse("t.yaml", []byte(bomb+header))
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "expands its aliases to more than 100000 nodes") {
		t.Errorf("alias bomb: %v", err)
	}
}
