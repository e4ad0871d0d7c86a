package asl

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Path is a parsed JSONPath of the subset Stratus emits: "$", "$.a.b",
// "$.a['x']", "$.a[\"x\"]", "$.a[0]", and the same rooted at "$$" (the
// context object). No wildcards, filters, slices, recursive descent or
// negative indexes: a path selects at most one node, so every Path here is
// also a Reference Path (ASL spec § Paths).
type Path struct {
	raw     string
	context bool // rooted at $$
	segs    []segment
}

type segment struct {
	key   string
	index int // -1 for a key segment
}

// RootPath is "$".
var RootPath = &Path{raw: "$"}

// ParsePath parses s; the error says where s leaves the supported subset.
func ParsePath(s string) (*Path, error) {
	p, n, err := parsePathPrefix(s)
	if err != nil {
		return nil, err
	}
	if n != len(s) {
		return nil, fmt.Errorf("path %q: unexpected %q at offset %d; supported: $, $.a.b, $.a['x'], $.a[0] and the same from $$", s, s[n:], n)
	}
	return p, nil
}

// parsePathPrefix parses the longest path at the start of s and returns it
// with the number of bytes consumed. It stops before ',', ')', whitespace
// or the end of s, so intrinsic-function arguments can embed paths.
func parsePathPrefix(s string) (*Path, int, error) {
	bad := func(at int, why string) (*Path, int, error) {
		return nil, 0, fmt.Errorf("path %q: %s at offset %d; supported: $, $.a.b, $.a['x'], $.a[0] and the same from $$", s, why, at)
	}
	if !strings.HasPrefix(s, "$") {
		return bad(0, "must start with $")
	}
	p := &Path{}
	i := 1
	if strings.HasPrefix(s, "$$") {
		p.context = true
		i = 2
	}
loop:
	for i < len(s) {
		switch s[i] {
		case '.':
			j := i + 1
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			if j == i+1 {
				if j < len(s) && (s[j] == '.' || s[j] == '*') {
					return bad(i, "recursive descent and wildcards are not supported")
				}
				return bad(i, "empty name after '.'")
			}
			p.segs = append(p.segs, segment{key: s[i+1 : j], index: -1})
			i = j
		case '[':
			if i+1 >= len(s) {
				return bad(i, "unterminated '['")
			}
			switch q := s[i+1]; {
			case q == '\'' || q == '"':
				var b strings.Builder
				j := i + 2
				closed := false
				for j < len(s) {
					c := s[j]
					if c == '\\' && j+1 < len(s) {
						b.WriteByte(s[j+1])
						j += 2
						continue
					}
					if c == q {
						closed = true
						j++
						break
					}
					b.WriteByte(c)
					j++
				}
				if !closed || j >= len(s) || s[j] != ']' {
					return bad(i, "unterminated quoted name")
				}
				p.segs = append(p.segs, segment{key: b.String(), index: -1})
				i = j + 1
			case q >= '0' && q <= '9':
				j := i + 1
				for j < len(s) && s[j] >= '0' && s[j] <= '9' {
					j++
				}
				if j >= len(s) || s[j] != ']' {
					return bad(i, "only a single non-negative index is supported inside [ ]")
				}
				n, err := strconv.Atoi(s[i+1 : j])
				if err != nil {
					return bad(i, "index out of range")
				}
				p.segs = append(p.segs, segment{index: n})
				i = j + 1
			default:
				return bad(i, "only ['name'], [\"name\"] or [index] is supported inside [ ]")
			}
		case ',', ')', ' ', '\t', '\n', '\r':
			break loop
		default:
			return bad(i, fmt.Sprintf("unexpected %q", s[i]))
		}
	}
	p.raw = s[:i]
	return p, i, nil
}

// isNameByte reports whether c may appear in a dot-notation name. Names
// with other characters need bracket notation.
func isNameByte(c byte) bool {
	switch c {
	case '.', '[', ']', '(', ')', ',', '\'', '"', '$', '*', '@', '?', ' ', '\t', '\n', '\r', '\\':
		return false
	}
	return c >= 0x20
}

// String returns the path as written.
func (p *Path) String() string { return p.raw }

// IsContext reports whether the path is rooted at the context object ($$).
func (p *Path) IsContext() bool { return p.context }

// IsRoot reports whether the path is "$" (or "$$").
func (p *Path) IsRoot() bool { return len(p.segs) == 0 }

// normalized renders the path the way Step Functions quotes it in errors:
// $['a']['b'][0].
func (p *Path) normalized() string {
	var b strings.Builder
	if p.context {
		b.WriteString("$$")
	} else {
		b.WriteString("$")
	}
	for _, s := range p.segs {
		if s.index >= 0 {
			fmt.Fprintf(&b, "[%d]", s.index)
		} else {
			fmt.Fprintf(&b, "['%s']", s.key)
		}
	}
	return b.String()
}

// Get returns the node p selects from input (or from the context object
// when p starts with $$) and whether it exists. A JSON null that is
// present is found; a key missing, an index out of range or a step into a
// scalar is not.
func (p *Path) Get(input Value, ctx *Context) (Value, bool) {
	v := input
	if p.context {
		if ctx == nil {
			return nil, false
		}
		v = ctx.Value()
	}
	for _, s := range p.segs {
		if s.index >= 0 {
			arr, ok := v.([]Value)
			if !ok || s.index >= len(arr) {
				return nil, false
			}
			v = arr[s.index]
			continue
		}
		obj, ok := v.(*Object)
		if !ok {
			return nil, false
		}
		if v, ok = obj.Get(s.key); !ok {
			return nil, false
		}
	}
	return v, true
}

// Set returns a copy of root with the node p names replaced by v, creating
// missing objects along the way (ASL spec § ResultPath: "$" replaces the
// whole input). It fails when a step meets a scalar, a missing array
// element, or a non-array under an index: States.ResultPathMatchFailure.
// root is not modified.
func (p *Path) Set(root, v Value) (Value, bool) {
	return setIn(root, p.segs, v)
}

func setIn(node Value, segs []segment, v Value) (Value, bool) {
	if len(segs) == 0 {
		return v, true
	}
	s := segs[0]
	if s.index >= 0 {
		arr, ok := node.([]Value)
		if !ok || s.index >= len(arr) {
			return nil, false
		}
		child, ok := setIn(arr[s.index], segs[1:], v)
		if !ok {
			return nil, false
		}
		n := make([]Value, len(arr))
		copy(n, arr)
		n[s.index] = child
		return n, true
	}
	obj, ok := node.(*Object)
	if !ok {
		return nil, false
	}
	cur, present := obj.Get(s.key)
	if !present && len(segs) > 1 {
		if segs[1].index >= 0 {
			return nil, false // cannot create an array element
		}
		cur = &Object{}
	}
	child, ok := setIn(cur, segs[1:], v)
	if !ok {
		return nil, false
	}
	return obj.With(s.key, child), true
}

// Context is the context object ($$) of one state visit (ASL spec
// § Context Object). Its JSON form is built on first use, so states that
// never read $$ pay nothing for it.
type Context struct {
	ExecutionID        string    // execution ARN
	ExecutionName      string    // execution name
	ExecutionInput     Value     // the execution's input
	ExecutionStartTime time.Time // when the execution started
	StateName          string
	StateEnteredTime   time.Time
	StateRetryCount    int
	StateMachineID     string // state machine ARN
	StateMachineName   string
	TaskToken          string // set only inside a .waitForTaskToken Task

	built Value
}

// TimeFormat is how Step Functions renders timestamps in the context
// object: UTC, milliseconds, "Z".
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Value returns the context object as JSON.
func (c *Context) Value() Value {
	if c.built != nil {
		return c.built
	}
	exec := NewObject(
		Member{"Id", c.ExecutionID},
		Member{"Input", c.ExecutionInput},
		Member{"Name", c.ExecutionName},
		Member{"StartTime", c.ExecutionStartTime.UTC().Format(TimeFormat)},
	)
	state := NewObject(
		Member{"EnteredTime", c.StateEnteredTime.UTC().Format(TimeFormat)},
		Member{"Name", c.StateName},
		Member{"RetryCount", numberOf(c.StateRetryCount)},
	)
	sm := NewObject(Member{"Id", c.StateMachineID}, Member{"Name", c.StateMachineName})
	members := []Member{{"Execution", exec}, {"State", state}, {"StateMachine", sm}}
	if c.TaskToken != "" {
		members = append(members, Member{"Task", NewObject(Member{"Token", c.TaskToken})})
	}
	c.built = NewObject(members...)
	return c.built
}

// contextFields are the context-object paths the embedded executor
// provides: a $$ path must start with one of them.
var contextFields = []string{
	"Execution.Id", "Execution.Input", "Execution.Name", "Execution.StartTime",
	"State.Name", "State.EnteredTime", "State.RetryCount",
	"StateMachine.Id", "StateMachine.Name",
	"Task.Token",
}

// checkContextPath reports whether a $$ path names a provided field.
func checkContextPath(p *Path) error {
	if !p.context {
		return nil
	}
	if len(p.segs) >= 2 && p.segs[0].index < 0 && p.segs[1].index < 0 {
		name := p.segs[0].key + "." + p.segs[1].key
		for _, f := range contextFields {
			if f == name {
				return nil
			}
		}
	}
	return fmt.Errorf("context path %q is not supported; supported: $$.%s", p.raw, strings.Join(contextFields, ", $$."))
}
