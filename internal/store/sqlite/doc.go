// Package sqlite is the embedded implementation of store.Store: the
// default persistence of local mode (DESIGN.md § The path of one step,
// "an embedded store replaces DynamoDB"). It owns the SQLite schema, its
// migrations and the mapping between the domain types of package stratus
// and rows. It passes the one conformance suite in
// internal/store/storetest, which the DynamoDB implementation runs too.
//
// # File layout
//
// Open(path) uses one SQLite database file, normally DIR/.stratus/<name>.db,
// created with mode 0600 (it holds task tokens and worker handles) inside
// a directory created with mode 0700 when missing. SQLite keeps two
// companions next to it, path-wal and path-shm (write-ahead log mode),
// which stay when the store closes, the WAL emptied: the next Open then
// allocates nothing, so a reader opens the store on a disk that has filled
// up since (docs/security.md § Output that did not persist). Copy or
// delete the three together. The file holds these tables:
//
//	schema_version  one row: the number of migrations applied
//	runs            one row per Run, keyed by id
//	steps           one row per Step, keyed by tid; the rowid is the
//	                creation order; a unique index on dedup_key (when not
//	                empty) makes CreateStep idempotent
//	attempts        one row per Attempt, keyed by (tid, n)
//	outputs         the output tails, keyed by (tid, attempt, seq); a partial
//	                unique index allows one kind='final' row per attempt
//	handles         one row per worker Handle, keyed by the handle string
//
// Times are stored as UTC unix milliseconds (INTEGER); the zero time.Time
// is stored as NULL and read back as the zero time.Time, every other time
// comes back in UTC truncated to the millisecond. Every table is STRICT.
//
// # Concurrency
//
// Writes go through one connection, so writers in this process queue in Go
// rather than in SQLite's busy handler; reads use a separate pool of
// read-only connections that WAL lets run beside the writer. Every
// conditional write is decided by the database in one statement or one
// BEGIN IMMEDIATE transaction (a unique index, a partial unique index,
// MAX(seq)+1 computed inside the INSERT), never by a read followed by a
// separate write. CreateNextStep numbers a node's next visit inside its
// BEGIN IMMEDIATE transaction (the node's highest visit, one seek of
// steps_run_node_visit, then the insert): the write lock held from the
// read to the commit is the condition on the count, for every process
// writing the file, so no table of counts is needed. A busy timeout
// covers a second process (the CLI reading state while `stratus serve`
// writes).
//
// Every statement text is prepared once per connection and kept for the
// life of the store (prepared.go): on the submit path parsing the SQL
// cost more than running it (README.md § Performance). The statements a
// transaction runs are prepared when the store opens, since the transaction
// holds the writer's one connection.
//
// A large output body is written to its blob file before the write
// transaction begins, so one submit's 64 KiB never holds the writer.
// LatestSteps seeks each (node, kind) of a run in an index rather than
// reading the run's steps: its cost does not grow with the run.
//
// # Durability
//
// The writer runs with journal_mode=WAL and synchronous=NORMAL: a commit
// is appended to the WAL, which is synced to disk at each checkpoint, not
// at each commit. A committed write — a submit answered 200, a step
// created — survives the crash or kill of any process, Stratus included,
// since the WAL is in the operating system's cache the moment the commit
// returns. A crash of the operating system itself or a power loss can
// undo the commits since the last checkpoint (never corrupt the file:
// WAL replays whole transactions or none). That is accepted because the
// embedded store promises what DESIGN.md § Runs asks of it — a run
// survives the process that started it — and nothing more: the blob
// files and the projection files a submit writes beside it are not
// synced either (an fsync per file would cost more than the whole
// submit), so synchronous=FULL would not make a submit survive a power
// loss, only slower. The submit benchmark's anchor writes its file
// without fsync for the same reason (internal/httpapi bench_test.go).
//
// # What it deliberately does not do
//
//   - It does not enforce references between tables (a step whose run does
//     not exist, a handle whose attempt does not exist): the port does not
//     document it and DynamoDB cannot enforce it, so the two
//     implementations behave alike. Foreign-key enforcement is switched
//     on for every connection so that a later migration can add them.
//   - It does not expire handles (GetHandle returns an expired handle; the
//     caller checks ExpiresAt) and deletes nothing.
//   - It does not validate domain values (statuses, kinds, handle format):
//     that is the caller's job; the store persists what it is given.
//   - It does not spill large bodies anywhere: an output body of any size
//     is one BLOB.
package sqlite
