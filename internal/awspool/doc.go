// Package awspool is the task pool of a stack (README.md § Task pool;
// docs/architecture.md § The task pool): what `stratus submit --target aws`
// queues and what the claim function (functions/claim) runs, with no
// operator machine on.
//
// A queued task is two things in the stack's bucket, under its prefix: its
// file at tasks/pending/<file>, as worc's pool keeps it on disk, and the
// run `stratus submit` prepared for it at pool/prepared/<task_id>.json (the
// run checked, compiled, its environment and workspace frozen and its state
// machine created, as `stratus run --target aws` does before it starts the
// execution). The claim (Pool.Tick) decides with the embedded watcher's
// rules (taskpool.Decide: queue, priority, depends_on), takes each task it
// starts with a conditional write in DynamoDB (dynamodb.Store.ClaimPoolTask:
// a task is claimed once), records its run holding the task's lock and
// starts its execution (Launch), at most MaxConcurrent at a time. When a
// claimed task's run has ended, a later claim moves its file to
// tasks/done/ or tasks/failed/ beside <id>.summary.md and releases the
// claim, which frees its slot.
package awspool
