// Package yamlast is the goccy/go-yaml AST plumbing shared by Stratus's
// strict YAML decoders, internal/flow (worc flow files, reference.md §
// "every mapping is a fail-closed allowlist") and internal/config
// (config.yaml, docs/contracts.md § Flows, prompts and the supervisor):
// parsing one document, collecting
// anchors, resolving aliases and tags, expanding YAML 1.1 merge keys
// (`<<: *a`, `<<: [*a, *b]`, as PyYAML reads them for worc) with duplicate
// keys reported, naming a node's YAML type for messages, and the UTF-8 and
// byte-order-mark checks on the raw bytes.
//
// Nothing here formats an error: problems are returned as values
// (position, path, message) and each decoder reports them its own way.
package yamlast

import (
	"errors"
	"fmt"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// Pos is a 1-based source position; the zero Pos means unknown.
type Pos struct {
	Line, Col int
}

// Problem is one finding in a YAML file.
type Problem struct {
	Pos     Pos
	Path    string // dotted path of the value at fault, e.g. "nodes[2].<<"
	Message string
	// Failed is true when the value at Path did not decode (a dangling
	// alias, a merge key that merges no mapping); false for a key written
	// twice, whose first value stands.
	Failed bool
}

// Join appends key to a dotted path ("" + "a" → "a", "a" + "b" → "a.b").
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Parse parses data and returns the bodies of its non-empty documents.
// Duplicate keys are left to Entries, so that one problem each is reported
// and the rest of the file is still read (goccy would stop at the first).
// Invalid YAML is one problem "invalid YAML: ...", at goccy's position;
// an input over DefaultLimits (Bounds, before parsing; Expanded, after) is
// one problem naming the limit.
func Parse(data []byte) ([]ast.Node, *Problem) {
	if p := Bounds(data, DefaultLimits); p != nil {
		return nil, p
	}
	bodies, p := parse(data)
	if p != nil {
		return nil, p
	}
	for _, b := range bodies {
		if p := Expanded(b, DefaultLimits); p != nil {
			return nil, p
		}
	}
	return bodies, nil
}

func parse(data []byte) ([]ast.Node, *Problem) {
	af, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		var ye interface {
			GetToken() *token.Token
			GetMessage() string
		}
		if errors.As(err, &ye) {
			var p Pos
			if tk := ye.GetToken(); tk != nil && tk.Position != nil {
				p = Pos{tk.Position.Line, tk.Position.Column}
			}
			return nil, &Problem{Pos: p, Message: "invalid YAML: " + ye.GetMessage(), Failed: true}
		}
		return nil, &Problem{Message: fmt.Sprintf("invalid YAML: %v", err), Failed: true}
	}
	var bodies []ast.Node
	for _, doc := range af.Docs {
		if doc.Body != nil {
			bodies = append(bodies, doc.Body)
		}
	}
	return bodies, nil
}

// TokenPos is the position goccy gives n's own token (a block mapping's is
// its first ':'); zero for nil.
func TokenPos(n ast.Node) Pos {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return Pos{}
	}
	p := n.GetToken().Position
	return Pos{p.Line, p.Column}
}

// PosOf locates a node where a reader looks for it: a mapping by its first
// key, anything else by its token.
func PosOf(n ast.Node) Pos {
	if m, ok := n.(*ast.MappingNode); ok && len(m.Values) > 0 {
		return PosOf(m.Values[0].Key)
	}
	return TokenPos(n)
}

// Describe names a node's YAML type (and value, for scalars) for messages:
// `null`, `a mapping`, `a list`, `string "x"`, `integer 3`, ...
func Describe(n ast.Node) string {
	switch x := n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		return fmt.Sprintf("string %q", x.Value)
	case *ast.LiteralNode:
		return "a block string"
	case *ast.IntegerNode:
		return "integer " + x.GetToken().Value
	case *ast.FloatNode:
		return "number " + x.GetToken().Value
	case *ast.BoolNode:
		return "bool " + x.GetToken().Value
	}
	if tk := n.GetToken(); tk != nil {
		return strings.ToLower(n.Type().String()) + " " + tk.Value
	}
	return strings.ToLower(n.Type().String())
}

// Doc resolves the aliases of one YAML document.
type Doc struct {
	anchors map[string]ast.Node
}

// NewDoc collects the anchors of the document body first, so that an alias
// resolves wherever its anchor sits.
func NewDoc(body ast.Node) *Doc {
	d := &Doc{anchors: map[string]ast.Node{}}
	if body != nil {
		ast.Walk(anchorCollector(d.anchors), body)
	}
	return d
}

type anchorCollector map[string]ast.Node

func (a anchorCollector) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

// maxAliasDepth bounds a chain of anchors, aliases and tags.
const maxAliasDepth = 100

// Resolve strips anchors, aliases and tags down to the value node. An alias
// naming no anchor, or a chain over maxAliasDepth, yields nil and a Failed
// problem at path.
func (d *Doc) Resolve(n ast.Node, path string) (ast.Node, *Problem) {
	for range maxAliasDepth {
		switch x := n.(type) {
		case *ast.AnchorNode:
			n = x.Value
		case *ast.AliasNode:
			name := ""
			if x.Value != nil {
				name = x.Value.GetToken().Value
			}
			target, ok := d.anchors[name]
			if !ok {
				return nil, &Problem{Pos: PosOf(x), Path: path, Message: fmt.Sprintf("alias *%s names no anchor", name), Failed: true}
			}
			n = target
		case *ast.TagNode:
			n = x.Value
		default:
			return n, nil
		}
	}
	return nil, &Problem{Pos: PosOf(n), Path: path, Message: "aliases nest too deeply", Failed: true}
}

// MaxMergeDepth bounds nested merge keys (a mapping merging one that
// merges another ...); an anchor merged into itself is caught before.
const MaxMergeDepth = 32

// Entries returns the key/value pairs of m as YAML 1.1 merge keys define
// them (PyYAML, worc): a `<<` key merges the mapping its value resolves to
// (an alias, usually), or each mapping of a list of them, earlier ones
// winning; a key written in m itself wins over a merged one, wherever the
// `<<` stands. A key written twice in one mapping is a problem (PyYAML
// would keep the last silently); the first is used. A merge key whose
// value is not a mapping or a list of them, or that merges a mapping into
// itself, is a Failed problem at prefix.<<. prefix is the dotted path of m.
// Each problem is returned once, in the order found.
func (d *Doc) Entries(m *ast.MappingNode, prefix string) ([]*ast.MappingValueNode, []Problem) {
	w := &merger{doc: d, active: map[*ast.MappingNode]bool{}, seen: map[Problem]bool{}}
	out := w.entries(m, prefix, 0)
	return out, w.problems
}

type merger struct {
	doc      *Doc
	active   map[*ast.MappingNode]bool // the mappings being merged, to catch a self-merge
	problems []Problem
	seen     map[Problem]bool // a mapping merged in twice is read twice
}

func (w *merger) report(p Problem) {
	if !w.seen[p] {
		w.seen[p] = true
		w.problems = append(w.problems, p)
	}
}

func (w *merger) resolve(n ast.Node, path string) ast.Node {
	r, p := w.doc.Resolve(n, path)
	if p != nil {
		w.report(*p)
	}
	return r
}

func (w *merger) entries(m *ast.MappingNode, prefix string, depth int) []*ast.MappingValueNode {
	w.active[m] = true
	defer delete(w.active, m)
	own := map[string]Pos{}
	for _, mv := range m.Values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); merge {
			continue
		}
		key := mv.Key.GetToken().Value
		if first, dup := own[key]; dup {
			w.report(Problem{Pos: PosOf(mv.Key), Path: Join(prefix, key),
				Message: fmt.Sprintf("duplicate key %q (first at line %d, column %d); a key may appear once in a mapping", key, first.Line, first.Col)})
			continue
		}
		own[key] = PosOf(mv.Key)
	}
	var out []*ast.MappingValueNode
	seen := map[string]bool{}
	for _, mv := range m.Values {
		if _, merge := mv.Key.(*ast.MergeKeyNode); !merge {
			key := mv.Key.GetToken().Value
			if !seen[key] {
				seen[key] = true
				out = append(out, mv)
			}
			continue
		}
		path := Join(prefix, "<<")
		for _, src := range w.sources(mv.Value, path) {
			if w.active[src] || depth >= MaxMergeDepth {
				w.report(Problem{Pos: PosOf(mv.Key), Path: path, Failed: true,
					Message: fmt.Sprintf("merge key << merges a mapping into itself (or nests merges over %d deep)", MaxMergeDepth)})
				continue
			}
			for _, in := range w.entries(src, prefix, depth+1) {
				key := in.Key.GetToken().Value
				if _, written := own[key]; written || seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, in)
			}
		}
	}
	return out
}

// sources resolves the value of a merge key to the mappings it merges.
func (w *merger) sources(v ast.Node, path string) []*ast.MappingNode {
	const want = "a merge key << takes a mapping (usually an alias *name to one) or a list of them, got %s"
	switch x := w.resolve(v, path).(type) {
	case *ast.MappingNode:
		return []*ast.MappingNode{x}
	case *ast.SequenceNode:
		var out []*ast.MappingNode
		for _, it := range x.Values {
			r := w.resolve(it, path)
			if m, ok := r.(*ast.MappingNode); ok {
				out = append(out, m)
			} else if it != nil {
				w.report(Problem{Pos: PosOf(it), Path: path, Message: fmt.Sprintf(want, Describe(r)), Failed: true})
			}
		}
		return out
	case nil:
		return nil
	default:
		w.report(Problem{Pos: PosOf(v), Path: path, Message: fmt.Sprintf(want, Describe(x)), Failed: true})
		return nil
	}
}
