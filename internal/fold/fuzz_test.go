package fold_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/testenv"
)

// Format selectors of FuzzFold_Value: the three modes by name, and any
// other string (an unknown submit_format behaves as the default).
var fuzzFormats = [...]string{fold.FormatDefault, fold.FormatJSON, fold.FormatText}

// validUTF8Like returns what a Go JSON string of b decodes to: b itself when
// it is valid UTF-8, else b with every byte that starts no valid rune
// replaced by U+FFFD (encoding/json's rule; a JSON string cannot hold them).
func validUTF8Like(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out []byte
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return string(out)
}

func trimASCIISpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// docs/contracts.md § The fold and submit_format: for any bytes, format and
// role, Value never panics and returns valid JSON; a string result is the
// submitted text itself (text mode always, the lenient mode whenever it does
// not fold a container; invalid UTF-8 bytes become U+FFFD in the JSON string,
// the file on disk keeps them); "json" refuses a final body only with
// *stratus.Error EUNPROCESSABLE; every other mode never errors.
func FuzzFold_Value(f *testing.F) {
	raw, err := os.ReadFile(testenv.Cases(f, "fold", "cases.json"))
	if err != nil {
		f.Fatal(err)
	}
	var cases []struct {
		Format string `json:"format"`
		Role   string `json:"role"`
		Input  string `json:"input"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		f.Fatal(err)
	}
	for _, c := range cases {
		sel := uint8(3)
		for i, name := range fuzzFormats {
			if c.Format == name {
				sel = uint8(i)
			}
		}
		f.Add([]byte(c.Input), sel, c.Format, c.Role == "part")
	}
	f.Add([]byte("{\"a\":\"\xff\"}"), uint8(0), "", false)
	f.Add([]byte("\xff\xfe text \xc3"), uint8(2), "", true)
	f.Add([]byte("````json\r\n[1e400, -0.0]\r\n````\r\n"), uint8(1), "", false)
	f.Add([]byte("  \"\u2028<&>\"  "), uint8(1), "", false)

	f.Fuzz(func(t *testing.T, in []byte, sel uint8, other string, part bool) {
		format := other
		if int(sel%4) < len(fuzzFormats) {
			format = fuzzFormats[sel%4]
		}
		role := fold.RoleBody
		if part {
			role = fold.RolePart
		}
		orig := bytes.Clone(in)
		got, err := fold.Value("planner", in, format, role)
		if !bytes.Equal(in, orig) {
			t.Fatalf("Value modified its input: %q became %q", orig, in)
		}
		strict := format == fold.FormatJSON && role == fold.RoleBody
		if err != nil {
			var se *stratus.Error
			if !strict {
				t.Fatalf("Value(%q, format %q, %s) = %v; only json mode on a body may refuse", in, format, role, err)
			}
			if !errors.As(err, &se) || se.Code != stratus.EUNPROCESSABLE || se.Field != "body" {
				t.Fatalf("Value(%q, json) error = %#v; want *stratus.Error EUNPROCESSABLE Field body", in, err)
			}
			if got != nil {
				t.Errorf("Value(%q, json) = %s with an error; want no value", in, got)
			}
			// json mode never refuses what the default mode folds structured (doc.go).
			if lenient, _ := fold.Value("planner", in, fold.FormatDefault, role); len(lenient) > 0 && lenient[0] != '"' {
				t.Errorf("json mode refuses %q, which the default mode folds as %s", in, lenient)
			}
			return
		}
		if !json.Valid(got) {
			t.Fatalf("Value(%q, format %q, %s) = %q: not valid JSON", in, format, role, got)
		}
		if len(got) == 0 || got[0] == ' ' || got[len(got)-1] == '\n' {
			t.Fatalf("Value(%q) = %q: want one JSON value without surrounding white space", in, got)
		}

		if got[0] == '"' {
			var s string
			if err := json.Unmarshal(got, &s); err != nil {
				t.Fatalf("Value(%q) = %s: %v", in, got, err)
			}
			// In json mode a string result is the submitted JSON string's
			// value; in every other mode it is the submitted text.
			if !strict && s != validUTF8Like(in) {
				t.Fatalf("Value(%q, format %q, %s) = string %q; want the input itself", in, format, role, s)
			}
		}

		switch {
		case format == fold.FormatText:
			if got[0] != '"' {
				t.Fatalf("text mode folded %q structured: %s", in, got)
			}
		case !strict:
			// Lenient: only containers fold structured, as their compacted
			// original bytes (numbers keep their digits).
			if got[0] != '"' && got[0] != '{' && got[0] != '[' {
				t.Fatalf("default mode folded %q to the scalar %s", in, got)
			}
			var compact bytes.Buffer
			if got[0] != '"' && (json.Compact(&compact, got) != nil || !bytes.Equal(compact.Bytes(), got)) {
				t.Fatalf("default mode folded %q to %s, which is not compact JSON", in, got)
			}
			if tr := trimASCIISpace(in); utf8.Valid(tr) && json.Valid(tr) && (tr[0] == '{' || tr[0] == '[') {
				compact.Reset()
				json.Compact(&compact, tr)
				if !bytes.Equal(got, compact.Bytes()) {
					t.Fatalf("default mode folded the container %q to %s; want %s", in, got, compact.Bytes())
				}
			}
		default:
			// json mode: the default mode's structured fold is kept as is.
			if lenient, _ := fold.Value("planner", in, fold.FormatDefault, role); lenient[0] != '"' && !bytes.Equal(lenient, got) {
				t.Fatalf("json mode folded %q to %s, the default mode to %s", in, got, lenient)
			}
			if tr := trimASCIISpace(in); utf8.Valid(tr) && json.Valid(tr) {
				var compact bytes.Buffer
				json.Compact(&compact, tr)
				if !bytes.Equal(got, compact.Bytes()) {
					t.Fatalf("json mode folded the JSON value %q to %s; want %s", in, got, compact.Bytes())
				}
			}
		}
	})
}
