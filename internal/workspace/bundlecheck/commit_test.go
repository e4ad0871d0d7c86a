package bundlecheck

import (
	"io"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	wt "github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// commitObject is raw as a commit object.
func commitObject(t *testing.T, raw string) plumbing.EncodedObject {
	t.Helper()
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.CommitObject)
	w, _ := o.Writer()
	if _, err := io.WriteString(w, raw); err != nil {
		t.Fatal(err)
	}
	return o
}

// readCommit reads the tree and the parents of the commits git writes as
// go-git's commit decoder does: none, one and two parents, a signed
// commit's multi-line header, a "parent" word in the message.
func TestReadCommit_ReadsWhatGitWrites(t *testing.T) {
	t.Parallel()
	r := wt.NewRepo(t)
	tree := r.Tree(wt.File("a.txt", r.Blob("a\n")))
	root := r.Commit(tree, "root")
	one := r.Commit(tree, "parent "+root+"\n\nparent in the message", root)
	two := r.Commit(tree, "merge", one, root)
	signed := r.Git([]byte("tree "+tree+"\nparent "+one+"\nauthor A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n parent "+root+"\n -----END PGP SIGNATURE-----\n\nsigned\n"),
		"hash-object", "-t", "commit", "-w", "--stdin")
	for _, id := range []string{root, one, two, strings.TrimSpace(signed)} {
		raw := r.Git(nil, "cat-file", "commit", id)
		got, err := readCommit(commitObject(t, raw))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		want, err := object.DecodeCommit(memory.NewStorage(), commitObject(t, raw))
		if err != nil {
			t.Fatal(err)
		}
		if got.TreeHash != want.TreeHash || len(got.ParentHashes) != len(want.ParentHashes) {
			t.Fatalf("%s: tree %s parents %v; go-git reads tree %s parents %v", id, got.TreeHash, got.ParentHashes, want.TreeHash, want.ParentHashes)
		}
		for i := range got.ParentHashes {
			if got.ParentHashes[i] != want.ParentHashes[i] {
				t.Fatalf("%s: parents %v; go-git reads %v", id, got.ParentHashes, want.ParentHashes)
			}
		}
	}
}

// A commit object that does not open with its tree is refused, saying so.
func TestReadCommit_RefusesACommitWithoutItsTree(t *testing.T) {
	t.Parallel()
	h := strings.Repeat("a", 40)
	for _, raw := range []string{
		"",
		"author A <a@x> 1 +0000\ntree " + h + "\n",
		"tree " + strings.ToUpper(h) + "\n",
		"tree " + h[:39] + "\n",
		"tree " + h,
	} {
		if _, err := readCommit(commitObject(t, raw)); err == nil || !strings.Contains(err.Error(), "tree line") {
			t.Errorf("%q: %v; want an error naming the tree line", raw, err)
		}
	}
}
