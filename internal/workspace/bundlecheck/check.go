package bundlecheck

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/workspace"
)

// MaxCommits bounds the commits one head move may bring: a step brings
// one.
const MaxCommits = 1000

// MaxEntries bounds the entries of one commit's tree, subtrees counted
// with their entries each time they appear: a tree naming one subtree
// twice at each of thirty levels has a billion.
const MaxEntries = 1 << 21

// maxDepth bounds how deep a tree nests.
const maxDepth = 1024

// Checker checks head moves (worker.CommitChecker). The zero value is
// ready to use.
type Checker struct {
	// TempDir is where each check keeps its objects, in a directory of its
	// own removed on return; "" = os.TempDir().
	TempDir string
}

// CheckAdvance checks a: it loads a.Bundles from a.Sink and then a.Upload,
// and checks that a.Upload is a step bundle the workers can fetch — one
// ref, a well-formed name under refs/, naming a.To, which its pack holds
// (stepRef) — that a.To descends from a.From by commits of one parent
// each (at most MaxCommits), and that the tree of each of them passes
// workspace.TreeCheck with a.Exclude (docs/security.md § Workspace
// commits).
//
// Errors: EUNPROCESSABLE naming the bundle, the commit, the paths and the
// rules (an unreadable, truncated or thin-without-its-base bundle, refs
// the workers cannot use, a commit missing, a tree breaking the rules or
// touching an excluded path, a move that is not a descent); EINVALID for
// a.From or a.To that is not a commit id or a.To == a.From, or a
// malformed a.Exclude; ETOOLARGE for a bundle over a.MaxBytes or bundles inflating to
// more than workspace.InflateFactor × a.MaxBytes; the sink's errors and
// local I/O errors (ENOSPACE for a full disk) as they are.
func (c Checker) CheckAdvance(ctx context.Context, a workspace.Advance) error {
	for field, v := range map[string]string{"from": a.From, "to": a.To} {
		if !isSHA(v) {
			return stratus.FieldErrorf(stratus.EINVALID, field, "%q is not a commit id; valid: 40 lowercase hex digits", v)
		}
	}
	exclude, err := workspace.CleanExcludes(a.Exclude)
	if err != nil {
		return err
	}
	if a.From == a.To {
		return stratus.FieldErrorf(stratus.EINVALID, "to", "%s is the run's head already; a step that changed nothing advances nothing", a.To)
	}
	if len(a.Bundles) == 0 {
		return stratus.FieldErrorf(stratus.EINVALID, "bundles", "no bundle holds the run's head %s", a.From)
	}
	max := a.MaxBytes
	if max <= 0 {
		max = workspace.DefaultMaxBytes
	}
	dir, err := os.MkdirTemp(c.TempDir, "stratus-bundlecheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(8*cache.MiByte))
	defer st.Close()

	l := &loader{st: st, budget: workspace.InflateFactor * max, max: max}
	for i, key := range a.Bundles {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := a.Sink.GetMax(ctx, key, workspace.BundleReadMax(max))
		if err != nil {
			return err
		}
		if _, err := l.load("bundle "+key, data, i == 0, false); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if int64(len(a.Upload)) > workspace.BundleReadMax(max) {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "bundle", "the uploaded bundle is %d bytes, over the cap of %d (config.yaml limits.max_snapshot_bytes)", len(a.Upload), workspace.BundleReadMax(max))
	}
	up, err := l.load("the uploaded bundle", a.Upload, false, true)
	if err != nil {
		return err
	}
	to, from := plumbing.NewHash(a.To), plumbing.NewHash(a.From)
	if err := stepRef(up.refs, a.To, a.From); err != nil {
		return err
	}
	if !up.objects[to] {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to",
			"the uploaded bundle does not carry commit %s: it names it in its ref but does not hold it in its pack; %s", a.To, validStepBundle(a.From))
	}
	return walk(ctx, st, from, to, exclude)
}

// validStepBundle says what a valid step bundle is, for an error.
func validStepBundle(from string) string {
	return "a valid step bundle lists exactly one ref, a well-formed name under refs/ (refs/heads/step, refs/stratus/head) naming the new head, and holds that commit in its pack: " +
		"git bundle create FILE refs/heads/step ^" + from + " (docs/security.md § Workspace commits); the workers and stratus pull fetch refs/* from it, so HEAD or any other name is never fetched"
}

// stepRef checks the refs of an uploaded bundle's header (docs/security.md
// § Workspace commits): what the workers fetch from it (Materialize,
// `+refs/*:...`) and pull must bring the new head to, and nothing that
// fails their fetch. Exactly one ref, then: a well-formed name under
// refs/ (git check-ref-format) naming to. HEAD alone is not fetched; a
// second ref may share the first one's name (the last wins), stand where
// its dir would be (refs/x and refs/x/y), or name an object no bundle
// holds (the fetch fails). Errors: EUNPROCESSABLE saying what a valid
// step bundle is.
func stepRef(refs []ref, to, from string) error {
	bad := func(format string, args ...any) error {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "bundle", "the uploaded bundle %s; %s", fmt.Sprintf(format, args...), validStepBundle(from))
	}
	switch {
	case len(refs) == 0:
		return bad("lists no ref")
	case len(refs) > 1:
		names := make([]string, 0, 4)
		for i, r := range refs {
			if i == 3 {
				names = append(names, "…")
				break
			}
			names = append(names, strconv.Quote(clip(r.name)))
		}
		return bad("lists %d refs (%s)", len(refs), strings.Join(names, ", "))
	}
	r := refs[0]
	if !strings.HasPrefix(r.name, "refs/") || plumbing.ReferenceName(r.name).Validate() != nil {
		return bad("names its commit in ref %q, which is not a well-formed name under refs/: the workers would not fetch it", clip(r.name))
	}
	if r.hash.String() != to {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", "the uploaded bundle does not carry commit %s: its ref %s names %s; %s", to, r.name, r.hash, validStepBundle(from))
	}
	return nil
}

// loader loads bundles, in order, into one object store.
type loader struct {
	st     *filesystem.Storage
	budget int64 // bytes the step bundles' objects may still inflate to
	max    int64
}

// loaded is what load read of a bundle.
type loaded struct {
	refs    []ref
	objects map[plumbing.Hash]bool // the pack's objects, when asked for
}

// load adds the objects of the bundle data (what, in errors) to the
// store. A trusted bundle (the base, frozen on the operator's side) with
// no prerequisites is indexed as a pack; any other is counted against the
// inflate budget first and parsed object by object, its deltas on earlier
// bundles' objects resolved from the store. With hashes, the pack's
// objects are listed.
func (l *loader) load(what string, data []byte, trusted, hashes bool) (*loaded, error) {
	bad := func(format string, args ...any) error {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "bundle", "%s is not a readable git bundle: %s", what, fmt.Sprintf(format, args...))
	}
	h, err := parseHeader(data)
	if err != nil {
		return nil, bad("%v", err)
	}
	for _, p := range h.prereqs {
		if l.st.HasEncodedObject(p) != nil {
			return nil, stratus.FieldErrorf(stratus.EUNPROCESSABLE, "bundle",
				"%s needs commit %s, which none of the run's bundles before it holds; make it on top of the run's head (git bundle create FILE <ref> ^<head>)", what, p)
		}
	}
	pack := data[h.pack:]
	out := &loaded{refs: h.refs}
	if trusted && len(h.prereqs) == 0 && !hashes {
		w, err := l.st.PackfileWriter()
		if err != nil {
			return nil, err
		}
		if _, err := io.Copy(w, bytes.NewReader(pack)); err != nil {
			w.Close()
			return nil, l.packError(what, err)
		}
		if err := w.Close(); err != nil {
			return nil, l.packError(what, err)
		}
		return out, nil
	}
	if !trusted {
		if err := l.spend(what, pack); err != nil {
			return nil, err
		}
	}
	var obs []packfile.Observer
	if hashes {
		seen := observer{}
		out.objects = seen
		obs = append(obs, seen)
	}
	p, err := packfile.NewParserWithStorage(packfile.NewScanner(bytes.NewReader(pack)), l.st, obs...)
	if err != nil {
		return nil, err
	}
	if _, err := p.Parse(); err != nil {
		return nil, l.packError(what, err)
	}
	return out, nil
}

// packError is err from reading a bundle's pack: a local I/O failure as
// it is (the machine's fault), anything else EUNPROCESSABLE (the bundle's).
func (l *loader) packError(what string, err error) error {
	var errno syscall.Errno
	var pe *fs.PathError
	if errors.As(err, &errno) || errors.As(err, &pe) {
		return err
	}
	return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "bundle", "%s is not a readable git bundle: its pack: %v", what, err)
}

// spend counts what pack's objects inflate to — each object's size, and
// for a delta also the size of what it rebuilds — against the budget,
// reading object headers and the first bytes of each delta only as far
// as the budget allows, so that a bundle built to inflate without end is
// refused before its objects are written.
func (l *loader) spend(what string, pack []byte) error {
	over := func() error {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "bundle",
			"%s inflates to more than the %d bytes the run's step bundles may hold together (%d × config.yaml limits.max_snapshot_bytes)",
			what, workspace.InflateFactor*l.max, workspace.InflateFactor)
	}
	s := packfile.NewScanner(bytes.NewReader(pack))
	_, n, err := s.Header()
	if err != nil {
		return l.packError(what, err)
	}
	for i := uint32(0); i < n; i++ {
		oh, err := s.NextObjectHeader()
		if err != nil {
			return l.packError(what, err)
		}
		if l.budget -= oh.Length; l.budget < 0 {
			return over()
		}
		var head prefix
		w := io.Writer(io.Discard)
		if oh.Type.IsDelta() {
			w = &head
		}
		if _, _, err := s.NextObject(w); err != nil {
			return l.packError(what, err)
		}
		if oh.Type.IsDelta() {
			// A delta opens with the sizes of its base and of its result,
			// each a little-endian base-128 number.
			_, k := binary.Uvarint(head.b)
			if k <= 0 {
				return l.packError(what, fmt.Errorf("a delta at offset %d has no size header", oh.Offset))
			}
			size, k2 := binary.Uvarint(head.b[k:])
			if k2 <= 0 {
				return l.packError(what, fmt.Errorf("a delta at offset %d has no size header", oh.Offset))
			}
			if size > uint64(l.budget) {
				return over()
			}
			l.budget -= int64(size)
		}
	}
	return nil
}

// prefix keeps the first bytes written to it.
type prefix struct{ b []byte }

func (p *prefix) Write(b []byte) (int, error) {
	if n := 32 - len(p.b); n > 0 {
		p.b = append(p.b, b[:min(n, len(b))]...)
	}
	return len(b), nil
}

// observer lists the objects of a pack as the parser hashes them.
type observer map[plumbing.Hash]bool

func (observer) OnHeader(uint32) error                                          { return nil }
func (observer) OnInflatedObjectHeader(plumbing.ObjectType, int64, int64) error { return nil }
func (o observer) OnInflatedObjectContent(h plumbing.Hash, _ int64, _ uint32, _ []byte) error {
	o[h] = true
	return nil
}
func (observer) OnFooter(plumbing.Hash) error { return nil }

// walk checks the commits from to back to from, by first parent: each
// has one parent, and a tree that passes the rules with exclude.
func walk(ctx context.Context, st *filesystem.Storage, from, to plumbing.Hash, exclude []string) error {
	cur := to
	for n := 0; cur != from; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if n == MaxCommits {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to",
				"commit %s does not reach the run's head %s within %d commits; a step brings one commit on top of the head", to, from, MaxCommits)
		}
		obj, err := st.EncodedObject(plumbing.CommitObject, cur)
		if err != nil {
			return missing(err, "commit %s (on the way from %s to the run's head %s) is in none of the run's bundles nor the uploaded one", cur, to, from)
		}
		c, err := readCommit(obj)
		if err != nil {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", "commit %s cannot be read: %v", cur, err)
		}
		if len(c.ParentHashes) != 1 {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to",
				"commit %s has %d parents; the commits a step brings have one each, and lead back to the run's head %s (%s does not descend from it)",
				cur, len(c.ParentHashes), from, to)
		}
		vs, err := treeViolations(ctx, st, c.TreeHash, exclude)
		if err != nil {
			return err
		}
		if err := workspace.RulesError(stratus.EUNPROCESSABLE, "to", fmt.Sprintf("commit %s", cur), vs,
			"the head stays at "+from.String()); err != nil {
			return err
		}
		cur = c.ParentHashes[0]
	}
	return nil
}

// missing is the EUNPROCESSABLE error of an object not found, or err as it
// is when it is something else.
func missing(err error, format string, args ...any) error {
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", format, args...)
	}
	return err
}

// treeViolations walks the tree root, every entry given to a
// workspace.TreeCheck (Exclude: exclude) with its mode as the tree object
// stores it and, for a symlink, its target; every blob must be in the
// store.
func treeViolations(ctx context.Context, st *filesystem.Storage, root plumbing.Hash, exclude []string) ([]workspace.Violation, error) {
	tc := workspace.TreeCheck{Exclude: exclude}
	entries := 0
	var walkTree func(prefix string, h plumbing.Hash, depth int) error
	walkTree = func(prefix string, h plumbing.Hash, depth int) error {
		if depth > maxDepth {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", "the tree nests deeper than %d dirs at %s", maxDepth, prefix)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		obj, err := st.EncodedObject(plumbing.TreeObject, h)
		if err != nil {
			return missing(err, "tree %s (%s) is in none of the bundles", h, orRoot(prefix))
		}
		es, err := readTree(obj)
		if err != nil {
			return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", "tree %s (%s) is malformed: %v", h, orRoot(prefix), err)
		}
		for _, e := range es {
			if entries++; entries > MaxEntries {
				return stratus.FieldErrorf(stratus.EUNPROCESSABLE, "to", "the tree has more than %d entries", MaxEntries)
			}
			te := workspace.TreeEntry{Path: path.Join(prefix, e.name), Mode: e.mode}
			switch e.mode {
			case workspace.ModeSymlink:
				if te.Target, err = readTarget(st, e.hash); err != nil {
					return missing(err, "the blob %s of symlink %s is in none of the bundles", e.hash, te.Path)
				}
			case workspace.ModeRegular, workspace.ModeExecutable:
				if err := st.HasEncodedObject(e.hash); err != nil {
					return missing(err, "the blob %s of %s is in none of the bundles", e.hash, te.Path)
				}
			}
			tc.Add(te)
			if e.mode == workspace.ModeTree {
				if err := walkTree(te.Path, e.hash, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walkTree("", root, 0); err != nil {
		return nil, err
	}
	return tc.Violations(), nil
}

func orRoot(p string) string {
	if p == "" {
		return "the root"
	}
	return p
}

// rawEntry is one entry of a tree object as stored.
type rawEntry struct {
	mode uint32
	name string
	hash plumbing.Hash
}

// readTree parses a tree object ("<octal mode> <name>\0<20-byte id>"...)
// itself, so that the rules see the mode as stored (go-git, like git,
// would hand back a canonical one) and a name holding a slash is refused
// rather than read as a path.
func readTree(obj plumbing.EncodedObject) ([]rawEntry, error) {
	r, err := obj.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, obj.Size()))
	if err != nil {
		return nil, err
	}
	var es []rawEntry
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 || sp > 7 {
			return nil, fmt.Errorf("an entry has no mode")
		}
		mode, err := strconv.ParseUint(string(b[:sp]), 8, 32)
		if err != nil {
			return nil, fmt.Errorf("mode %q is not octal", b[:sp])
		}
		b = b[sp+1:]
		nul := bytes.IndexByte(b, 0)
		if nul < 0 || len(b) < nul+1+20 {
			return nil, fmt.Errorf("an entry is cut short")
		}
		name := string(b[:nul])
		if name == "" || bytes.IndexByte(b[:nul], '/') >= 0 {
			return nil, fmt.Errorf("entry name %q is empty or holds a slash", name)
		}
		var h plumbing.Hash
		copy(h[:], b[nul+1:nul+21])
		es = append(es, rawEntry{mode: uint32(mode), name: name, hash: h})
		b = b[nul+21:]
	}
	return es, nil
}

// maxCommitHead bounds what is read of a commit object, bytes.
const maxCommitHead = 64 << 10

// rawCommit is what the check reads of a commit object.
type rawCommit struct {
	TreeHash     plumbing.Hash
	ParentHashes []plumbing.Hash
}

// readCommit parses the header of a commit object itself, as git's
// parse_commit_buffer reads it (gitformat-commit: "tree <id>" first, then
// one "parent <id>" line per parent; the lines after them — author,
// committer, signatures, the message — are not the check's): the tree and
// the parents are all the check needs, and go-git's commit decoder would
// link an OpenPGP implementation into every binary that checks a bundle
// (README.md § Performance). Errors say what is malformed.
func readCommit(obj plumbing.EncodedObject) (rawCommit, error) {
	var c rawCommit
	r, err := obj.Reader()
	if err != nil {
		return c, err
	}
	defer r.Close()
	// The tree line and the parent lines come first; a commit with more
	// parents than fit in maxCommitHead is refused all the same (it has
	// more than one).
	b, err := io.ReadAll(io.LimitReader(r, min(obj.Size(), maxCommitHead)))
	if err != nil {
		return c, err
	}
	line := func(key string) (plumbing.Hash, bool) {
		rest, ok := bytes.CutPrefix(b, []byte(key+" "))
		if !ok || len(rest) < 41 || rest[40] != '\n' || !isSHA(string(rest[:40])) {
			return plumbing.Hash{}, false
		}
		b = rest[41:]
		return plumbing.NewHash(string(rest[:40])), true
	}
	tree, ok := line("tree")
	if !ok {
		return c, fmt.Errorf("it does not open with a tree line (\"tree <40 hex digits>\")")
	}
	c.TreeHash = tree
	for {
		p, ok := line("parent")
		if !ok {
			break
		}
		c.ParentHashes = append(c.ParentHashes, p)
	}
	return c, nil
}

// readTarget is a symlink blob's content, at most MaxLinkTarget+1 bytes
// of it (TreeCheck refuses a longer one).
func readTarget(st *filesystem.Storage, h plumbing.Hash) (string, error) {
	obj, err := st.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return "", err
	}
	r, err := obj.Reader()
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, workspace.MaxLinkTarget+1))
	return string(b), err
}
