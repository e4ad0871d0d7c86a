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

// TestTreeCheck_RefusesStratusOwnPaths: docs/security.md § Workspace
// commits — with the run's exclude list (the state dir, the ctx dir), a
// tree holds nothing at or under one, in any spelling a file system folds
// into it, no file or symlink where a dir holding one must be, and no
// symlink resolving into one (notes.txt -> .stratus/config.yaml: writing
// notes.txt would rewrite Stratus's config). Links to a dir above one,
// and paths that only look alike, pass; without an exclude list nothing
// is Stratus's own.
func TestTreeCheck_RefusesStratusOwnPaths(t *testing.T) {
	t.Parallel()
	exclude := []string{".stratus", "workspace/tasks/t1/ctx"}
	cases := []struct {
		name    string
		entries []TreeEntry
		bad     []string
	}{
		{"the task file in the state dir", []TreeEntry{dir(".stratus"), dir(".stratus/task"), file(".stratus/task/task.md")},
			[]string{`.stratus: inside ".stratus", Stratus's own path`, ".stratus/task: inside", ".stratus/task/task.md: inside"}},
		{"a hook in the state dir", []TreeEntry{exe(".stratus/hooks/x")}, []string{`.stratus/hooks/x: inside ".stratus"`}},
		{"a file in the ctx dir", []TreeEntry{file("workspace/tasks/t1/ctx/plan.md")}, []string{`inside "workspace/tasks/t1/ctx"`}},
		{"the state dir in capitals", []TreeEntry{file(".STRATUS/config.yaml")}, []string{`.STRATUS/config.yaml: inside ".stratus"`}},
		{"the state dir with an NTFS trailing dot", []TreeEntry{file(".stratus./config.yaml")}, []string{`inside ".stratus"`}},
		{"the ctx dir with a code point HFS+ ignores", []TreeEntry{file("workspace/Tasks/t1/c\u200ctx/x")}, []string{`inside "workspace/tasks/t1/ctx"`}},
		{"a symlink standing as the state dir", []TreeEntry{link(".stratus", "docs")}, []string{`.stratus -> docs: inside ".stratus"`}},
		{"a symlink into the state dir's config", []TreeEntry{link("notes.txt", ".stratus/config.yaml")},
			[]string{`notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus", Stratus's own path`}},
		{"a symlink to the state dir", []TreeEntry{link("s", "./.stratus")}, []string{`s -> ./.stratus: symlink resolves into ".stratus"`}},
		{"a symlink into the state dir on a case-insensitive file system", []TreeEntry{link("n", ".Stratus/config.yaml")}, []string{`symlink resolves into ".stratus"`}},
		{"a symlink into the ctx dir through another link", []TreeEntry{link("d", "workspace/tasks"), link("n", "d/t1/ctx/plan.md")},
			[]string{`n -> d/t1/ctx/plan.md: symlink resolves into "workspace/tasks/t1/ctx"`}},
		{"a symlink where a dir above the ctx dir must be", []TreeEntry{link("workspace/tasks", "../elsewhere")},
			[]string{`workspace/tasks -> ../elsewhere: a file or symlink where the dir holding "workspace/tasks/t1/ctx"`}},
		{"a file where a dir above the ctx dir must be", []TreeEntry{file("workspace")}, []string{`workspace: a file or symlink where the dir holding "workspace/tasks/t1/ctx"`}},

		{"paths that only look alike, links above, pass", []TreeEntry{
			file(".stratusrc"), file("stratus/x"), dir("workspace"), dir("workspace/tasks"), file("workspace/tasks/t1/ctx2/keep.md"),
			file("workspace/tasks/t2/ctx/x"), file("workspace/tasks/t1/out.md"), link("up", "workspace/tasks"), link("root", "."),
			file("docs/.stratus.md"),
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vs := CheckEntries(c.entries, exclude...)
			if len(vs) != len(c.bad) {
				t.Fatalf("violations %q, want %d matching %q", vs, len(c.bad), c.bad)
			}
			for i, want := range c.bad {
				if !strings.Contains(vs[i].String(), want) {
					t.Errorf("violation %d = %q, want it to say %q", i, vs[i], want)
				}
			}
		})
	}
	if vs := CheckEntries([]TreeEntry{file(".stratus/x"), link("n", ".stratus/config.yaml")}); len(vs) != 0 {
		t.Errorf("no exclude list: violations %q, want none", vs)
	}
}
