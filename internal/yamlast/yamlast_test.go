package yamlast

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
)

// parseOne parses src as one document and returns its Doc and top mapping.
func parseOne(t *testing.T, src string) (*Doc, *ast.MappingNode) {
	t.Helper()
	bodies, p := Parse([]byte(src))
	if p != nil || len(bodies) != 1 {
		t.Fatalf("Parse(%q) = %d documents, %v", src, len(bodies), p)
	}
	d := NewDoc(bodies[0])
	r, rp := d.Resolve(bodies[0], "")
	m, ok := r.(*ast.MappingNode)
	if rp != nil || !ok {
		t.Fatalf("top of %q is %s (%v), want a mapping", src, Describe(r), rp)
	}
	return d, m
}

// keyValues renders entries as "key=value" in order.
func keyValues(d *Doc, es []*ast.MappingValueNode) string {
	var out []string
	for _, mv := range es {
		v, _ := d.Resolve(mv.Value, "")
		out = append(out, mv.Key.GetToken().Value+"="+v.GetToken().Value)
	}
	return strings.Join(out, " ")
}

// mappingAt resolves the value of key in m.
func mappingAt(t *testing.T, d *Doc, m *ast.MappingNode, key string) *ast.MappingNode {
	t.Helper()
	for _, mv := range m.Values {
		if mv.Key.GetToken().Value == key {
			r, _ := d.Resolve(mv.Value, key)
			if mm, ok := r.(*ast.MappingNode); ok {
				return mm
			}
		}
	}
	t.Fatalf("no mapping at %q", key)
	return nil
}

// YAML 1.1 merge keys (PyYAML, worc): keys written beside `<<` win wherever
// it stands, and in `<<: [*a, *b]` the earlier mapping wins.
func TestEntries_MergeKeysWrittenKeysThenEarlierMergesWin(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc: {<<: [*a, *b], x: 3}\nd: {w: 4, <<: *b}\n")
	es, probs := d.Entries(mappingAt(t, d, top, "c"), "c")
	if len(probs) != 0 {
		t.Fatalf("problems: %+v", probs)
	}
	if got := keyValues(d, es); got != "y=1 z=2 x=3" {
		t.Errorf("c = %q, want y=1 z=2 x=3 (x written wins, a's y before b's)", got)
	}
	es, _ = d.Entries(mappingAt(t, d, top, "d"), "d")
	if got := keyValues(d, es); got != "w=4 y=2 z=2" {
		t.Errorf("d = %q, want w=4 y=2 z=2", got)
	}
}

// A mapping that merges itself is one Failed problem at <prefix>.<<, not an
// endless (or exponential) expansion.
func TestEntries_SelfMergeIsAProblem(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "n: &n {id: a, <<: [*n, *n]}\n")
	es, probs := d.Entries(mappingAt(t, d, top, "n"), "n")
	if len(probs) != 1 || probs[0].Path != "n.<<" || !probs[0].Failed ||
		!strings.Contains(probs[0].Message, "merges a mapping into itself") || probs[0].Pos != (Pos{1, 15}) {
		t.Fatalf("problems = %+v, want one at n.<< line 1 col 15", probs)
	}
	if got := keyValues(d, es); got != "id=a" {
		t.Errorf("entries = %q, want id=a", got)
	}
}

// A key written twice is a problem naming the first's position, the first
// value standing; one written twice in a merged mapping is reported under
// the merging mapping's path, once however often it is merged.
func TestEntries_DuplicateKeysViaMerge(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "a: &a\n  k: 1\n  k: 2\nm:\n  <<: [*a, *a]\n  j: 3\n  j: 4\n")
	es, probs := d.Entries(mappingAt(t, d, top, "m"), "m")
	want := []Problem{
		{Pos: Pos{7, 3}, Path: "m.j", Message: `duplicate key "j" (first at line 6, column 3); a key may appear once in a mapping`},
		{Pos: Pos{3, 3}, Path: "m.k", Message: `duplicate key "k" (first at line 2, column 3); a key may appear once in a mapping`},
	}
	if len(probs) != len(want) {
		t.Fatalf("problems = %+v, want %+v", probs, want)
	}
	for i := range want {
		if probs[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, probs[i], want[i])
		}
	}
	if got := keyValues(d, es); got != "k=1 j=3" {
		t.Errorf("entries = %q, want k=1 j=3", got)
	}
}

// A merge key takes a mapping or a list of them; anything else is Failed.
func TestEntries_MergeOfAScalarIsAProblem(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "m: {<<: x, k: 1}\n")
	_, probs := d.Entries(mappingAt(t, d, top, "m"), "m")
	if len(probs) != 1 || probs[0].Path != "m.<<" || !probs[0].Failed || !strings.HasSuffix(probs[0].Message, `got string "x"`) {
		t.Fatalf("problems = %+v", probs)
	}
}

// An alias resolves to its anchor's value wherever the anchor sits, through
// tags; one naming no anchor is a Failed problem at the alias.
func TestResolve_Aliases(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "b: !!str *v\na: &v hello\nc: *nope\n")
	if r, p := d.Resolve(top.Values[0].Value, "b"); p != nil || Describe(r) != `string "hello"` {
		t.Errorf("b resolves to %s, %v; want string \"hello\"", Describe(r), p)
	}
	r, p := d.Resolve(top.Values[2].Value, "c")
	if r != nil || p == nil || *p != (Problem{Pos: Pos{3, 4}, Path: "c", Message: "alias *nope names no anchor", Failed: true}) {
		t.Errorf("c resolves to %v, %+v; want nil and a dangling-alias problem at 3:4", r, p)
	}
}

func TestDescribe_NamesTheYAMLType(t *testing.T) {
	t.Parallel()
	d, top := parseOne(t, "a: {}\nb: []\nc: x\nd: 3\ne: 1.5\nf: true\ng: ~\nh: |\n  text\ni: .inf\n")
	want := []string{"a mapping", "a list", `string "x"`, "integer 3", "number 1.5", "bool true", "null", "a block string", "infinity .inf"}
	for i, w := range want {
		r, _ := d.Resolve(top.Values[i].Value, "")
		if got := Describe(r); got != w {
			t.Errorf("Describe(%s) = %q, want %q", top.Values[i].Key.GetToken().Value, got, w)
		}
	}
	if got := Describe(nil); got != "null" {
		t.Errorf("Describe(nil) = %q", got)
	}
}

// PosOf locates a block mapping at its first key, not goccy's first ':'.
func TestPosOf_MappingAtFirstKey(t *testing.T) {
	t.Parallel()
	_, top := parseOne(t, "top:\n  key: 1\n")
	if got := PosOf(top.Values[0].Value); got != (Pos{2, 3}) {
		t.Errorf("PosOf = %+v, want 2:3", got)
	}
}

func TestParse_InvalidYAMLIsOneProblem(t *testing.T) {
	t.Parallel()
	_, p := Parse([]byte("a: [\n"))
	if p == nil || !strings.HasPrefix(p.Message, "invalid YAML: ") || p.Pos.Line == 0 {
		t.Errorf("Parse = %+v, want a located invalid-YAML problem", p)
	}
}

func TestInvalidUTF8_NamesOffsetLineAndColumn(t *testing.T) {
	t.Parallel()
	if off, _, _ := InvalidUTF8([]byte("fine ✓\n")); off != -1 {
		t.Errorf("valid UTF-8: offset %d", off)
	}
	off, line, col := InvalidUTF8([]byte("a\nbc\xe9d"))
	if off != 4 || line != 2 || col != 3 {
		t.Errorf("InvalidUTF8 = %d, %d:%d; want 4, 2:3", off, line, col)
	}
	if got := string(StripBOM([]byte("\ufeffx"))); got != "x" {
		t.Errorf("StripBOM = %q", got)
	}
}
