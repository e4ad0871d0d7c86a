package workspace

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/stratusflow/stratus"
)

// The rules every tree of a run's workspace must pass (docs/security.md §
// Workspace commits). They have one owner, TreeCheck, a pure function of a
// tree's entries and the run's exclude list: Freeze and CommitStep apply
// it to the trees the git CLI lists, the worker API to the trees of an
// uploaded bundle (read without git, workspace/bundlecheck) before it
// moves a run's head, and Pull to every commit it brings back.

// Git's modes of the entries a workspace tree may hold. A gitlink
// (submodule or nested repository) is refused; anything else is not a
// mode git writes.
const (
	ModeRegular    uint32 = 0o100644
	ModeExecutable uint32 = 0o100755
	ModeSymlink    uint32 = 0o120000
	ModeTree       uint32 = 0o040000
	ModeGitlink    uint32 = 0o160000
)

// TreeEntry is one entry of a tree as the rules see it.
type TreeEntry struct {
	// Path is slash-separated from the tree's root ("a/b.txt"), each
	// component as the tree object names it.
	Path string
	// Mode is the entry's mode as the tree object stores it (ModeRegular,
	// ModeTree, ...).
	Mode uint32
	// Target is a symlink's target: its blob's content, at most
	// MaxLinkTarget+1 bytes of it. "" for any other entry.
	Target string
}

// MaxLinkTarget is the longest symlink target, bytes, a tree may hold
// (Linux's PATH_MAX less its NUL): longer, no OS can follow it.
const MaxLinkTarget = 4095

// Violation is one entry a rule refuses.
type Violation struct {
	Path   string // the entry's path
	Target string // a symlink's target; "" for other entries
	Rule   string // the rule it breaks, in words: "absolute symlink target"
}

// String is "path: rule", or "path -> target: rule" for a symlink.
func (v Violation) String() string {
	if v.Target != "" {
		return fmt.Sprintf("%s -> %s: %s", v.Path, v.Target, v.Rule)
	}
	return v.Path + ": " + v.Rule
}

// maxViolations bounds what a TreeCheck keeps: enough to name the
// problem, never a copy of a hostile tree.
const maxViolations = 20

// TreeCheck applies the workspace commit rules (docs/security.md §
// Workspace commits) to the entries of ONE tree, added one at a time in
// any order (trees included or not), so that a caller walking a large
// tree keeps only its symlinks:
//
//   - every path component is a name: not empty, ".", "..", and holds no
//     backslash (a separator on Windows);
//   - no component is ".git" in any case, nor a name a file system folds
//     into it (".git." or ".git " on NTFS, its short name "git~1", ".git"
//     with code points HFS+ ignores): a tree must never write a git dir;
//   - the mode is one git writes for a regular file, an executable, a
//     symlink or a tree; a gitlink (submodule, nested repository) is
//     refused, not flattened;
//   - a symlink's target is relative, without a backslash, at most
//     MaxLinkTarget bytes, and resolves inside the tree, outside any .git
//     and outside every Exclude path, followed through the tree's other
//     symlinks as the OS would, both on a case-sensitive file system and
//     on a case-insensitive one;
//   - nothing lies at or under an Exclude path (Stratus's own: the state
//     dir, the ctx dir), and no file or symlink stands where a dir holding
//     one is: a step may not add, change or remove Stratus's own files,
//     and the base snapshot leaves them out, so no tree of a run holds
//     one. Names are compared as a case-insensitive file system would
//     (".STRATUS" is ".stratus"), with git's NTFS and HFS+ foldings.
//
// The zero value is ready to use: it checks no exclude paths.
type TreeCheck struct {
	// Exclude lists the run's excluded paths (stratus.Workspace.Exclude,
	// WorkspaceSpec.Exclude): slash-separated from the tree's root, as
	// CleanExcludes returns them. Set it before the first Add.
	Exclude []string

	excl    [][]string        // Exclude, each split and folded (foldName): folded()
	prep    bool              // excl is set
	links   map[string]string // symlink path → target
	refused map[string]bool   // links already refused (by their target or their place)
	bad     []Violation
	dropped int // violations over maxViolations, counted
}

// Add checks e's own rules and keeps it for the link rules.
func (c *TreeCheck) Add(e TreeEntry) {
	if rule := pathRule(e.Path); rule != "" {
		c.refuse(Violation{Path: e.Path, Rule: rule})
		return
	}
	if rule := excludedRule(c.folded(), c.Exclude, e); rule != "" {
		c.refuse(Violation{Path: e.Path, Target: e.Target, Rule: rule})
		if e.Mode == ModeSymlink {
			// Kept, refused: links through it resolve where it points.
			c.keepLink(e.Path, e.Target, true)
		}
		return
	}
	switch e.Mode {
	case ModeRegular, ModeExecutable, ModeTree:
	case ModeGitlink:
		c.refuse(Violation{Path: e.Path, Rule: "a submodule or nested git repository (gitlink, mode 160000): submodules are refused, not flattened"})
	case ModeSymlink:
		// Every link is kept, a refused one too: where it points decides
		// where the links through it resolve.
		c.keepLink(e.Path, e.Target, false)
		switch t := e.Target; {
		case strings.HasPrefix(t, "/"):
			c.refuse(Violation{e.Path, t, "absolute symlink target"})
		case strings.Contains(t, `\`) || hasDrive(t):
			c.refuse(Violation{e.Path, t, "symlink target with a backslash or a drive (absolute or leaving the tree on Windows)"})
		case len(t) > MaxLinkTarget:
			c.refuse(Violation{Path: e.Path, Rule: fmt.Sprintf("symlink target over %d bytes", MaxLinkTarget)})
		default:
			return
		}
		c.keepLink(e.Path, e.Target, true)
	default:
		c.refuse(Violation{Path: e.Path, Rule: fmt.Sprintf("mode %06o is not one git writes (valid: 100644 file, 100755 executable, 120000 symlink, 040000 tree)", e.Mode)})
	}
}

// folded is Exclude, each path split and its components folded
// (foldName), computed once.
func (c *TreeCheck) folded() [][]string {
	if !c.prep {
		c.excl, c.prep = foldPaths(c.Exclude), true
	}
	return c.excl
}

// keepLink keeps the symlink at p for the link rules; refused: a rule
// already refused it, so Violations names it no more.
func (c *TreeCheck) keepLink(p, target string, refused bool) {
	if c.links == nil {
		c.links = map[string]string{}
	}
	c.links[p] = target
	if refused {
		if c.refused == nil {
			c.refused = map[string]bool{}
		}
		c.refused[p] = true
	}
}

// Violations returns what the entries added so far break, sorted by path,
// at most maxViolations of them plus a last one counting the others; none
// when the tree passes.
func (c *TreeCheck) Violations() []Violation {
	out := append([]Violation(nil), c.bad...)
	dropped := c.dropped
	r := newResolver(c.links)
	for p, t := range c.links {
		if c.refused[p] {
			continue
		}
		var rule string
		switch x := r.reachesExcluded(p, c.folded()); {
		case !r.inside(p):
			rule = "symlink resolves outside the tree"
		case r.reachesGitDir(p):
			rule = "symlink resolves into a .git dir"
		case x >= 0:
			rule = fmt.Sprintf("symlink resolves into %q, Stratus's own path (on the run's exclude list): writing through it would rewrite Stratus's files", c.Exclude[x])
		default:
			continue
		}
		if len(out) < maxViolations {
			out = append(out, Violation{p, t, rule})
		} else {
			dropped++
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if dropped > 0 {
		out = append(out, Violation{Path: "…", Rule: fmt.Sprintf("and %d more", dropped)})
	}
	return out
}

func (c *TreeCheck) refuse(v Violation) {
	if len(c.bad) < maxViolations {
		c.bad = append(c.bad, v)
	} else {
		c.dropped++
	}
}

// CheckEntries is TreeCheck over es, with exclude (cleaned, CleanExcludes)
// as its Exclude: the violations of one tree.
func CheckEntries(es []TreeEntry, exclude ...string) []Violation {
	c := TreeCheck{Exclude: exclude}
	for _, e := range es {
		c.Add(e)
	}
	return c.Violations()
}

// RulesError is the error of a tree that broke the rules: code and field
// as the caller says, the message "<what> breaks the workspace commit
// rules (docs/security.md § Workspace commits): <path>: <rule>; ..." and
// then hint. nil when vs is empty.
func RulesError(code, field, what string, vs []Violation, hint string) error {
	if len(vs) == 0 {
		return nil
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	msg := fmt.Sprintf("%s breaks the workspace commit rules (docs/security.md § Workspace commits): %s", what, strings.Join(parts, "; "))
	if hint != "" {
		msg += "; " + hint
	}
	return stratus.FieldErrorf(code, field, "%s", msg)
}

// pathRule is the rule p's components break, or "".
func pathRule(p string) string {
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "" || c == "." || c == "..":
			return fmt.Sprintf("path component %q is not a name", c)
		case strings.ContainsRune(c, '\\'):
			return "path holds a backslash (a separator on Windows)"
		case strings.ContainsRune(c, 0):
			return "path holds a NUL byte"
		case IsDotGit(c):
			return fmt.Sprintf("path component %q is a git dir (.git in any case or spelling a file system folds to it)", c)
		}
	}
	return ""
}

// IsDotGit reports whether a path component names a git dir on some file
// system: ".git" in any case, with trailing dots or spaces or an NTFS
// stream (":..."), as the NTFS short name "git~1", or with code points
// HFS+ ignores (git's is_hfs_dotgit and is_ntfs_dotgit).
func IsDotGit(c string) bool {
	c = foldName(c)
	return c == ".git" || c == "git~1"
}

// foldName is the name a path component opens on the most lenient file
// system: without the code points HFS+ ignores, lower-cased (macOS's and
// Windows's defaults), without an NTFS stream (":...") and without the
// trailing dots and spaces NTFS drops.
func foldName(c string) string {
	c = strings.Map(func(r rune) rune {
		if hfsIgnored(r) {
			return -1
		}
		return r
	}, c)
	c = strings.ToLower(c)
	if i := strings.IndexByte(c, ':'); i >= 0 {
		c = c[:i]
	}
	return strings.TrimRight(c, ". ")
}

// foldPaths splits each slash-separated path and folds its components
// (foldName).
func foldPaths(ps []string) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = foldComponents(strings.Split(path.Clean(p), "/"))
	}
	return out
}

func foldComponents(cs []string) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = foldName(c)
	}
	return out
}

// hasPrefix reports whether the components p start with those of x.
func hasPrefix(p, x []string) bool {
	if len(p) < len(x) {
		return false
	}
	for i := range x {
		if p[i] != x[i] {
			return false
		}
	}
	return true
}

// excludedIndex is the index in excl (folded exclude paths) of the one p
// (folded components) lies at or under, or -1.
func excludedIndex(excl [][]string, p []string) int {
	for i, x := range excl {
		if hasPrefix(p, x) {
			return i
		}
	}
	return -1
}

// excludedRule is the rule e breaks against the exclude paths (excl
// folded, names as given), or "": it lies at or under one, or it is a
// file or symlink where a dir holding one must be.
func excludedRule(excl [][]string, names []string, e TreeEntry) string {
	if len(excl) == 0 {
		return ""
	}
	p := foldComponents(strings.Split(e.Path, "/"))
	if i := excludedIndex(excl, p); i >= 0 {
		return fmt.Sprintf("inside %q, Stratus's own path (on the run's exclude list: its state dir, the ctx dir): a step may not add, change or remove anything there", names[i])
	}
	if e.Mode == ModeTree {
		return ""
	}
	for i, x := range excl {
		if hasPrefix(x, p) {
			return fmt.Sprintf("a file or symlink where the dir holding %q, Stratus's own path (on the run's exclude list), must be", names[i])
		}
	}
	return ""
}

// hfsIgnored reports the code points HFS+ drops when comparing names
// (git's utf8.c next_hfs_char).
func hfsIgnored(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

// hasDrive reports a Windows drive prefix ("C:").
func hasDrive(s string) bool {
	return len(s) >= 2 && s[1] == ':' && (s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// resolver follows a tree's symlinks as the OS would, names compared as
// given or, folded, case-insensitively (macOS's and Windows's default
// file systems). Lexical cleaning alone is not enough: with s -> ".",
// "s/.." leaves the tree although it cleans to ".".
type resolver struct {
	links  map[string]string // path → target
	folded map[string]string // lower-cased path → target
}

func newResolver(links map[string]string) *resolver {
	r := &resolver{links: links, folded: make(map[string]string, len(links))}
	for p, t := range links {
		r.folded[strings.ToLower(p)] = t
	}
	return r
}

// inside reports whether the symlink at link resolves inside the tree,
// both with names as given and folded. A loop never leaves: it resolves
// nowhere.
func (r *resolver) inside(link string) bool {
	_, in := r.resolve(link, false)
	_, inFolded := r.resolve(link, true)
	return in && inFolded
}

// reachesGitDir reports whether the symlink at link resolves, inside the
// tree, through a component that names a git dir: a link to .git/config
// lets whoever writes through it rewrite a repository's configuration.
func (r *resolver) reachesGitDir(link string) bool {
	for _, fold := range []bool{false, true} {
		if p, inside := r.resolve(link, fold); inside {
			for _, c := range p {
				if IsDotGit(c) {
					return true
				}
			}
		}
	}
	return false
}

// reachesExcluded is the index in excl (folded exclude paths) of the one
// the symlink at link resolves, inside the tree, at or under, or -1: a
// link to .stratus/config.yaml lets whoever writes through it rewrite
// Stratus's configuration.
func (r *resolver) reachesExcluded(link string, excl [][]string) int {
	if len(excl) == 0 {
		return -1
	}
	for _, fold := range []bool{false, true} {
		if p, inside := r.resolve(link, fold); inside {
			if i := excludedIndex(excl, foldComponents(p)); i >= 0 {
				return i
			}
		}
	}
	return -1
}

// maxResolveSteps bounds the path components one resolution walks (40
// hops of links with long targets could make it millions); a link
// needing more is taken as leaving the tree.
const maxResolveSteps = 1 << 14

// resolve follows the symlink at link and returns the components of the
// path it reaches and whether that path is inside the tree.
func (r *resolver) resolve(link string, fold bool) ([]string, bool) {
	lookup := func(cur []string) (string, bool) {
		k := strings.Join(cur, "/")
		if fold {
			t, ok := r.folded[strings.ToLower(k)]
			return t, ok
		}
		t, ok := r.links[k]
		return t, ok
	}
	var cur []string
	if d := path.Dir(link); d != "." {
		cur = strings.Split(d, "/")
	}
	pending := strings.Split(r.links[link], "/")
	for hops, steps := 0, 0; len(pending) > 0; steps++ {
		if steps > maxResolveSteps {
			return nil, false // a tangle built to cost: refused as leaving
		}
		c := pending[0]
		pending = pending[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, false
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		t, ok := lookup(cur)
		if !ok {
			continue
		}
		if hops++; hops > 40 {
			return nil, true // ELOOP: the link resolves nowhere
		}
		if strings.HasPrefix(t, "/") {
			return nil, false
		}
		cur = cur[:len(cur)-1]
		pending = append(strings.Split(t, "/"), pending...)
	}
	return cur, true
}
