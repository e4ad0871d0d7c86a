package workspace

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// file, exe, dir and link build tree entries for the rule tables.
func file(p string) TreeEntry         { return TreeEntry{Path: p, Mode: ModeRegular} }
func exe(p string) TreeEntry          { return TreeEntry{Path: p, Mode: ModeExecutable} }
func dir(p string) TreeEntry          { return TreeEntry{Path: p, Mode: ModeTree} }
func link(p, target string) TreeEntry { return TreeEntry{Path: p, Mode: ModeSymlink, Target: target} }

// TestTreeCheck_RefusesEntriesThatLeaveTheTreeOrWriteAGitDir:
// docs/security.md § Workspace commits — the one rule every workspace tree
// passes, wherever it is checked (runner, worker API, pull).
func TestTreeCheck_RefusesEntriesThatLeaveTheTreeOrWriteAGitDir(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		entries []TreeEntry
		bad     []string // substrings of the violations, one per violation, in path order; none: the tree passes
	}{
		{"absolute symlink", []TreeEntry{file("a"), link("leak", "/etc/passwd")}, []string{"leak -> /etc/passwd: absolute symlink target"}},
		{"symlink escaping with ../", []TreeEntry{link("sub/out", "../../outside")}, []string{"sub/out -> ../../outside: symlink resolves outside the tree"}},
		{"symlink escaping through another symlink", []TreeEntry{link("s", "."), link("x", "s/..")}, []string{"x -> s/..: symlink resolves outside the tree"}},
		{"symlink escaping through a chain of links", []TreeEntry{link("a/up", ".."), link("b", "a/up/a/up/.."), dir("a")}, []string{"b -> a/up/a/up/..: symlink resolves outside"}},
		{"symlink escaping through a link to an absolute path", []TreeEntry{link("abs", "/tmp"), link("x", "abs/y")}, []string{"abs -> /tmp: absolute", "x -> abs/y: symlink resolves outside"}},
		{"symlink escaping on a case-insensitive file system", []TreeEntry{link("a", "."), link("x", "A/..")}, []string{"x -> A/..: symlink resolves outside"}},
		{"symlink with a backslash", []TreeEntry{link("w", `..\..\x`)}, []string{`w -> ..\..\x: symlink target with a backslash`}},
		{"symlink with a drive", []TreeEntry{link("w", `C:/Windows`)}, []string{"w -> C:/Windows: symlink target with a backslash or a drive"}},
		{"symlink target too long", []TreeEntry{link("long", strings.Repeat("a/", 2100))}, []string{"long: symlink target over 4095 bytes"}},
		{"symlink into .git", []TreeEntry{link("cfg", ".git/config")}, []string{"cfg -> .git/config: symlink resolves into a .git dir"}},
		{"symlink into a nested .GIT through a link", []TreeEntry{link("d", "sub"), link("h", "d/.GIT/hooks")}, []string{"h -> d/.GIT/hooks: symlink resolves into a .git dir"}},
		{"gitlink", []TreeEntry{file("a"), {Path: "vendor/lib", Mode: ModeGitlink}}, []string{"vendor/lib: a submodule or nested git repository (gitlink, mode 160000): submodules are refused"}},
		{".git/config", []TreeEntry{file(".git/config")}, []string{`.git/config: path component ".git" is a git dir`}},
		{".GIT", []TreeEntry{dir(".GIT")}, []string{`.GIT: path component ".GIT" is a git dir`}},
		{"nested a/.git/hooks/x", []TreeEntry{exe("a/.git/hooks/x")}, []string{`a/.git/hooks/x: path component ".git"`}},
		{".git with NTFS trailing dots and spaces", []TreeEntry{file(".Git. ./config")}, []string{`path component ".Git. ." is a git dir`}},
		{".git NTFS stream", []TreeEntry{file(".git::$INDEX_ALLOCATION/config")}, []string{"is a git dir"}},
		{".git NTFS short name", []TreeEntry{file("GIT~1/config")}, []string{`path component "GIT~1" is a git dir`}},
		{".git with a code point HFS+ ignores", []TreeEntry{file(".g\u200cit/config")}, []string{"is a git dir"}},
		{"bad mode: group-writable file", []TreeEntry{{Path: "f", Mode: 0o100664}}, []string{"f: mode 100664 is not one git writes"}},
		{"bad mode: device", []TreeEntry{{Path: "f", Mode: 0o020644}}, []string{"f: mode 020644 is not one git writes"}},
		{"empty path component", []TreeEntry{file("a//b")}, []string{`a//b: path component "" is not a name`}},
		{"dot-dot path component", []TreeEntry{file("a/../../etc/x")}, []string{`path component ".." is not a name`}},
		{"backslash in a path", []TreeEntry{file(`a\..\x`)}, []string{"path holds a backslash"}},
		{"several at once, by path", []TreeEntry{link("z", "/"), file(".git/HEAD"), {Path: "m", Mode: ModeGitlink}},
			[]string{".git/HEAD", "m: a submodule", "z -> /: absolute"}},

		{"regular files, executables, trees and links inside pass", []TreeEntry{
			dir("a"), file("a/f"), exe("run.sh"), link("l1", "a/../a/f"), link("a/l2", "../l1"), link("d", "a"), link("l3", "d/../a/f"),
			link("dangling", "nowhere/at/all"), link("p", "q"), link("q", "p"), // a loop resolves nowhere: not outside
			file(".gitignore"), file(".gitmodules"), file(".github/workflows/ci.yml"), file("x.git"), file("git"), dir(".gitx"),
			link("README", "docs/README.md"), link("Docs", "docs"), dir("docs"), file("docs/README.md"),
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vs := CheckEntries(c.entries)
			if len(vs) != len(c.bad) {
				t.Fatalf("violations %q, want %d matching %q", vs, len(c.bad), c.bad)
			}
			for i, want := range c.bad {
				if !strings.Contains(vs[i].String(), want) {
					t.Errorf("violation %d = %q, want it to say %q", i, vs[i], want)
				}
			}
			if err := RulesError(stratus.EUNPROCESSABLE, "to", "commit x", vs, ""); (err == nil) != (len(c.bad) == 0) {
				t.Errorf("RulesError = %v", err)
			} else if err != nil && (stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), "docs/security.md § Workspace commits")) {
				t.Errorf("RulesError = %v (code %s)", err, stratus.ErrorCode(err))
			}
		})
	}
}

// TestTreeCheck_KeepsAFewViolationsOfAHostileTree: a tree of thousands
// of bad entries yields a bounded error, counting what it leaves out.
func TestTreeCheck_KeepsAFewViolationsOfAHostileTree(t *testing.T) {
	t.Parallel()
	var c TreeCheck
	for i := range 1000 {
		c.Add(TreeEntry{Path: fmt.Sprintf("m%04d", i), Mode: ModeGitlink})
		c.Add(link(fmt.Sprintf("l%04d", i), "../x"))
	}
	vs := c.Violations()
	if len(vs) != maxViolations+1 || vs[len(vs)-1].Rule != fmt.Sprintf("and %d more", 2000-maxViolations) {
		t.Errorf("%d violations, last %q", len(vs), vs[len(vs)-1])
	}
}
