package prompt

import (
	"testing"

	"github.com/stratusflow/stratus"
)

// docs/contracts.md § The fold and submit_format ("Agent: AgentMeta.ctx"): a
// role file may declare its agent's fold mode in front matter; files without
// one are untouched.
func TestSplitRoleFile(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in, body, format string
		code             string
	}{
		"no front matter":      {"Review {task_id}.\n", "Review {task_id}.\n", "", ""},
		"markdown rule first":  {"---\n\nJust prose.\n", "---\n\nJust prose.\n", "", ""},
		"unclosed":             {"---\nsubmit_format: json\nbody", "---\nsubmit_format: json\nbody", "", ""},
		"declares json":        {"---\nsubmit_format: json\n---\nReturn JSON.\n", "Return JSON.\n", "json", ""},
		"closing at eof":       {"---\nsubmit_format: text\n---", "", "text", ""},
		"unknown key rejected": {"---\nmodel: x\n---\nbody", "", "", stratus.EINVALID},
	} {
		meta, body, err := SplitRoleFile(tc.in)
		if stratus.ErrorCode(err) != tc.code {
			t.Errorf("%s: err = %v, want code %q", name, err, tc.code)
			continue
		}
		if err == nil && (body != tc.body || meta.SubmitFormat != tc.format) {
			t.Errorf("%s: body %q format %q, want %q %q", name, body, meta.SubmitFormat, tc.body, tc.format)
		}
	}
}
