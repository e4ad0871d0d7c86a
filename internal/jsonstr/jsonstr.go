// Package jsonstr writes JSON strings byte for byte (see Append).
package jsonstr

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// Append appends s to b as a JSON string, the one escaping every writer of
// JSON text in Stratus uses where the bytes matter (the compiled ASL, the
// bundled engines' lines, which match openseek's reference engine byte for
// byte: docs/contracts.md § The reference engine): `"` and `\` with a
// backslash, \n \r \t \b \f by
// name, other bytes below 0x20 as \u00xx, everything else as it is (no
// HTML escaping, unlike encoding/json); bytes that are not UTF-8 become
// U+FFFD, as encoding/json makes them.
func Append(b []byte, s string) []byte { return appendString(b, s, false) }

// AppendEncodingJSON appends s to b as a JSON string, byte for byte as
// encoding/json's Encoder with SetEscapeHTML(false) writes it
// (FuzzAppendEncodingJSON holds them equal): for text that must read as
// encoding/json wrote it before (the fold's strings,
// docs/contracts.md § The fold and submit_format). It is
// Append but for two things: U+2028 and U+2029 are written \u2028 and
// \u2029, and each invalid UTF-8 byte \ufffd, escaped. One pass
// (README.md § Performance: the Encoder's buffer growth and checks made a 64
// KiB submit's fold a sixth of its CPU).
func AppendEncodingJSON(b []byte, s string) []byte { return appendString(b, s, true) }

// appendString is Append, or with encodingJSON AppendEncodingJSON.
func appendString(b []byte, s string, encodingJSON bool) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			if c < utf8.RuneSelf {
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, s[start:i]...)
				if encodingJSON {
					b = append(b, `\ufffd`...)
				} else {
					b = append(b, "\ufffd"...)
				}
				start = i + size
			case encodingJSON && (r == '\u2028' || r == '\u2029'):
				b = append(b, s[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
				start = i + size
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
