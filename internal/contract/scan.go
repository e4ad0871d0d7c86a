package contract

import (
	"bytes"
	"encoding/json"
)

// members are the top-level members of one stdout line that the
// classifier reads (docs/contracts.md § The event stream, § The report line),
// each the raw bytes of its JSON value as it appears in the line (nil:
// absent). When a key appears twice the last one counts, as encoding/json
// decodes an object into a map.
type members struct {
	event, subrunReport, step, usage, toSequence, answer, error, reason []byte
}

// usageMembers are the members of a usage object
// (docs/contracts.md § The event stream).
type usageMembers struct {
	fields [len(usageFields)][]byte // in usageFields' order
	cost   []byte
}

// maxDepth is encoding/json's nesting limit: a line nested deeper is not
// valid JSON to it, so not to the classifier either.
const maxDepth = 10000

// scanObject reports whether line is exactly one JSON object (surrounding
// white space allowed) under the rules of encoding/json — json.Valid
// accepts it — and calls member for each of its top-level members, in
// order, with the key's decoded bytes and the value's raw bytes. It makes
// one pass and allocates only for a key written with escapes.
//
// It replaces json.Unmarshal into map[string]json.RawMessage, which built
// a map and copied every value on every line (README.md § Performance).
func scanObject(line []byte, member func(key, value []byte)) bool {
	s := scanner{b: line}
	s.space()
	if !s.object(0, member) {
		return false
	}
	s.space()
	return s.i == len(s.b)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// object scans an object at s.i; member, when not nil, gets each member.
func (s *scanner) object(depth int, member func(key, value []byte)) bool {
	if depth >= maxDepth || s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		k := s.i
		escaped, ok := s.str()
		if !ok {
			return false
		}
		key := s.b[k+1 : s.i-1]
		s.space()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		v := s.i
		if !s.value(depth + 1) {
			return false
		}
		if member != nil {
			if escaped {
				var decoded string
				if json.Unmarshal(s.b[k:k+len(key)+2], &decoded) != nil {
					return false
				}
				key = []byte(decoded)
			}
			member(key, s.b[v:s.i])
		}
		if more, ok := s.next('}'); !more {
			return ok
		}
	}
}

// next scans what follows a member or an element: a ',' (more to come) or
// the closing byte (ok, no more); anything else is not JSON.
func (s *scanner) next(closing byte) (more, ok bool) {
	s.space()
	if s.i >= len(s.b) {
		return false, false
	}
	switch s.b[s.i] {
	case ',':
		s.i++
		return true, true
	case closing:
		s.i++
		return false, true
	}
	return false, false
}

func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(depth, nil)
	case c == '[':
		return s.array(depth)
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '-' || isDigit(c):
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *scanner) array(depth int) bool {
	if depth >= maxDepth {
		return false
	}
	s.i++ // '['
	s.space()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return true
	}
	for {
		s.space()
		if !s.value(depth + 1) {
			return false
		}
		if more, ok := s.next(']'); !more {
			return ok
		}
	}
}

// str scans a string at s.i (RFC 8259 § 7: no control character, only the
// defined escapes; bytes that are not UTF-8 pass, as encoding/json takes
// them) and reports whether its text differs from its bytes: it holds an
// escape, or a byte outside ASCII (which encoding/json reads as UTF-8,
// invalid sequences as U+FFFD).
func (s *scanner) str() (escaped, ok bool) {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false, false
	}
	s.i++
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return escaped, true
		case c < 0x20:
			return false, false
		case c >= 0x80:
			escaped = true
			s.i++
		case c == '\\':
			escaped = true
			if s.i+1 >= len(s.b) {
				return false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isDigit(h) && (h|0x20 < 'a' || h|0x20 > 'f') {
						return false, false
					}
				}
				s.i += 6
			default:
				return false, false
			}
		default:
			s.i++
		}
	}
	return false, false
}

// number scans a number at s.i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		for s.i < len(s.b) && isDigit(s.b[s.i]) {
			s.i++
		}
	default:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && isDigit(s.b[s.i]) {
		s.i++
	}
	return s.i > start
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}
