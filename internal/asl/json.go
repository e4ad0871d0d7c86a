package asl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/stratusflow/stratus/internal/jsonstr"
)

// Value is one decoded JSON value: nil (null), bool, json.Number, string,
// []Value or *Object. Numbers keep their source text, objects keep their
// key order, so a value re-encodes to what it was decoded from (modulo
// whitespace), as Step Functions preserves both.
//
// Values are treated as immutable once built: every operation that changes
// a value (Path.Set) copies the spine it changes and shares the rest.
type Value = any

// Object is a JSON object that remembers the order of its keys. The zero
// value is an empty object.
type Object struct {
	members []Member
	index   map[string]int // built lazily for large objects
}

// Member is one key/value pair of an Object.
type Member struct {
	Key   string
	Value Value
}

// indexThreshold is the size above which an Object keeps a key index;
// below it a linear scan is faster than hashing.
const indexThreshold = 12

// NewObject returns an object holding members in order. A repeated key
// keeps its first position and its last value, as Jackson does.
func NewObject(members ...Member) *Object {
	o := &Object{members: make([]Member, 0, len(members))}
	for _, m := range members {
		o.put(m.Key, m.Value)
	}
	return o
}

// Len returns the number of members.
func (o *Object) Len() int {
	if o == nil {
		return 0
	}
	return len(o.members)
}

// Members returns the members in order. The slice must not be modified.
func (o *Object) Members() []Member {
	if o == nil {
		return nil
	}
	return o.members
}

// Get returns the value of key and whether it is present.
func (o *Object) Get(key string) (Value, bool) {
	i := o.find(key)
	if i < 0 {
		return nil, false
	}
	return o.members[i].Value, true
}

func (o *Object) find(key string) int {
	if o == nil {
		return -1
	}
	if o.index != nil {
		if i, ok := o.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range o.members {
		if o.members[i].Key == key {
			return i
		}
	}
	return -1
}

// put sets key in place; only for objects under construction.
func (o *Object) put(key string, v Value) {
	if i := o.find(key); i >= 0 {
		o.members[i].Value = v
		return
	}
	o.members = append(o.members, Member{Key: key, Value: v})
	if o.index != nil {
		o.index[key] = len(o.members) - 1
	} else if len(o.members) > indexThreshold {
		o.index = make(map[string]int, len(o.members))
		for i, m := range o.members {
			o.index[m.Key] = i
		}
	}
}

// With returns a copy of o with key set to v: replaced in place when the
// key exists, appended otherwise. o itself is unchanged.
func (o *Object) With(key string, v Value) *Object {
	n := &Object{members: make([]Member, len(o.Members()), o.Len()+1)}
	copy(n.members, o.Members())
	if o != nil && o.index != nil {
		n.index = make(map[string]int, len(o.index)+1)
		for k, i := range o.index {
			n.index[k] = i
		}
	}
	n.put(key, v)
	return n
}

// Decode parses one JSON text into a Value, keeping number text and key
// order. Trailing data after the value is an error.
func Decode(data []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the top-level value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (Value, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("invalid JSON: empty input")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := &Object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("invalid JSON: %w", err)
				}
				key, ok := kt.(string)
				if !ok {
					return nil, errors.New("invalid JSON: object key is not a string")
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				o.put(key, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return o, nil
		case '[':
			arr := []Value{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, fmt.Errorf("invalid JSON: %w", err)
			}
			return arr, nil
		}
		return nil, fmt.Errorf("invalid JSON: unexpected %q", t)
	default:
		return t, nil // nil, bool, json.Number, string
	}
}

// MustDecode is Decode for literals known to be valid; it panics otherwise.
func MustDecode(s string) Value {
	v, err := Decode([]byte(s))
	if err != nil {
		panic(err)
	}
	return v
}

// Encode returns the compact JSON text of v: no insignificant whitespace,
// keys in their order, numbers as their source text, non-ASCII characters
// unescaped (as Step Functions renders payloads).
func Encode(v Value) []byte {
	var b []byte
	return appendValue(b, v)
}

// EncodeString is Encode returning a string.
func EncodeString(v Value) string { return string(Encode(v)) }

func appendValue(b []byte, v Value) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case json.Number:
		return append(b, t...)
	case string:
		return jsonstr.Append(b, t)
	case []Value:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		return append(b, ']')
	case *Object:
		b = append(b, '{')
		for i, m := range t.Members() {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, m.Key)
			b = append(b, ':')
			b = appendValue(b, m.Value)
		}
		return append(b, '}')
	default:
		panic(fmt.Sprintf("asl: not a JSON value: %T", v))
	}
}

// Equal reports whether a and b are the same JSON value: numbers compare by
// value, objects by members regardless of order.
func Equal(a, b Value) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		c, ok := compareNumbers(x, y)
		return ok && c == 0
	case []Value:
		y, ok := b.([]Value)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Object:
		y, ok := b.(*Object)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, m := range x.Members() {
			w, ok := y.Get(m.Key)
			if !ok || !Equal(m.Value, w) {
				return false
			}
		}
		return true
	}
	return false
}
