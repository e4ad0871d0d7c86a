package fold

import "testing"

// CommonMark § Fenced code blocks: the content of one whole fenced block
// is what lies between its opening fence and the first line that closes
// it — at least as many of the same character — so a shorter fence, or
// one of the other character, is content and not a close.
func TestUnfence_ClosingFenceAtLeastAsLongAsTheOpeningOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, content string
		ok                bool
	}{
		{"equal", "```\nx\n```", "x\n", true},
		{"longer close", "```\nx\n````", "x\n", true},
		{"shorter fence inside is content", "````\nx\n```\ny\n````", "x\n```\ny\n", true},
		{"other character inside is content", "```\nx\n~~~\n```", "x\n~~~\n", true},
		{"tilde block", "~~~~ yaml\na: 1\n~~~~~~", "a: 1\n", true},
		{"backticks inside a tilde block are content", "~~~\n```\n~~~", "```\n", true},
		{"closing fence followed by spaces inside closes early", "```\nx\n```  \ny\n```", "", false},
		{"equal fence inside closes early", "````\nx\n````\ny\n````", "", false},
		{"shorter close only: unclosed", "````\nx\n```", "", false},
	} {
		got, ok := unfence([]byte(tc.in))
		if ok != tc.ok || string(got) != tc.content {
			t.Errorf("%s: unfence(%q) = %q, %v; want %q, %v", tc.name, tc.in, got, ok, tc.content, tc.ok)
		}
	}
}
