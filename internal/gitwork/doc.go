// Package gitwork asks git about a work dir, for the three places Stratus
// needs to know what changed in it: the checks node's diff-based selection
// of command sets (worc configuration.md § Diff-based selection), the
// report's Changes section (docs/contracts.md § The summary artifacts: the
// report names the changed paths) and the diff variables {diff_path},
// {change_overview_path} and {diff_base} with the decomposition's subtask
// start snapshots (docs/contracts.md § Template variables).
//
// It owns one way of running git (Run: the caller's GIT_* environment
// dropped, bound to a context, git's stderr in the error) and one answer to
// "is this a git work tree": Open. A dir is not a work tree — ErrNotTree,
// with the reason — when no repository contains it, when git is not
// installed, or when the enclosing repository ignores the dir itself (a
// scratch dir under a .gitignore'd path, such as `make demo`'s
// .scratch/demo): such a dir's changes cannot be staged or listed, so
// treating it as a tree would report an empty change where there is one.
// A repository without a commit is a tree, but has no base to measure a
// change from: Head returns ErrNotTree.
//
// It never changes the repository: status runs without optional locks and
// a snapshot stages into a throwaway index (GIT_INDEX_FILE), so the
// repository's own index, HEAD and refs are never touched. It does not
// decide what a change means to a caller (which paths are Stratus's own,
// which command sets a path selects); callers pass excludes.
package gitwork
