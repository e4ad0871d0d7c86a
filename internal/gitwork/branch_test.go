package gitwork

import "testing"

// git check-ref-format's rules for a branch, and what git reads as no
// branch: HEAD, a name under refs/.
func TestValidBranchName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"main": true, "release/1.2": true, "stratus/t-1": true, "feature_x": true,
		"": false, "-x": false, "/a": false, "a/": false, "a..b": false, "a.lock": false, "a.": false, "@": false,
		"a@{b": false, "a//b": false, "a b": false, "a~b": false, "a^b": false, "a:b": false, "a?b": false,
		"a*b": false, "a[b": false, `a\b`: false, "a/.b": false, ".a": false, "a\x7fb": false,
		"HEAD": false, "refs/heads/main": false,
	} {
		if got := ValidBranchName(name); got != want {
			t.Errorf("ValidBranchName(%q) = %v, want %v", name, got, want)
		}
	}
}
