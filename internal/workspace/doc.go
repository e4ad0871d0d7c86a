// Package workspace carries a run's repository — its workspace — between
// the operator's machine and the workers that cannot see its disk
// (../shared/DESIGN.md § Workspaces: the repository travels with the run).
// What travels is git bundles, nothing else:
//
//   - Freeze snapshots the operator's work dir — tracked and
//     untracked files, .gitignore honoured, Stratus's own paths excluded —
//     into ONE parentless commit and writes a full bundle of it: the base.
//     Its message names the paths the repository did not track
//     (Stratus-Untracked trailers). The engines see those files; the
//     branch never carries them (README § Workspaces).
//     The operator's repository is read, never written: the snapshot is
//     staged in a throwaway git dir that borrows the repository's objects
//     through objects/info/alternates and a copy of its index.
//   - Materialize makes a fresh dir a detached checkout of the run's head
//     from the base bundle and the step bundles, in order.
//   - CommitStep turns a workspace-writing step's changes into
//     one commit on top of the run's head and an incremental bundle
//     (parent..commit) that the next worker fetches after the others.
//   - Pull brings the run back into the operator's repository
//     as a branch on top of the commit the operator had checked out: first
//     the tracked files' changes that were uncommitted when the run
//     started (untracked files left out), then one commit per step, each
//     with exactly that step's change.
//
// The size limit is checked where content enters a bundle: a snapshot larger
// than its cap is refused (ETOOLARGE, naming the biggest paths). The
// workspace commit rules (docs/security.md § Workspace commits: no .git
// component in any spelling, only the modes git writes, no gitlink —
// submodules are refused, not flattened — no symlink that is absolute, leaves
// the tree or reaches into a .git dir or one of the run's excluded paths, and
// nothing at or under an excluded path: Stratus's own state dir and ctx dir)
// have one owner, TreeCheck, a pure function of a tree's entries and the
// run's exclude list, applied by Freeze and CommitStep (EINVALID), by Pull to
// every commit it brings back (EUNPROCESSABLE), and by the worker API to
// every head move (workspace/bundlecheck, which reads bundles without git).
// Symlinks inside the tree stay symlinks; binary files travel as they are.
//
// ReadWorkDir stamps the operator's work dir, so that the worker service
// can tell, with workspace: worktree, whether an engine wrote there
// instead of in its own checkout (docs/security.md § Workspace commits).
//
// Every commit Stratus makes is authored by AuthorName <AuthorEmail>, and
// git runs with the operator's hooks, commit signing and autocrlf turned
// off, so a machine's git configuration cannot change what a commit holds.
//
// It does not upload or download bundles (callers move the files), advance
// the run's workspace head in the store, or compute {diff_path} (gitwork's
// Snapshot does, against the base commit).
package workspace
