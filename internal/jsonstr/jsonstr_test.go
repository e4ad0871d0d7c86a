package jsonstr

import (
	"encoding/json"
	"testing"
)

// The escaping both the ASL writer and the bundled engines rely on: named
// escapes, \u00xx for the other controls, no HTML escaping, U+FFFD for
// bytes that are not UTF-8; the result is JSON that decodes back.
func TestAppend(t *testing.T) {
	for in, want := range map[string]string{
		"plain":       `"plain"`,
		"q\"b\\":      `"q\"b\\"`,
		"\n\r\t\b\f":  `"\n\r\t\b\f"`,
		"\x01\x1f":    `"\u0001\u001f"`,
		"<&> é 🙂":     `"<&> é 🙂"`,
		"bad\xffbyte": "\"bad\ufffdbyte\"",
		"":            `""`,
	} {
		got := string(Append(nil, in))
		if got != want {
			t.Errorf("Append(%q) = %s, want %s", in, got, want)
		}
		var back string
		if err := json.Unmarshal([]byte(got), &back); err != nil {
			t.Errorf("Append(%q) = %s: not JSON: %v", in, got, err)
		}
	}
}
