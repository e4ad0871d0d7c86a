package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line is s made safe to show inside one line: every rune the rule names
// (see the package doc) is escaped, tab and newline included, so that s
// cannot drive a terminal, disguise its text or start a line of its own.
// A backslash is kept as it is, so Line(Line(s)) == Line(s).
func Line(s string) string { return escape(s, false, false) }

// Block is s made safe to show as lines of its own (a log's tail, a
// summary's prose): as Line, except that newline and tab are kept. A CR
// is escaped (\r) even before a newline: it would move the cursor back
// over what is already on the line.
func Block(s string) string { return escape(s, true, false) }

// Quote is s in double quotes, escaped as Line escapes it, with `"` and
// `\` escaped too: a Go string literal (strconv.Unquote gives s back)
// that says where s starts and ends.
func Quote(s string) string { return `"` + escape(s, false, true) + `"` }

// Unsafe reports whether r is a rune the rule escapes (utf8.RuneError
// stands for a byte that is not UTF-8, when it came from a 1-byte read).
func Unsafe(r rune) bool {
	switch {
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0): // C0, DEL, C1 (Cc)
		return true
	case r == '\u2028' || r == '\u2029': // Zl, Zp: a line break to some readers
		return true
	case r < 0xad:
		return false
	}
	return unicode.Is(unicode.Cf, r)
}

const hexDigits = "0123456789abcdef"

func escape(s string, block, quoted bool) string {
	i := strings.IndexFunc(s, func(r rune) bool {
		return r == utf8.RuneError || Unsafe(r) || (quoted && (r == '"' || r == '\\'))
	})
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[s[i-1]>>4])
			b.WriteByte(hexDigits[s[i-1]&0xf])
		case quoted && (r == '"' || r == '\\'):
			b.WriteByte('\\')
			b.WriteRune(r)
		case block && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case !Unsafe(r):
			b.WriteString(s[i-n : i]) // U+FFFD written as such stays
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[r>>4])
			b.WriteByte(hexDigits[r&0xf])
		case r <= 0xffff:
			b.WriteString(`\u`)
			for shift := 12; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[r>>uint(shift)&0xf])
			}
		default:
			b.WriteString(`\U`)
			for shift := 28; shift >= 0; shift -= 4 {
				b.WriteByte(hexDigits[r>>uint(shift)&0xf])
			}
		}
	}
	return b.String()
}
