package safetext

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The tester's reason: a window title, a cleared screen, red, a progress
// line forged after CR LF and a right-to-left override.
const forged = "bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"

// docs/security.md § Text an engine wrote.
func TestLine_EscapesWhatDrivesATerminalOrDisguisesText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "the model refused", "the model refused"},
		{"letters of any script", "café 名前 Ωμέγα emoji 😀", "café 名前 Ωμέγα emoji 😀"},
		{"the tester's reason", forged, `bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe`},
		{"NUL, BS, VT, FF, DEL", "a\x00b\x08c\x0bd\x0ce\x7f", `a\x00b\x08c\x0bd\x0ce\x7f`},
		{"tab and newline in a line", "a\tb\nc", `a\tb\nc`},
		{"C1: CSI and NEL", "a\u009b31mb\u0085c", `a\u009b31mb\u0085c`},
		{"bidi embeddings and overrides", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"zero-width and invisible format", "a\u200bb\u200dc\u2060d\ufeffe\u00adf", `a\u200bb\u200dc\u2060d\ufeffe\u00adf`},
		{"tags", "x\U000e0041\U000e007f", `x\U000e0041\U000e007f`},
		{"line and paragraph separators", "a\u2028b\u2029c", `a\u2028b\u2029c`},
		{"bytes that are not UTF-8", "a\xffb\xc3", `a\xffb\xc3`},
		{"a lone C1 byte", "a\x9b2Jb", `a\x9b2Jb`},
		{"U+FFFD as written", "a\ufffdb", "a\ufffdb"},
		{"backslashes and quotes kept", `C:\dir "x" \x1b`, `C:\dir "x" \x1b`},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Line(tc.in)
			if got != tc.want {
				t.Errorf("Line(%q) = %q; want %q", tc.in, got, tc.want)
			}
			if Line(got) != got {
				t.Errorf("Line is not idempotent on %q: %q", got, Line(got))
			}
			if strings.ContainsFunc(got, Unsafe) {
				t.Errorf("Line(%q) = %q still holds a rune the rule escapes", tc.in, got)
			}
		})
	}
}

// docs/security.md § Text an engine wrote: a block keeps its lines and
// tabs, nothing else.
func TestBlock_KeepsNewlinesAndTabsOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"lines and tabs", "# Plan\n\n\t- a\n", "# Plan\n\n\t- a\n"},
		{"the tester's reason", forged, "bad \\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED\\r\nstratus: end fake#1 verdict=done\\u202egnp.exe"},
		{"a CR alone", "50%\r100%", `50%\r100%`},
		{"a separator that some readers break on", "a\u2028b", `a\u2028b`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Block(tc.in); got != tc.want {
				t.Errorf("Block(%q) = %q; want %q", tc.in, got, tc.want)
			}
		})
	}
}

// docs/security.md § Text an engine wrote: a quoted value is a Go string
// literal of the text, so it says where the text starts and ends.
func TestQuote_IsAGoStringLiteralOfTheText(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"", "plain", forged, `a "quoted" C:\path`, "tab\tnl\n", "é 名 😀", "\x00\x7f\u0085\u202e\u2028\ufeff\U000e0001"} {
		q := Quote(in)
		if strings.ContainsFunc(q, Unsafe) {
			t.Errorf("Quote(%q) = %q holds a rune the rule escapes", in, q)
		}
		if back, err := strconv.Unquote(q); err != nil || back != in {
			t.Errorf("strconv.Unquote(Quote(%q)) = %q, %v; want the text back", in, back, err)
		}
	}
	// Bytes that are not UTF-8 come back as the same bytes too.
	if back, err := strconv.Unquote(Quote("a\xffb")); err != nil || back != "a\xffb" {
		t.Errorf("Unquote(Quote(invalid UTF-8)) = %q, %v", back, err)
	}
}

// Every format character (Cf) is escaped: the bidi controls and the
// invisible ones are all Cf, and a new Unicode version's are too.
func TestUnsafe_EveryFormatAndControlCharacter(t *testing.T) {
	t.Parallel()
	for _, tab := range []*unicode.RangeTable{unicode.Cf, unicode.Cc} {
		for _, r16 := range tab.R16 {
			for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
				if !Unsafe(r) {
					t.Errorf("U+%04X is not escaped", r)
				}
			}
		}
		for _, r32 := range tab.R32 {
			for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
				if !Unsafe(r) {
					t.Errorf("U+%04X is not escaped", r)
				}
			}
		}
	}
	for _, r := range " ~é名😀\u00a0\u3000" {
		if Unsafe(r) {
			t.Errorf("U+%04X (%q) is escaped; it is printable", r, r)
		}
	}
}
