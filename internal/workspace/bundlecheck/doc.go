// Package bundlecheck checks a move of a run's workspace head where the
// worker API takes it, without the git CLI (the worker API's Lambda has no
// git binary), so that an engine holding a step's handle cannot put into
// the run's branch what the runner itself would refuse (docs/security.md §
// Workspace commits).
//
// It reads git bundles (v2, and v3 with the sha1 object format and no
// filter: header lines, then a packfile, thin when the bundle has
// prerequisites) with go-git into an object store in a temporary
// directory, removed on return: the base bundle's pack is indexed as it
// is; a step bundle's objects are written loose, its deltas rebuilt from
// the objects of the bundles before it. Then it checks that the uploaded
// bundle is one the workers can fetch and carries the new head (its one
// ref, under refs/, names it and its pack holds it), that the new head
// descends from the run's head through commits of one parent each, and
// that every such commit's tree passes workspace.TreeCheck with the run's
// exclude list — the rule's one owner, which the runner's git-CLI path
// and `stratus pull` apply too.
//
// Bounds (a bundle is an engine's input): each bundle is read whole into
// memory, at most Advance.MaxBytes of it; the step bundles' objects may
// inflate to at most workspace.InflateFactor × MaxBytes together, counted
// from their headers before anything is written; a commit's tree at most
// MaxEntries entries; a head move at most MaxCommits commits. Memory is
// therefore about one bundle plus go-git's caches (a delta base cache of
// 96 MiB at most); disk the base pack, its index and the step objects.
//
// It does not fetch from the network, write the sink, or move the head:
// the worker API does (worker.Service.AdvanceHead).
package bundlecheck
