// Package sink defines where the projection writes the files a worker's
// output becomes (docs/contracts.md § Files are the server's job): a flat key
// space of slash-separated relative paths, each holding one opaque byte
// string.
//
// It owns the Sink interface and the one key rule every implementation
// enforces (CheckKey), so a key refused by one sink is refused by all, and
// where a run's work-dir files go (ForRun, RunKey): a sink the runs of
// many work dirs share (RunKeyed: a stack's bucket) keeps each run's under
// the run; a work dir's own sink is the work dir.
// Implementations live in subpackages: fs (a directory on the local disk)
// and s3 (objects under a prefix of an S3 bucket). sinktest holds the conformance
// suite every implementation must pass.
//
// It does not know about front matter, part names, placements or task ids:
// that is internal/projection. It never interprets the bytes it stores.
package sink
