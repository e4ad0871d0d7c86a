package core

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A kept reason is bounded (MaxReasonBytes) and cut on a rune boundary,
// saying it was cut; a short one is kept as is.
func TestClipReason_BoundedOnARuneBoundary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		max  int
		more string
	}{
		{strings.Repeat("é", 5000), MaxReasonBytes, " [cut]"},
		{strings.Repeat("a", 300<<10), AnswerReasonBytes, ""},
		{strings.Repeat("日本", 100), 10, " [a note longer than the bound]"},
	} {
		got := ClipReason(tc.in, tc.max, tc.more)
		if len(got) > tc.max || !utf8.ValidString(got) || !strings.HasPrefix(tc.in, strings.TrimSuffix(strings.TrimSuffix(got, tc.more), "…")) {
			t.Errorf("ClipReason(%d bytes, %d, %q) = %d bytes %.40q…; want at most %d bytes, valid UTF-8, a prefix of the input", len(tc.in), tc.max, tc.more, len(got), got, tc.max)
		}
	}
	if got := ClipReason("short", MaxReasonBytes, " [cut]"); got != "short" {
		t.Errorf("ClipReason(short) = %q", got)
	}
}
