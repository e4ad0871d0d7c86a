package gitwork

import "strings"

// ValidBranchName reports whether name can be a git branch or remote name: no
// spaces or control characters, none of ~^:?*[\ , no "..", "@{" or "//", not
// starting with "-" or "/", not ending with "/", ".lock" or "." (git
// check-ref-format's rules, without running git), and neither HEAD nor a
// name under refs/ (which git reads as a ref, not a branch).
func ValidBranchName(name string) bool {
	if name == "" || strings.HasPrefix(name, "-") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") ||
		strings.HasSuffix(name, ".lock") || strings.HasSuffix(name, ".") || name == "@" || name == "HEAD" || strings.HasPrefix(name, "refs/") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("~^:?*[\\", r) {
			return false
		}
	}
	for _, part := range strings.Split(name, "/") {
		if strings.HasPrefix(part, ".") {
			return false
		}
	}
	return true
}
