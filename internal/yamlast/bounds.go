package yamlast

import (
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
)

// Limits bound what a YAML input may hold before any parser builds it: a
// document nested 100,000 deep made goccy/go-yaml's parser spend 15 GB before
// its own "exceeded max depth", and an alias bomb (each anchor a list of
// aliases of the one before) expands to far more nodes than its text holds.
type Limits struct {
	// MaxDepth is the deepest nesting of collections (block and flow
	// mappings and sequences) allowed.
	MaxDepth int
	// MaxNodes bounds the nodes of the text (entries and flow items) and,
	// separately, of the document with every alias expanded.
	MaxNodes int
}

// DefaultLimits hold every flow, config, task front matter and role file
// a person writes (worc's deepest flow nests 6 levels) with room to spare.
var DefaultLimits = Limits{MaxDepth: 64, MaxNodes: 100_000}

// Bounds scans data, without parsing it, for nesting deeper than
// lim.MaxDepth and more than lim.MaxNodes entries; time and memory are
// linear in len(data) and constant in its nesting. The scan is the
// YAML the parsers read, approximated: quoted scalars, comments and block
// scalars are skipped, block levels are counted by indentation, flow
// levels by brackets. It returns the first limit exceeded, at its line
// and column, or nil.
func Bounds(data []byte, lim Limits) *Problem {
	s := scanner{lim: lim, line: 1}
	return s.scan(data)
}

type scanner struct {
	lim   Limits
	line  int
	nodes int
	// block holds the indentation of each open block collection.
	block []int
	flow  int // open flow collections
	// quote is the open quoted scalar ('\'' or '"'), 0 = none.
	quote byte
	// scalarIndent >= 0: inside a block scalar whose parent line is
	// indented this much; -1 = not.
	scalarIndent int
}

func (s *scanner) scan(data []byte) *Problem {
	s.scalarIndent = -1
	for len(data) > 0 {
		i := 0
		for i < len(data) && data[i] != '\n' {
			i++
		}
		if p := s.scanLine(data[:i]); p != nil {
			return p
		}
		if i < len(data) {
			i++
		}
		data = data[i:]
		s.line++
	}
	return nil
}

func (s *scanner) over(col int, what string, n, max int) *Problem {
	return &Problem{Pos: Pos{s.line, col}, Message: fmt.Sprintf("%s %d is over the limit of %d", what, n, max), Failed: true}
}

func (s *scanner) depth(inline int) int { return len(s.block) + inline + s.flow }

func (s *scanner) scanLine(l []byte) *Problem {
	if len(l) > 0 && l[len(l)-1] == '\r' {
		l = l[:len(l)-1]
	}
	indent := 0
	for indent < len(l) && l[indent] == ' ' {
		indent++
	}
	blank := indent == len(l)
	if s.scalarIndent >= 0 {
		if blank || indent > s.scalarIndent {
			return nil // block scalar content
		}
		s.scalarIndent = -1
	}
	if blank {
		return nil
	}
	i := indent
	if s.quote == 0 && s.flow == 0 {
		if l[i] == '#' {
			return nil
		}
		if isMarker(l, i, "---") || isMarker(l, i, "...") {
			s.block = s.block[:0]
			return nil
		}
		for len(s.block) > 0 && s.block[len(s.block)-1] > indent {
			s.block = s.block[:len(s.block)-1]
		}
		if startsEntry(l[i:]) && (len(s.block) == 0 || s.block[len(s.block)-1] < indent) {
			s.block = append(s.block, indent)
		}
	}
	inline := 0 // "- - x", "? x", "- a: …" open levels on this line
	tokenStart := true
	for ; i < len(l); i++ {
		c := l[i]
		if s.quote != 0 {
			switch {
			case s.quote == '"' && c == '\\':
				i++
			case c == s.quote:
				if s.quote == '\'' && i+1 < len(l) && l[i+1] == '\'' {
					i++
					continue
				}
				s.quote = 0
				tokenStart = false
			}
			continue
		}
		switch {
		case c == ' ' || c == '\t':
			tokenStart = true
			continue
		case c == '#' && tokenStart:
			i = len(l)
			continue
		case (c == '\'' || c == '"') && tokenStart:
			s.quote = c
			s.nodes++
		case (c == '-' || c == '?') && tokenStart && s.flow == 0 && (i+1 == len(l) || l[i+1] == ' '):
			inline++
			s.nodes++
		case c == '[' || c == '{':
			s.flow++
			s.nodes++
		case c == ']' || c == '}':
			if s.flow > 0 {
				s.flow--
			}
		case c == ',' && s.flow > 0:
			s.nodes++
		case c == ':' && (i+1 == len(l) || l[i+1] == ' ' || (s.flow > 0 && (l[i+1] == ',' || l[i+1] == ']' || l[i+1] == '}'))):
			s.nodes++
			if s.flow == 0 {
				inline++ // "- a: b": the mapping is one level below the item
			}
		case (c == '|' || c == '>') && tokenStart && s.flow == 0 && blockScalarHeader(l[i+1:]):
			s.scalarIndent = indent
			i = len(l)
			continue
		}
		tokenStart = c == '[' || c == '{' || c == ','
		if d := s.depth(inline) - 1; d > s.lim.MaxDepth {
			return s.over(i+1, "nesting depth", d, s.lim.MaxDepth)
		}
		if s.nodes > s.lim.MaxNodes {
			return s.over(i+1, "node count", s.nodes, s.lim.MaxNodes)
		}
	}
	return nil
}

// startsEntry reports whether a line's content (from its indentation)
// opens a block collection entry: "- ", "? " or a "key:" outside quotes.
func startsEntry(l []byte) bool {
	if len(l) > 0 && (l[0] == '-' || l[0] == '?') && (len(l) == 1 || l[1] == ' ') {
		return true
	}
	var q byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case (c == '"' || c == '\'') && i == 0:
			q = c
		case c == '#' && i > 0 && l[i-1] == ' ':
			return false
		case c == ':' && (i+1 == len(l) || l[i+1] == ' '):
			return true
		case c == '[' || c == '{':
			return false
		}
	}
	return false
}

// blockScalarHeader reports whether rest (after '|' or '>') is a block
// scalar header: chomping and indentation indicators, then spaces and an
// optional comment.
func blockScalarHeader(rest []byte) bool {
	i := 0
	for i < len(rest) && (rest[i] == '-' || rest[i] == '+' || (rest[i] >= '1' && rest[i] <= '9')) {
		i++
	}
	for i < len(rest) && rest[i] == ' ' {
		i++
	}
	return i == len(rest) || rest[i] == '#'
}

func isMarker(l []byte, i int, m string) bool {
	return i == 0 && len(l) >= 3 && string(l[:3]) == m && (len(l) == 3 || l[3] == ' ')
}

// Expanded reports a document whose alias expansion holds more than
// lim.MaxNodes nodes (an alias bomb): each alias counts as the nodes of
// the value it names (an alias inside its own anchor as one node: Entries
// reports it). Linear in the document's nodes.
func Expanded(body ast.Node, lim Limits) *Problem {
	p, _ := expanded(body, lim)
	return p
}

// expanded is Expanded, and the problem of an alias inside its own anchor
// (nil when there is none).
func expanded(body ast.Node, lim Limits) (*Problem, *Problem) {
	if body == nil {
		return nil, nil
	}
	anchors := map[string]ast.Node{}
	ast.Walk(anchorCollector(anchors), body)
	c := &expansion{anchors: anchors, size: map[ast.Node]int{}, active: map[ast.Node]bool{}, max: lim.MaxNodes}
	if n := c.count(body); n > lim.MaxNodes {
		return &Problem{Pos: c.at, Message: fmt.Sprintf("the document expands its aliases to more than %d nodes (the limit)", lim.MaxNodes), Failed: true}, c.cycle
	}
	return nil, c.cycle
}

type expansion struct {
	anchors map[string]ast.Node
	size    map[ast.Node]int
	active  map[ast.Node]bool
	max     int
	at      Pos
	cycle   *Problem // an alias inside its own anchor
}

// count is the nodes of n with its aliases expanded, saturating past max.
func (c *expansion) count(n ast.Node) int {
	if n == nil {
		return 0
	}
	if v, ok := c.size[n]; ok {
		return v
	}
	if c.active[n] {
		if c.cycle == nil {
			c.cycle = &Problem{Pos: PosOf(n), Message: "an alias refers to the anchor it sits in", Failed: true}
		}
		return 1
	}
	c.active[n] = true
	total := 1
	add := func(k int) {
		total += k
		if total > c.max && c.at == (Pos{}) {
			c.at = PosOf(n)
		}
		if total > c.max+1 {
			total = c.max + 1
		}
	}
	switch x := n.(type) {
	case *ast.AliasNode:
		if x.Value != nil {
			if t, ok := c.anchors[x.Value.GetToken().Value]; ok {
				add(c.count(t) - 1)
			}
		}
	case *ast.AnchorNode:
		add(c.count(x.Value) - 1)
	case *ast.TagNode:
		add(c.count(x.Value) - 1)
	case *ast.MappingNode:
		for _, v := range x.Values {
			add(c.count(v))
		}
	case *ast.MappingValueNode:
		add(c.count(x.Key))
		add(c.count(x.Value))
	case *ast.SequenceNode:
		for _, v := range x.Values {
			add(c.count(v))
		}
	case *ast.DocumentNode:
		add(c.count(x.Body))
	}
	delete(c.active, n)
	c.size[n] = total
	return total
}

// Unmarshal decodes data into v with goccy/go-yaml (opts as
// yaml.UnmarshalWithOptions), after Bounds and Expanded with DefaultLimits:
// the error of an input over a limit is "line L, column C: nesting depth N
// is over the limit of 64" (or node count, or alias expansion).
func Unmarshal(data []byte, v any, opts ...yaml.DecodeOption) error {
	if err := Check(data, DefaultLimits); err != nil {
		return err
	}
	return yaml.UnmarshalWithOptions(data, v, opts...)
}

// Check runs Bounds and, on each parsed document, Expanded; an input
// over a limit is an *Error. Invalid YAML is left to the decoder that
// follows.
func Check(data []byte, lim Limits) error {
	if p := Bounds(data, lim); p != nil {
		return &Error{*p}
	}
	docs, perr := parse(data)
	if perr != nil {
		return nil
	}
	for _, d := range docs {
		if p, cycle := expanded(d, lim); p != nil {
			return &Error{*p}
		} else if cycle != nil {
			return &Error{*cycle}
		}
	}
	return nil
}

// Error is a YAML input over a limit, at its position.
type Error struct{ Problem }

func (e *Error) Error() string {
	if e.Pos == (Pos{}) {
		return e.Message
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Pos.Line, e.Pos.Col, e.Message)
}
