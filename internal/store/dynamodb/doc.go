// Package dynamodb is the AWS implementation of store.Store: runs, steps,
// attempts, output tails, worker handles, degradations and render sizes in one
// DynamoDB table, with large bodies in S3 by pointer (docs/architecture.md §
// Ports and their conformance suites, § Limits). It passes the one conformance
// suite in internal/store/storetest, which the SQLite store passes too; its
// tests run it against the moto server (internal/awstest).
//
// # Table design
//
// One table, prefix + "stratus" (Tables, TableName), on-demand, string
// partition key "pk" and string sort key "sk"; TTL on the Number attribute
// "ttl"; one sparse global secondary index. The SAM template declares
// exactly what Tables returns, and CreateTables creates it for tests and
// for moto or LocalStack. Items, by partition:
//
//	pk                 sk                                  record
//	runs               <created ms, 15 digits>#<run id>    the run list (ListRuns): one entry per run, newest last
//	run#<run id>       run                                 the Run ("visit_counts": true when created with visit counts; "spend_kept": true and the sums "spend_cost_usd", "spend_tokens", "spend_unpriced" when created with spend totals)
//	run#<run id>       step#<seq>                          the run's step list: tid and node of each step, seq = creation order
//	run#<run id>       visits#<node>                       the node's visit count: its highest visit "n" and that step's "tid"
//	run#<run id>       latest#<node>                       the node's last created step: its "tid" and "seq", the node's step "count" and its steps' "kinds"
//	run#<run id>       degradation#<seq>                   the run's degradations in append order
//	task#<tid>         step                                the Step, with its "seq" and the tid of its node's step before it ("prev")
//	task#<tid>         attempt#<n>                         each Attempt
//	task#<tid>         output#<n>#<seq>                    attempt n's output tail, seq = append order
//	task#<tid>         final#<n>                           attempt n's final marker (the seq of its one Final)
//	dedup#<dedup key>  dedup                               the tid of the step created for a DedupKey
//	handle#<handle>    handle                              a worker Handle; "ttl" and "ttl_bucket" (its shard) when it expires
//	agent#<agent>      render_size                         the latest RenderSize
//	tasklock#<task id> lock                                the task's lock on the stack (TaskLock): the run holding it, or the latest one
//
// Numbers in sort keys (<n>, <seq>) are zero-padded to 10 digits so that
// string order is numeric order; an attempt number outside 0..9999999999
// is EINVALID. Every read is strongly consistent: GetItem, or a Query of
// one partition (LatestAttempt is the last attempt# item; ListSteps the
// run's step list, then a BatchGetItem of the steps; CountVisits reads the
// node's visits# item; LatestSteps the run's latest# items and the steps
// they name, walking back by "prev" when a node's latest step is not the
// one asked for; NodeLatest those items and their steps, no walk;
// RecentSteps the last entry of the step list, then one Query of the
// page's range of it and a BatchGetItem of its steps), so a dispatch counting visits or a fence reading
// the latest attempt sees every write before it. The index,
// handles_by_ttl (partition "ttl_bucket" = "handle#00".."handle#15", sort "ttl", keys
// only), holds only handles with an expiry and serves Sweep alone.
//
// Times are UTC unix milliseconds (Number), absent for the zero time;
// strings that are not valid UTF-8 are stored as binary; an attribute with
// the zero value is left out, and an update removes it.
//
// # Conditional writes
//
//   - Every create (run, step, attempt, tail item, marker, handle,
//     degradation) is a put with attribute_not_exists(pk): ECONFLICT when
//     the key exists (a duplicate run, attempt or handle).
//   - CreateStep is one TransactWriteItems creating the step, its dedup
//     item and the next entry of the run's step list, and raising the
//     node's visit count to the step's visit. A canceled dedup put means
//     a redelivered dispatch: the existing step is returned with
//     created=false.
//   - CreateNextStep numbers the step: it reads the node's visit count
//     n, and the same transaction sets the count to n+1 on the condition
//     that it is still n (attribute_not_exists for a node not visited
//     yet) while it creates visit n+1. A caller whose condition failed —
//     another dispatcher, in any process, took n+1 — reads the count
//     again and numbers the next, so visits are 1, 2, … without a gap or
//     a collision however many Lambda instances dispatch one run. A run
//     created before visit counts were kept (its run item has no
//     "visit_counts") has its visits counted from its step list until
//     its next step of the node writes the count. The same transaction
//     makes the step its node's latest# (on condition that the latest is
//     still the one read, whose tid the step keeps as "prev") and counts it
//     there; LatestSteps trusts the latest# items only when their counts
//     add up to the run's step list, so a run with steps from before reads
//     its whole list as it did.
//   - AppendOutput reads the tail's last seq and creates the next item;
//     when another append took that seq it reads again and retries (a
//     jittered backoff, bounded). The sequence is thus contiguous and
//     gap-free under any concurrency. A Final is created in one
//     transaction with the attempt's final marker, which can exist once: a
//     second Final is ECONFLICT and appends nothing, and takes no seq.
//   - CompleteAttempt is one transaction: the marker, the Final, and
//     updates of the attempt and the step conditioned on their existence.
//     All or none.
//   - Updates (UpdateRun, UpdateStep, UpdateAttempt) are conditioned on
//     attribute_exists(pk): ENOTFOUND for a missing record, never an
//     upsert.
//   - A run's spend totals (RunTotals) move with its attempts' usage: a
//     write that changes an attempt's tokens or cost (CreateAttempt,
//     UpdateAttempt, CompleteAttempt) reads the usage it replaces, and one
//     transaction updates the attempt on the condition that its usage is
//     still what was read and ADDs the change to the run item on the
//     condition "spend_kept". A write whose attempt condition failed
//     reads again and retries (so does an SDK retry after a commit, which
//     then finds no change left to add); one whose run condition failed
//     (a run created before totals were kept) retries without the ADD.
//     PruneRun sets the sums to 0 with its mark.
//   - A task's lock (lock.go, not part of store.Store) is taken in the
//     transaction of the run's own write that makes it running
//     (CreateRunLocked, UpdateRunLocked): a put conditioned on the lock
//     being as read (compare and swap on its "taken" id), and, to take
//     over the lock of a run that ended without releasing it, a
//     ConditionCheck that the holder is still terminal. UnlockTask is an
//     update conditioned on the holder.
//
// Fencing (the worker API's fence) needs nothing more of the store: it
// compares the caller's attempt with LatestAttempt and the run's status,
// both read strongly consistent, and the one-Final condition is the
// backstop for two submissions of one attempt racing past it.
//
// # Idempotence under SDK retries
//
// The SDK retries a request whose response was lost; a conditional create
// that had succeeded then fails its condition. Every item a create writes
// carries "wid", a random id of that call, and every create asks for the
// existing item on failure (ReturnValuesOnConditionCheckFailure ALL_OLD):
// when its wid is the caller's own, the earlier attempt took effect and
// the call succeeds (for a transaction, as TransactWriteItems'
// ClientRequestToken does on AWS, which moto ignores). Any other existing
// item is a conflict, so two calls with equal content still conflict, as
// the interface says. Updates need no such care: they set the same values
// again.
//
// # Large bodies
//
// Output bodies over Options.SpillBytes (DefaultSpillBytes) and attempt
// prompts over Options.PromptSpillBytes (DefaultPromptSpillBytes) are
// written to Blobs under BlobKey(sha256) before the item; the item keeps
// "<name>_blob" (the key), "<name>_sha256" and "<name>_size", and reading
// checks the digest. Blobs is a two-method interface (Put, Get) so that
// this package does not depend on the S3 sink; internal/sink.Sink has its
// shape. No item exceeds MaxItemBytes (350 KB): a larger record is
// ETOOLARGE before any request.
//
// # Handles
//
// A handle with an expiry carries "ttl", its expiry in epoch seconds rounded up
// (docs/architecture.md § Limits: handles expire through DynamoDB TTL). TTL
// deletion is eventual and moto never performs it, so GetHandle returns a
// handle while its item exists, expired or not (expiry is the caller's check),
// and Sweep deletes the expired handles through the index without relying on
// TTL.
//
// # Errors
//
// ConditionalCheckFailed maps to ECONFLICT or ENOTFOUND as above, a
// missing item on a read to ENOTFOUND, and the message names the key and
// the AWS error. Throttling that outlasts the SDK's retryer wraps
// ErrThrottled (an infrastructure failure worth a later retry); anything
// else, a missing table included, is an internal error naming the AWS
// error code.
//
// # What it deliberately does not do
//
//   - It does not enforce references between records, like the SQLite
//     store: a step of an unknown run is stored.
//   - It deletes nothing but swept handles; records of finished runs stay
//     (a TTL on them is a deployment choice the interface does not make).
//   - Close releases nothing: the client belongs to the caller.
//   - Step values and the other small fields are not spilled; a record
//     over MaxItemBytes is refused instead.
package dynamodb
