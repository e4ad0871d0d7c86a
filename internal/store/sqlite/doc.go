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
// companions next to it while the store is open, path-wal and path-shm
// (write-ahead log mode); copy or delete the three together. The file holds
// these tables:
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
// separate write. A busy timeout covers a second process (the CLI reading
// state while `stratus serve` writes).
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
