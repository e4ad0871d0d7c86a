package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"

	"github.com/stratusflow/stratus"
)

// problem is one finding in config.yaml, located where goccy/go-yaml puts
// the key at fault (line 0: no position, e.g. a defaulted value).
type problem struct {
	line, col int
	field     string // dotted path: agents.providers.echo.command, checks.command_sets.go.commands[0].argv
	msg       string
}

// problems collects every finding of one config file, so that one error
// lists them all, one per line, sorted by position (issue 5 M3: config
// errors used to come one per run).
type problems struct {
	file string
	pos  map[string]token.Position // field path → its key's position
	list []problem
	// failed are the paths whose value did not decode: a semantic check at
	// or under one of them would only restate the problem.
	failed []string
}

// at records a problem at an explicit position.
func (ps *problems) at(p *token.Position, field, format string, args ...any) {
	pr := problem{field: field, msg: fmt.Sprintf(format, args...)}
	if p != nil {
		pr.line, pr.col = p.Line, p.Column
	}
	ps.list = append(ps.list, pr)
}

// add records a problem of a semantic check on field, located at the key of
// field or, when the file does not write it, of its nearest written parent.
// It is dropped when field lies under a value that failed to decode.
func (ps *problems) add(field, format string, args ...any) {
	for _, f := range ps.failed {
		if under(field, f) {
			return
		}
	}
	var p *token.Position
	for path := field; path != ""; path = parent(path) {
		if q, ok := ps.pos[path]; ok {
			p = &q
			break
		}
	}
	ps.at(p, field, format, args...)
}

// under reports whether path is prefix or lies under it.
func under(path, prefix string) bool {
	rest, ok := strings.CutPrefix(path, prefix)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// parent drops the last segment of a field path ("a.b[2]" → "a.b" → "a" → "").
func parent(path string) string {
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return ""
}

// err is nil without problems, else one EINVALID listing each problem as
// "file:line:col: field: message", sorted by position.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if a.line != b.line {
			return a.line < b.line
		}
		return a.col < b.col
	})
	lines := make([]string, len(ps.list))
	for i, p := range ps.list {
		loc := ps.file
		if p.line > 0 {
			loc = fmt.Sprintf("%s:%d:%d", ps.file, p.line, p.col)
		}
		if p.field != "" {
			loc += ": " + p.field
		}
		lines[i] = loc + ": " + p.msg
	}
	// Each line names its field; Error.Field stays empty so that Error()
	// does not prefix one field to the whole list.
	return &stratus.Error{Code: stratus.EINVALID, Message: strings.Join(lines, "\n")}
}

// decoder fills a Config from the YAML AST strictly, by reflection over the
// yaml tags, recording every problem instead of stopping at the first: an
// unknown key, a key given twice, a value of the wrong type. Scalars
// decode as goccy/go-yaml decodes them (yaml.NodeToValue); anchors,
// aliases and merge keys `<<: *anchor` resolve as in YAML 1.1.
type decoder struct {
	ps      *problems
	anchors map[string]ast.Node
}

// decode parses data into c. It reports false when the file is not one
// YAML mapping at all (nothing else is then worth checking).
func decode(ps *problems, data []byte, c *Config) bool {
	af, err := parser.ParseBytes(data, 0, parser.AllowDuplicateMapKey())
	if err != nil {
		var ye interface {
			GetToken() *token.Token
			GetMessage() string
		}
		if errors.As(err, &ye) && ye.GetToken() != nil {
			ps.at(ye.GetToken().Position, "", "invalid YAML: %s", ye.GetMessage())
		} else {
			ps.at(nil, "", "invalid YAML: %v", err)
		}
		return false
	}
	var docs []*ast.DocumentNode
	for _, doc := range af.Docs {
		if doc.Body != nil {
			docs = append(docs, doc)
		}
	}
	if len(docs) != 1 {
		ps.at(nil, "", "want exactly one YAML document (a mapping of schema_version, agents, ...), found %d", len(docs))
		return false
	}
	d := &decoder{ps: ps, anchors: map[string]ast.Node{}}
	ast.Walk(anchors(d.anchors), docs[0].Body)
	if _, ok := d.resolve(docs[0].Body).(*ast.MappingNode); !ok {
		ps.at(tokenPos(docs[0].Body), "", "the file must be a mapping of schema_version, agents, worker, ...; got %s", describe(d.resolve(docs[0].Body)))
		return false
	}
	d.value(docs[0].Body, reflect.ValueOf(c).Elem(), "")
	return true
}

type anchors map[string]ast.Node

func (a anchors) Visit(n ast.Node) ast.Visitor {
	if an, ok := n.(*ast.AnchorNode); ok && an.Name != nil {
		a[an.Name.GetToken().Value] = an.Value
	}
	return a
}

func tokenPos(n ast.Node) *token.Position {
	if n == nil || n.GetToken() == nil {
		return nil
	}
	return n.GetToken().Position
}

// resolve strips anchors, aliases and tags down to the value node.
func (d *decoder) resolve(n ast.Node) ast.Node {
	for range 100 {
		switch x := n.(type) {
		case *ast.AnchorNode:
			n = x.Value
		case *ast.AliasNode:
			if x.Value == nil {
				return nil
			}
			t, ok := d.anchors[x.Value.GetToken().Value]
			if !ok {
				return nil
			}
			n = t
		case *ast.TagNode:
			n = x.Value
		default:
			return n
		}
	}
	return nil
}

func describe(n ast.Node) string {
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
	return strings.ToLower(n.Type().String()) + " " + n.GetToken().Value
}

// want names what a Go value of kind k is written as in YAML.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Pointer:
		return want(t.Elem())
	}
	return "a string"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fail records a decode problem at n and marks path as failed.
func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.ps.at(tokenPos(n), path, format, args...)
	d.ps.failed = append(d.ps.failed, path)
}

// entries returns a mapping's key/value pairs with merge keys expanded
// (keys written in m win, then earlier merged mappings) and every key
// written twice reported (the first is used).
func (d *decoder) entries(m *ast.MappingNode, path string, depth int) []*ast.MappingValueNode {
	own := map[string]bool{}
	var out []*ast.MappingValueNode
	var merged []*ast.MappingValueNode
	for _, mv := range m.Values {
		if _, ok := mv.Key.(*ast.MergeKeyNode); ok {
			var srcs []ast.Node
			switch v := d.resolve(mv.Value).(type) {
			case *ast.MappingNode:
				srcs = []ast.Node{v}
			case *ast.SequenceNode:
				srcs = v.Values
			default:
				d.fail(mv.Key, join(path, "<<"), "a merge key << takes a mapping (usually an alias *name to one) or a list of them, got %s", describe(v))
			}
			for _, s := range srcs {
				sm, ok := d.resolve(s).(*ast.MappingNode)
				if !ok || depth > 32 {
					d.fail(mv.Key, join(path, "<<"), "a merge key << takes mappings; got %s (or merges nest over 32 deep)", describe(d.resolve(s)))
					continue
				}
				merged = append(merged, d.entries(sm, path, depth+1)...)
			}
			continue
		}
		key := mv.Key.GetToken().Value
		if own[key] {
			first := d.ps.pos[join(path, key)]
			d.ps.at(tokenPos(mv.Key), join(path, key), "duplicate key %q (first at line %d, column %d); a key may appear once in a mapping", key, first.Line, first.Column)
			continue
		}
		own[key] = true
		if p := tokenPos(mv.Key); p != nil {
			// A key written in the mapping itself locates the field; a
			// merged one only when nothing else does.
			if _, located := d.ps.pos[join(path, key)]; depth == 0 || !located {
				d.ps.pos[join(path, key)] = *p
			}
		}
		out = append(out, mv)
	}
	for _, mv := range merged {
		key := mv.Key.GetToken().Value
		if !own[key] {
			own[key] = true
			out = append(out, mv)
		}
	}
	return out
}

// value decodes n into v (settable), recording problems under path.
func (d *decoder) value(n ast.Node, v reflect.Value, path string) {
	r := d.resolve(n)
	if r == nil {
		if a, alias := n.(*ast.AliasNode); alias && a.Value != nil {
			d.fail(n, path, "alias *%s names no anchor", a.Value.GetToken().Value)
		}
		return
	}
	if _, null := r.(*ast.NullNode); null {
		return // absent: the zero value, defaults fill it
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.value(r, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		m, ok := r.(*ast.MappingNode)
		if !ok {
			d.fail(r, path, "must be a mapping, got %s", describe(r))
			return
		}
		fields := map[string]int{}
		var names []string
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				fields[name] = i
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, mv := range d.entries(m, path, 0) {
			key := mv.Key.GetToken().Value
			i, ok := fields[key]
			if !ok {
				d.ps.at(tokenPos(mv.Key), join(path, key), "unknown key %q %s; allowed: %s", key, orTop(path), strings.Join(names, ", "))
				continue
			}
			d.value(mv.Value, v.Field(i), join(path, key))
		}
	case reflect.Map:
		m, ok := r.(*ast.MappingNode)
		if !ok {
			d.fail(r, path, "must be a mapping, got %s", describe(r))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for _, mv := range d.entries(m, path, 0) {
			key := mv.Key.GetToken().Value
			elem := reflect.New(v.Type().Elem()).Elem()
			d.value(mv.Value, elem, join(path, key))
			v.SetMapIndex(reflect.ValueOf(key), elem)
		}
	case reflect.Slice:
		s, ok := r.(*ast.SequenceNode)
		if !ok {
			d.fail(r, path, "must be a list, got %s", describe(r))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(s.Values), len(s.Values))
		for i, it := range s.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			if q := tokenPos(it); q != nil {
				d.ps.pos[p] = *q
			}
			d.value(it, out.Index(i), p)
		}
		v.Set(out)
	default:
		switch r.(type) {
		case *ast.MappingNode, *ast.SequenceNode:
			d.fail(r, path, "must be %s, got %s", want(v.Type()), describe(r))
			return
		}
		if err := yaml.NodeToValue(r, v.Addr().Interface()); err != nil {
			d.fail(r, path, "must be %s, got %s", want(v.Type()), describe(r))
		}
	}
}

func orTop(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}
