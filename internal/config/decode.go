package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// problem is one finding in config.yaml, located where goccy/go-yaml puts
// the key at fault (line 0: no position, e.g. a defaulted value).
type problem struct {
	line, col int
	field     string // dotted path: agents.providers.echo.command, checks.command_sets.go.commands[0].argv
	msg       string
}

// problems collects every finding of one config file, so that one error
// lists them all, one per line, sorted by position (config errors used to
// come one per run).
type problems struct {
	file string
	pos  map[string]yamlast.Pos // field path → its key's position
	list []problem
	// failed are the paths whose value did not decode: a semantic check at
	// or under one of them would only restate the problem.
	failed []string
}

// at records a problem at an explicit position (the zero Pos: none).
func (ps *problems) at(p yamlast.Pos, field, format string, args ...any) {
	ps.list = append(ps.list, problem{line: p.Line, col: p.Col, field: field, msg: fmt.Sprintf(format, args...)})
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
	var p yamlast.Pos
	for path := field; path != ""; path = parent(path) {
		if q, ok := ps.pos[path]; ok {
			p = q
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
	ps  *problems
	doc *yamlast.Doc // anchors of the document, for aliases
}

// decode parses data into c. It reports false when the file is not one
// YAML mapping at all (nothing else is then worth checking).
func decode(ps *problems, data []byte, c *Config) bool {
	docs, perr := yamlast.Parse(data)
	if perr != nil {
		ps.at(perr.Pos, "", "%s", perr.Message)
		return false
	}
	if len(docs) != 1 {
		ps.at(yamlast.Pos{}, "", "want exactly one YAML document (a mapping of schema_version, agents, ...), found %d", len(docs))
		return false
	}
	d := &decoder{ps: ps, doc: yamlast.NewDoc(docs[0])}
	r := d.resolve(docs[0], "")
	if _, ok := r.(*ast.MappingNode); !ok {
		ps.at(yamlast.TokenPos(docs[0]), "", "the file must be a mapping of schema_version, agents, worker, ...; got %s", yamlast.Describe(r))
		return false
	}
	d.value(docs[0], reflect.ValueOf(c).Elem(), "")
	return true
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

// report records a problem found by yamlast; a Failed one marks its path
// as failed.
func (d *decoder) report(p yamlast.Problem) {
	d.ps.at(p.Pos, p.Path, "%s", p.Message)
	if p.Failed {
		d.ps.failed = append(d.ps.failed, p.Path)
	}
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
	case reflect.Float64:
		return "a number"
	case reflect.Pointer:
		return want(t.Elem())
	}
	return "a string"
}

// fail records a decode problem at n and marks path as failed.
func (d *decoder) fail(n ast.Node, path, format string, args ...any) {
	d.ps.at(yamlast.TokenPos(n), path, format, args...)
	d.ps.failed = append(d.ps.failed, path)
}

// entries returns a mapping's key/value pairs with merge keys expanded and
// every key written twice reported (yamlast.Doc.Entries), and locates each
// key's field path: at the key written in the mapping, or else at the
// merged key that won.
func (d *decoder) entries(m *ast.MappingNode, path string) []*ast.MappingValueNode {
	out, probs := d.doc.Entries(m, path)
	for _, p := range probs {
		d.report(p)
	}
	for _, mv := range out {
		if p := yamlast.TokenPos(mv.Key); p.Line > 0 {
			d.ps.pos[yamlast.Join(path, mv.Key.GetToken().Value)] = p
		}
	}
	return out
}

// value decodes n into v (settable), recording problems under path.
func (d *decoder) value(n ast.Node, v reflect.Value, path string) {
	r := d.resolve(n, path)
	if r == nil {
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
			d.fail(r, path, "must be a mapping, got %s", yamlast.Describe(r))
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
		for _, mv := range d.entries(m, path) {
			key := mv.Key.GetToken().Value
			i, ok := fields[key]
			if !ok {
				d.ps.at(yamlast.TokenPos(mv.Key), yamlast.Join(path, key), "unknown key %q %s; allowed: %s", key, orTop(path), strings.Join(names, ", "))
				continue
			}
			d.value(mv.Value, v.Field(i), yamlast.Join(path, key))
		}
	case reflect.Map:
		m, ok := r.(*ast.MappingNode)
		if !ok {
			d.fail(r, path, "must be a mapping, got %s", yamlast.Describe(r))
			return
		}
		if v.IsNil() {
			v.Set(reflect.MakeMap(v.Type()))
		}
		for _, mv := range d.entries(m, path) {
			key := mv.Key.GetToken().Value
			elem := reflect.New(v.Type().Elem()).Elem()
			d.value(mv.Value, elem, yamlast.Join(path, key))
			v.SetMapIndex(reflect.ValueOf(key), elem)
		}
	case reflect.Slice:
		s, ok := r.(*ast.SequenceNode)
		if !ok {
			d.fail(r, path, "must be a list, got %s", yamlast.Describe(r))
			return
		}
		out := reflect.MakeSlice(v.Type(), len(s.Values), len(s.Values))
		for i, it := range s.Values {
			p := fmt.Sprintf("%s[%d]", path, i)
			if q := yamlast.TokenPos(it); q.Line > 0 {
				d.ps.pos[p] = q
			}
			d.value(it, out.Index(i), p)
		}
		v.Set(out)
	default:
		switch r.(type) {
		case *ast.MappingNode, *ast.SequenceNode:
			d.fail(r, path, "must be %s, got %s", want(v.Type()), yamlast.Describe(r))
			return
		}
		// goccy/go-yaml truncates a number into an integer field (2.5 → 2):
		// an integer setting written as a fraction is refused instead.
		if _, frac := r.(*ast.FloatNode); frac && (v.Kind() == reflect.Int || v.Kind() == reflect.Int64) {
			d.fail(r, path, "must be %s, got %s", want(v.Type()), yamlast.Describe(r))
			return
		}
		if err := yaml.NodeToValue(r, v.Addr().Interface()); err != nil {
			d.fail(r, path, "must be %s, got %s", want(v.Type()), yamlast.Describe(r))
		}
	}
}

func orTop(path string) string {
	if path == "" {
		return "at the top level"
	}
	return "in " + path
}
