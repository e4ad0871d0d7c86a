// Package projection materializes what a worker submitted into the files
// the next step reads (docs/contracts.md § Files are the server's job): the
// final body as <ctx-dir>/<step>.md wrapped in round-trippable YAML front
// matter, and each staged part raw and verbatim as <ctx-dir>/<name>.
//
// It owns the front-matter format (Encode / Decode, exact inverses), the
// part-name rule (CheckPartName: a plain, NFKC-stable file name, per
// docs/contracts.md § The shape, testdata/cases/partnames and
// docs/security.md § Part names), which the artifact route, the runner's
// client and the fold apply too, the placement of the ctx dir (CtxDir,
// default "workspace/tasks/{task_id}/ctx") and the write itself (Project),
// which skips a part with a bad name fail-open (SkippedParts reports those
// for the caller to log).
//
// It does not fold values for the flow (internal/fold), store the
// data-plane copy of parts (the store's output tail), resolve work_dir or
// project_root (the caller picks the sink's root), or decide what a
// failed write means for the step (fail-open WARN or check_policy: strict
// is the caller's policy).
package projection
