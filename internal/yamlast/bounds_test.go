package yamlast

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hostile are the hostile YAML shapes Limits bounds, each at most 1 MiB.
func hostile() map[string]string {
	bomb := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 9; i++ {
		bomb += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	var keys strings.Builder
	keys.WriteString("{")
	for i := 0; keys.Len() < 1<<20-16; i++ {
		fmt.Fprintf(&keys, "k%x: 0, ", i)
	}
	keys.WriteString("z: 0}\n")
	var lines strings.Builder
	for i := 0; lines.Len() < 1<<20-16; i++ {
		fmt.Fprintf(&lines, "k%x: 0\n", i)
	}
	return map[string]string{
		"flow nesting 100,000 deep":  "x: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n",
		"flow nesting, unclosed":     "x: " + strings.Repeat("{a: ", 100_000) + "\n",
		"block nesting 100,000 deep": "x:\n  " + strings.Repeat("- ", 100_000) + "y\n",
		"a flow mapping of 1 MiB":    keys.String(),
		"a block mapping of 1 MiB":   lines.String(),
		"an alias bomb (10^10)":      bomb,
	}
}

// Each hostile shape is refused, naming the limit and where
// it was crossed, with memory proportional to the input (the whole check
// allocates under 100 MB; goccy alone took 15 GB on the first).
func TestCheck_HostileShapesRefusedInBoundedMemory(t *testing.T) {
	for name, doc := range hostile() {
		t.Run(name, func(t *testing.T) {
			if len(doc) > 1<<20 {
				t.Fatalf("the shape is %d bytes, over 1 MiB", len(doc))
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			err := Check([]byte(doc), DefaultLimits)
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), "over the limit") && !strings.Contains(err.Error(), "(the limit)") {
				t.Fatalf("Check = %v; want a limit named", err)
			}
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Errorf("%v: want the line and column where the limit was crossed", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 100<<20 {
				t.Errorf("checking %d bytes allocated %d MB; want under 100 MB", len(doc), alloc>>20)
			}
		})
	}
}

// What people write passes: nesting and size well inside the limits,
// quotes, comments and block scalars holding the characters the scan
// counts, and anchors used a few times.
func TestCheck_OrdinaryYAMLPasses(t *testing.T) {
	for name, doc := range map[string]string{
		"flow":          "flow:\n  name: x # a [comment\n  nodes:\n    - { id: a, kind: agent, role_file: 'a[b].md' }\n    - id: b\n      kind: evaluator\n      findings: [\"x]\", '{y']\n",
		"block scalars": "prompt: |\n  - a: [[[[\n    - b: {{{{\n  ::::\n  - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\nnext: >-\n  {[\n",
		"anchors":       "base: &b {model: x, reasoning: high}\na: *b\nb: *b\nc: {<<: *b, model: y}\n",
		"deep but fine": "a:\n" + nest(40),
		"multi-doc":     "---\na: 1\n...\n---\nb: [1, 2]\n",
		"urls":          "url: http://x:80/a:b\ntime: 12:30\n",
	} {
		if err := Check([]byte(doc), DefaultLimits); err != nil {
			t.Errorf("%s: %v\n%s", name, err, doc)
		}
	}
}

func nest(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%s k%d:\n", strings.Repeat(" ", i), i)
	}
	return b.String() + strings.Repeat(" ", n+1) + " v\n"
}

// The limits are the ones configured: a mapping holding 65 nested lists
// is 66 deep, refused at 64 where the 64th list opens, passed at 66; the
// node count likewise.
func TestBounds_AtTheLimit(t *testing.T) {
	doc := []byte("x: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n")
	if p := Bounds(doc, Limits{MaxDepth: 64, MaxNodes: 1000}); p == nil || p.Pos != (Pos{1, 67}) || p.Message != "nesting depth 65 is over the limit of 64" {
		t.Errorf("depth 66 at limit 64: %+v", p)
	}
	if p := Bounds(doc, Limits{MaxDepth: 66, MaxNodes: 1000}); p != nil {
		t.Errorf("depth 66 at limit 66: %+v", p)
	}
	items := []byte("x: [" + strings.TrimSuffix(strings.Repeat("1, ", 10), ", ") + "]\n")
	if p := Bounds(items, Limits{MaxDepth: 64, MaxNodes: 5}); p == nil || !strings.HasPrefix(p.Message, "node count 6 is over the limit of 5") {
		t.Errorf("11 nodes at limit 5: %+v", p)
	}
}

// The time to refuse each hostile shape, each next to its anchor:
// json.Valid over a JSON string as long as the input (a full scan of as
// many bytes, the floor; json.Valid over the YAML itself would stop at its
// first byte that is not JSON).
func BenchmarkCheck_Hostile(b *testing.B) {
	for name, doc := range hostile() {
		data := []byte(doc)
		floor := []byte(`"` + strings.Repeat("x", max(len(data)-2, 0)) + `"`)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				Check(data, DefaultLimits)
			}
		})
		b.Run(name+"/anchor_json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if !json.Valid(floor) {
					b.Fatal("the anchor's input is not JSON")
				}
			}
		})
	}
}
