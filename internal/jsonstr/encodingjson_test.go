package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// AppendEncodingJSON writes exactly what encoding/json's Encoder writes
// with SetEscapeHTML(false) (README.md § Performance: the fold's one-pass
// encoder), for any bytes: valid and invalid UTF-8, control bytes, quotes,
// U+2028.
func FuzzAppendEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "plain", "# Plan\n\n- a \"b\" \\ c\t\r\n", "\x00\x01\x08\x0c\x1f\x7f", "é 名 \u2028\u2029 <&>",
		"\xff\xfe", "a\xc3", "\xe2\x80", "\xed\xa0\x80 surrogate", "\U0001F600"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(b)); err != nil {
			t.Fatal(err)
		}
		if got := AppendEncodingJSON([]byte("x"), string(b)); !bytes.Equal(got[1:], bytes.TrimSuffix(want.Bytes(), []byte("\n"))) || got[0] != 'x' {
			t.Fatalf("AppendEncodingJSON(%q) = %s; encoding/json writes %s", b, got, want.Bytes())
		}
	})
}
