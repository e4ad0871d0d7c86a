package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
)

// DirFlag is the --dir flag a printed command needs to reach work dir dir
// from the operator's working directory: "" when dir is that directory.
func DirFlag(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "--dir " + shellQuote(dir)
	}
	if wd, err := os.Getwd(); err == nil && wd == abs {
		return ""
	}
	return "--dir " + shellQuote(abs)
}

// shellQuote is s as one shell word.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == '@' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
