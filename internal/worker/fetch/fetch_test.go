package fetch

import (
	"slices"
	"testing"
)

// worc reference.md § agent node: extra_args are concatenated after the
// provider's args; a bundled engine gets them after "--" so it hands them
// to the CLI it wraps.
func TestWithExtraArgs_AfterProviderArgs(t *testing.T) {
	t.Parallel()
	extra := []string{"--add-dir", "docs"}
	for _, tc := range []struct {
		name, command string
		args, want    []string
	}{
		{"ForeignEngine_Appended", "openseek", []string{"subrun", "worker"}, []string{"subrun", "worker", "--add-dir", "docs"}},
		{"BundledEngine_AfterDashDash", "{stratus}", []string{"engine", "claude"}, []string{"engine", "claude", "--", "--add-dir", "docs"}},
		{"BundledEngine_DashDashKept", "{stratus}", []string{"engine", "codex", "--", "--skip-git-repo-check"}, []string{"engine", "codex", "--", "--skip-git-repo-check", "--add-dir", "docs"}},
	} {
		if got := withExtraArgs(tc.command, slices.Clone(tc.args), extra); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := withExtraArgs("{stratus}", []string{"engine", "echo"}, nil); !slices.Equal(got, []string{"engine", "echo"}) {
		t.Errorf("no extra_args: got %q, want the provider's args alone", got)
	}
}
