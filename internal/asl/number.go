package asl

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// maxExactExponent bounds the decimal exponent compared exactly; beyond it
// (1e100000 and the like) numbers compare as float64 so that a hostile
// payload cannot make the comparison allocate without bound.
const maxExactExponent = 4096

// compareNumbers compares two JSON numbers by value, exactly: 1, 1.0 and
// 1e0 are equal; 9007199254740993 is greater than 9007199254740992.
// ok is false only when a text is not a number.
func compareNumbers(a, b json.Number) (c int, ok bool) {
	if x, err := strconv.ParseInt(string(a), 10, 64); err == nil {
		if y, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			switch {
			case x < y:
				return -1, true
			case x > y:
				return 1, true
			}
			return 0, true
		}
	}
	x, okx := toRat(a)
	y, oky := toRat(b)
	if okx && oky {
		return x.Cmp(y), true
	}
	fx, errx := strconv.ParseFloat(string(a), 64)
	fy, erry := strconv.ParseFloat(string(b), 64)
	if (errx != nil && !isRangeErr(errx)) || (erry != nil && !isRangeErr(erry)) {
		return 0, false
	}
	switch {
	case fx < fy:
		return -1, true
	case fx > fy:
		return 1, true
	}
	return 0, true
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// toRat converts a JSON number to an exact rational, refusing huge exponents.
func toRat(n json.Number) (*big.Rat, bool) {
	s := string(n)
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || exp > maxExactExponent || exp < -maxExactExponent {
			return nil, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// roundHalfUp rounds r to the nearest integer, halves towards positive
// infinity (floor(r + 1/2)), as Java's Math.round does; Step Functions is
// written in Java and rounds States.MathAdd arguments that way.
func roundHalfUp(r *big.Rat) *big.Int {
	half := big.NewRat(1, 2)
	s := new(big.Rat).Add(r, half)
	// floor(s) for a rational: Quo truncates towards zero, adjust negatives.
	q, m := new(big.Int).QuoRem(s.Num(), s.Denom(), new(big.Int))
	if m.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// numberOf returns n as a JSON number.
func numberOf(n int) json.Number { return json.Number(strconv.Itoa(n)) }
