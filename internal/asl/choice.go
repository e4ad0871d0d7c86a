package asl

import (
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// ChoiceRule is one compiled Choice Rule (ASL spec § Choice Rules): a
// boolean expression (And, Or, Not) or a data-test expression (Variable
// plus one comparison operator). Top-level rules carry Next.
type ChoiceRule struct {
	Next string

	and, or []*ChoiceRule
	not     *ChoiceRule

	variable    *Path
	op          string
	kind        opKind
	cmp         string // Equals, LessThan, GreaterThan, LessThanEquals, GreaterThanEquals, Matches
	operand     Value
	operandPath *Path
}

type opKind int

const (
	opString opKind = iota + 1
	opNumeric
	opBoolean
	opType
)

type choiceOp struct {
	kind opKind
	cmp  string // for opType: the type tested
	path bool   // the operand is a path to compare against
}

// choiceOps are the comparison operators the embedded executor supports.
// Timestamp comparisons and IsTimestamp are not among them.
var choiceOps = map[string]choiceOp{}

func init() {
	for _, cmp := range []string{"Equals", "LessThan", "GreaterThan", "LessThanEquals", "GreaterThanEquals"} {
		choiceOps["String"+cmp] = choiceOp{opString, cmp, false}
		choiceOps["String"+cmp+"Path"] = choiceOp{opString, cmp, true}
		choiceOps["Numeric"+cmp] = choiceOp{opNumeric, cmp, false}
		choiceOps["Numeric"+cmp+"Path"] = choiceOp{opNumeric, cmp, true}
	}
	choiceOps["StringMatches"] = choiceOp{opString, "Matches", false}
	choiceOps["BooleanEquals"] = choiceOp{opBoolean, "Equals", false}
	choiceOps["BooleanEqualsPath"] = choiceOp{opBoolean, "Equals", true}
	for _, t := range []string{"Present", "Null", "String", "Numeric", "Boolean"} {
		choiceOps["Is"+t] = choiceOp{opType, t, false}
	}
}

const supportedChoiceOps = "StringEquals, StringLessThan, StringGreaterThan, StringLessThanEquals, StringGreaterThanEquals (each also ...Path), StringMatches, " +
	"NumericEquals, NumericLessThan, NumericGreaterThan, NumericLessThanEquals, NumericGreaterThanEquals (each also ...Path), " +
	"BooleanEquals, BooleanEqualsPath, IsPresent, IsNull, IsString, IsNumeric, IsBoolean, And, Or, Not"

// Eval evaluates the rule against the Choice state's effective input.
//
// As on AWS, a comparison whose Variable (or ...Path operand) selects
// nothing fails the state with States.Runtime ("Invalid path '$.x': The
// choice state's condition path references an invalid value."), except
// IsPresent, which exists to guard against that; a comparison of a value
// of the wrong type is simply false. And and Or stop at the first rule
// that decides them, so an IsPresent guard placed first protects the
// rules after it.
func (r *ChoiceRule) Eval(in Value, ctx *Context) (bool, *Failure) {
	switch {
	case r.and != nil:
		for _, sub := range r.and {
			ok, f := sub.Eval(in, ctx)
			if f != nil || !ok {
				return false, f
			}
		}
		return true, nil
	case r.or != nil:
		for _, sub := range r.or {
			ok, f := sub.Eval(in, ctx)
			if f != nil || ok {
				return ok, f
			}
		}
		return false, nil
	case r.not != nil:
		ok, f := r.not.Eval(in, ctx)
		return !ok && f == nil, f
	}
	v, present := r.variable.Get(in, ctx)
	if r.op == "IsPresent" {
		return present == r.operand.(bool), nil
	}
	if !present {
		return false, invalidChoicePath(r.variable)
	}
	operand := r.operand
	if r.operandPath != nil {
		var ok bool
		if operand, ok = r.operandPath.Get(in, ctx); !ok {
			return false, invalidChoicePath(r.operandPath)
		}
	}
	switch r.kind {
	case opType:
		want := r.operand.(bool)
		var is bool
		switch r.cmp {
		case "Null":
			is = v == nil
		case "String":
			_, is = v.(string)
		case "Numeric":
			_, is = v.(json.Number)
		case "Boolean":
			_, is = v.(bool)
		}
		return is == want, nil
	case opBoolean:
		a, ok1 := v.(bool)
		b, ok2 := operand.(bool)
		return ok1 && ok2 && a == b, nil
	case opString:
		a, ok1 := v.(string)
		b, ok2 := operand.(string)
		if !ok1 || !ok2 {
			return false, nil
		}
		if r.cmp == "Matches" {
			return wildcardMatch(b, a), nil
		}
		return decide(r.cmp, compareUTF16(a, b)), nil
	case opNumeric:
		a, ok1 := v.(json.Number)
		b, ok2 := operand.(json.Number)
		if !ok1 || !ok2 {
			return false, nil
		}
		c, ok := compareNumbers(a, b)
		return ok && decide(r.cmp, c), nil
	}
	return false, nil
}

func invalidChoicePath(p *Path) *Failure {
	return failf(ErrRuntime, "Invalid path '%s': The choice state's condition path references an invalid value.", p)
}

func decide(cmp string, c int) bool {
	switch cmp {
	case "Equals":
		return c == 0
	case "LessThan":
		return c < 0
	case "GreaterThan":
		return c > 0
	case "LessThanEquals":
		return c <= 0
	case "GreaterThanEquals":
		return c >= 0
	}
	return false
}

// compareUTF16 orders strings by UTF-16 code units, as Java's
// String.compareTo does (Step Functions runs on the JVM); it differs from
// byte order only when a character above U+FFFF meets one in
// U+E000..U+FFFF.
func compareUTF16(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if ra != rb {
			ua, ub := utf16Units(ra), utf16Units(rb)
			for i := 0; i < len(ua) && i < len(ub); i++ {
				if ua[i] != ub[i] {
					if ua[i] < ub[i] {
						return -1
					}
					return 1
				}
			}
			if len(ua) < len(ub) {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func utf16Units(r rune) []uint16 {
	if r1, r2 := utf16.EncodeRune(r); r1 != '\uFFFD' || r2 != '\uFFFD' {
		return []uint16{uint16(r1), uint16(r2)}
	}
	return []uint16{uint16(r)}
}

// wildcardMatch implements StringMatches: '*' matches any run of
// characters (also none), "\*" a literal asterisk and "\\" a backslash;
// every other character matches itself.
func wildcardMatch(pattern, s string) bool {
	type tok struct {
		r    rune
		star bool
	}
	var toks []tok
	for i := 0; i < len(pattern); {
		r, n := utf8.DecodeRuneInString(pattern[i:])
		if r == '\\' && i+n < len(pattern) {
			r2, n2 := utf8.DecodeRuneInString(pattern[i+n:])
			if r2 == '*' || r2 == '\\' {
				toks = append(toks, tok{r: r2})
				i += n + n2
				continue
			}
		}
		toks = append(toks, tok{r: r, star: r == '*'})
		i += n
	}
	rs := []rune(s)
	// Iterative glob matching with single-star backtracking.
	ti, si := 0, 0
	starT, starS := -1, 0
	for si < len(rs) {
		switch {
		case ti < len(toks) && toks[ti].star:
			starT, starS = ti, si
			ti++
		case ti < len(toks) && toks[ti].r == rs[si]:
			ti++
			si++
		case starT >= 0:
			ti = starT + 1
			starS++
			si = starS
		default:
			return false
		}
	}
	for ti < len(toks) && toks[ti].star {
		ti++
	}
	return ti == len(toks)
}
