package asl

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// Intrinsic is a parsed intrinsic-function call (ASL spec § Intrinsic
// Functions). Supported: States.Format, States.StringToJson,
// States.JsonToString, States.Array, States.MathAdd. Arguments are string
// literals in single quotes (escapes \' \{ \} \\), JSON numbers, true,
// false, null, paths ($ or $$) and nested calls, at most 10 deep.
type Intrinsic struct {
	raw  string
	name string
	args []intrinsicArg
	// pieces of a States.Format template given as a literal; nil otherwise.
	pieces []formatPiece
}

type argKind int

const (
	argLiteral argKind = iota
	argPath
	argCall
)

type intrinsicArg struct {
	kind   argKind
	lit    Value
	pieces []formatPiece // for a string literal: its text split at {}
	badFmt string        // for a string literal: why it is not a valid Format template
	path   *Path
	call   *Intrinsic
}

// formatPiece is literal text, or a {} placeholder when hole is true.
type formatPiece struct {
	text string
	hole bool
}

// maxIntrinsicDepth is the nesting AWS allows ("You can nest up to 10
// intrinsic functions within a field").
const maxIntrinsicDepth = 10

type intrinsicSpec struct {
	minArgs, maxArgs int // maxArgs -1: unbounded
}

var intrinsics = map[string]intrinsicSpec{
	"States.Format":       {1, -1},
	"States.StringToJson": {1, 1},
	"States.JsonToString": {1, 1},
	"States.Array":        {0, -1},
	"States.MathAdd":      {2, 2},
}

const supportedIntrinsics = "States.Format, States.StringToJson, States.JsonToString, States.Array, States.MathAdd"

// IsIntrinsic reports whether a ".$" value is an intrinsic call rather than
// a path.
func IsIntrinsic(s string) bool { return strings.HasPrefix(s, "States.") }

// ParseIntrinsic parses one call and checks names, arity and argument kinds.
func ParseIntrinsic(s string) (*Intrinsic, error) {
	p := &intrinsicParser{s: s}
	call, err := p.call(1)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i != len(s) {
		return nil, p.errf("unexpected %q after the call", s[p.i:])
	}
	return call, nil
}

type intrinsicParser struct {
	s string
	i int
}

func (p *intrinsicParser) errf(format string, args ...any) error {
	return fmt.Errorf("intrinsic %q: %s (at offset %d)", p.s, fmt.Sprintf(format, args...), p.i)
}

func (p *intrinsicParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *intrinsicParser) call(depth int) (*Intrinsic, error) {
	if depth > maxIntrinsicDepth {
		return nil, p.errf("more than %d nested intrinsic functions", maxIntrinsicDepth)
	}
	start := p.i
	j := p.i
	for j < len(p.s) && (isIdentByte(p.s[j]) || p.s[j] == '.') {
		j++
	}
	name := p.s[p.i:j]
	spec, ok := intrinsics[name]
	if !ok {
		return nil, p.errf("function %q is not supported; supported: %s", name, supportedIntrinsics)
	}
	p.i = j
	p.skipSpace()
	if p.i >= len(p.s) || p.s[p.i] != '(' {
		return nil, p.errf("expected '(' after %s", name)
	}
	p.i++
	in := &Intrinsic{name: name}
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ')' {
		p.i++
	} else {
		for {
			p.skipSpace()
			a, err := p.arg(depth)
			if err != nil {
				return nil, err
			}
			in.args = append(in.args, a)
			p.skipSpace()
			if p.i >= len(p.s) {
				return nil, p.errf("missing ')'")
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] == ')' {
				p.i++
				break
			}
			return nil, p.errf("expected ',' or ')', got %q", p.s[p.i])
		}
	}
	in.raw = p.s[start:p.i]
	if n := len(in.args); n < spec.minArgs || (spec.maxArgs >= 0 && n > spec.maxArgs) {
		want := fmt.Sprintf("%d", spec.minArgs)
		switch {
		case spec.maxArgs < 0:
			want = fmt.Sprintf("at least %d", spec.minArgs)
		case spec.maxArgs != spec.minArgs:
			want = fmt.Sprintf("%d to %d", spec.minArgs, spec.maxArgs)
		}
		return nil, p.errf("%s takes %s argument(s), got %d", name, want, n)
	}
	switch name {
	case "States.JsonToString":
		if in.args[0].kind != argPath {
			return nil, p.errf("States.JsonToString takes a path argument")
		}
	case "States.Format":
		first := in.args[0]
		switch first.kind {
		case argLiteral:
			if _, ok := first.lit.(string); !ok {
				return nil, p.errf("the first argument of States.Format must be a string")
			}
			if first.badFmt != "" {
				return nil, p.errf("States.Format template: %s", first.badFmt)
			}
			holes := 0
			for _, pc := range first.pieces {
				if pc.hole {
					holes++
				}
			}
			if holes != len(in.args)-1 {
				return nil, p.errf("States.Format template has %d {} placeholder(s) but %d value argument(s)", holes, len(in.args)-1)
			}
			in.pieces = first.pieces
		case argCall:
			return nil, p.errf("the first argument of States.Format must be a string literal or a path")
		}
	}
	return in, nil
}

func isIdentByte(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

func (p *intrinsicParser) arg(depth int) (intrinsicArg, error) {
	if p.i >= len(p.s) {
		return intrinsicArg{}, p.errf("missing argument")
	}
	rest := p.s[p.i:]
	switch c := rest[0]; {
	case c == '\'':
		return p.stringLiteral()
	case c == '$':
		path, n, err := parsePathPrefix(rest)
		if err != nil {
			return intrinsicArg{}, p.errf("%v", err)
		}
		if err := checkContextPath(path); err != nil {
			return intrinsicArg{}, p.errf("%v", err)
		}
		p.i += n
		return intrinsicArg{kind: argPath, path: path}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		j := 0
		for j < len(rest) && strings.IndexByte("+-0123456789.eE", rest[j]) >= 0 {
			j++
		}
		num := rest[:j]
		if !json.Valid([]byte(num)) {
			return intrinsicArg{}, p.errf("%q is not a JSON number", num)
		}
		p.i += j
		return intrinsicArg{kind: argLiteral, lit: json.Number(num)}, nil
	case strings.HasPrefix(rest, "States."):
		call, err := p.call(depth + 1)
		if err != nil {
			return intrinsicArg{}, err
		}
		return intrinsicArg{kind: argCall, call: call}, nil
	default:
		for _, kw := range []struct {
			word string
			v    Value
		}{{"true", true}, {"false", false}, {"null", nil}} {
			if strings.HasPrefix(rest, kw.word) && (len(rest) == len(kw.word) || !isIdentByte(rest[len(kw.word)])) {
				p.i += len(kw.word)
				return intrinsicArg{kind: argLiteral, lit: kw.v}, nil
			}
		}
		return intrinsicArg{}, p.errf("unexpected %q; an argument is a 'string', a number, true, false, null, a path or an intrinsic call", c)
	}
}

// stringLiteral scans '...' at p.i. \' \{ \} \\ stand for the character;
// an unescaped {} is a States.Format placeholder.
func (p *intrinsicParser) stringLiteral() (intrinsicArg, error) {
	var (
		text   strings.Builder // the decoded string
		piece  strings.Builder // text since the last placeholder
		pieces []formatPiece
		badFmt string
	)
	j := p.i + 1
	for {
		if j >= len(p.s) {
			return intrinsicArg{}, p.errf("unterminated string literal")
		}
		c := p.s[j]
		switch c {
		case '\'':
			pieces = append(pieces, formatPiece{text: piece.String()})
			p.i = j + 1
			return intrinsicArg{kind: argLiteral, lit: text.String(), pieces: pieces, badFmt: badFmt}, nil
		case '\\':
			if j+1 >= len(p.s) {
				return intrinsicArg{}, p.errf("unterminated string literal")
			}
			e := p.s[j+1]
			if e != '\'' && e != '{' && e != '}' && e != '\\' {
				return intrinsicArg{}, p.errf("unsupported escape \\%c in a string literal; supported: \\' \\{ \\} \\\\", e)
			}
			text.WriteByte(e)
			piece.WriteByte(e)
			j += 2
		case '{':
			if j+1 < len(p.s) && p.s[j+1] == '}' {
				text.WriteString("{}")
				pieces = append(pieces, formatPiece{text: piece.String()}, formatPiece{hole: true})
				piece.Reset()
				j += 2
				continue
			}
			if badFmt == "" {
				badFmt = "an unescaped '{' must be part of {} (write \\{ for the character)"
			}
			text.WriteByte(c)
			piece.WriteByte(c)
			j++
		case '}':
			if badFmt == "" {
				badFmt = "an unescaped '}' must be part of {} (write \\} for the character)"
			}
			text.WriteByte(c)
			piece.WriteByte(c)
			j++
		default:
			text.WriteByte(c)
			piece.WriteByte(c)
			j++
		}
	}
}

// String returns the call as written.
func (in *Intrinsic) String() string { return in.raw }

// Eval evaluates the call against input and the context object. A path
// argument that selects nothing fails with States.Runtime; a function
// given values it cannot work with fails with States.IntrinsicFailure.
func (in *Intrinsic) Eval(input Value, ctx *Context) (Value, *Failure) {
	args := make([]Value, len(in.args))
	for i, a := range in.args {
		switch a.kind {
		case argLiteral:
			args[i] = a.lit
		case argPath:
			v, ok := a.path.Get(input, ctx)
			if !ok {
				return nil, failf(ErrRuntime, "The JsonPath argument %s of %s could not be found in the input %s", a.path, in.name, EncodeString(input))
			}
			args[i] = v
		case argCall:
			v, f := a.call.Eval(input, ctx)
			if f != nil {
				return nil, f
			}
			args[i] = v
		}
	}
	switch in.name {
	case "States.Array":
		return args, nil
	case "States.JsonToString":
		return EncodeString(args[0]), nil
	case "States.StringToJson":
		s, ok := args[0].(string)
		if !ok {
			return nil, failf(ErrIntrinsicFailure, "%s: the argument is %s; expected a string", in.raw, describe(args[0]))
		}
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		v, err := Decode([]byte(s))
		if err != nil {
			return nil, failf(ErrIntrinsicFailure, "%s: the argument is not JSON text: %v", in.raw, err)
		}
		return v, nil
	case "States.MathAdd":
		sum := new(big.Int)
		for i, a := range args {
			n, ok := a.(json.Number)
			if !ok {
				return nil, failf(ErrIntrinsicFailure, "%s: argument %d is %s; expected a number", in.raw, i+1, describe(a))
			}
			r, ok := toRat(n)
			if !ok {
				return nil, failf(ErrIntrinsicFailure, "%s: argument %d (%s) is out of range", in.raw, i+1, n)
			}
			if r.IsInt() {
				sum.Add(sum, r.Num())
			} else {
				// "If you specify a non-integer value ... Step Functions
				// will round it off to the nearest integer."
				sum.Add(sum, roundHalfUp(r))
			}
		}
		return json.Number(sum.String()), nil
	case "States.Format":
		pieces := in.pieces
		if pieces == nil {
			tmpl, ok := args[0].(string)
			if !ok {
				return nil, failf(ErrIntrinsicFailure, "%s: the template is %s; expected a string", in.raw, describe(args[0]))
			}
			parts := strings.Split(tmpl, "{}")
			for i, t := range parts {
				if i > 0 {
					pieces = append(pieces, formatPiece{hole: true})
				}
				pieces = append(pieces, formatPiece{text: t})
			}
			if holes := len(parts) - 1; holes != len(args)-1 {
				return nil, failf(ErrIntrinsicFailure, "%s: the template has %d {} placeholder(s) but %d value argument(s)", in.raw, holes, len(args)-1)
			}
		}
		var b strings.Builder
		next := 1
		for _, pc := range pieces {
			if !pc.hole {
				b.WriteString(pc.text)
				continue
			}
			formatArg(&b, args[next])
			next++
		}
		return b.String(), nil
	}
	return nil, failf(ErrRuntime, "intrinsic %s is not supported", in.name)
}

// formatArg renders one States.Format value: strings as they are, other
// scalars as JSON, arrays and objects the way Java's toString renders
// them ("[1, 2]", "{a=1, b=x}"), as Step Functions does.
func formatArg(b *strings.Builder, v Value) {
	switch t := v.(type) {
	case string:
		b.WriteString(t)
	case []Value:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			formatArg(b, e)
		}
		b.WriteByte(']')
	case *Object:
		b.WriteByte('{')
		for i, m := range t.Members() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(m.Key)
			b.WriteByte('=')
			formatArg(b, m.Value)
		}
		b.WriteByte('}')
	default:
		b.Write(Encode(t))
	}
}

// describe names a value's JSON type for error messages.
func describe(v Value) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("the boolean %v", t)
	case json.Number:
		return "the number " + string(t)
	case string:
		return fmt.Sprintf("the string %q", t)
	case []Value:
		return "an array"
	case *Object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
