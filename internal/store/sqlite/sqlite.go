package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

var _ store.Store = (*Store)(nil)

// busyTimeout is how long a statement waits for a lock held by another
// process before failing with SQLITE_BUSY.
const busyTimeout = 10 * time.Second

// Store is a store.Store backed by one SQLite file. It is safe for
// concurrent use. Create it with Open and release it with Close.
type Store struct {
	path string
	w    *sql.DB // one connection: every write, in a BEGIN IMMEDIATE transaction when it has several statements
	r    *sql.DB // read-only connections

	wq, rq *prepared // w and r with each statement prepared once
}

// Open opens the SQLite store at path, creating the file (mode 0600), its
// parent directory (mode 0700) and the schema when missing, and applying
// any pending migration. path is a file path, not a URI; it must not be
// empty, ":memory:" or contain '?'. Open fails when the file's schema is
// newer than this binary knows.
func Open(path string) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") || strings.ContainsRune(path, '?') {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "path",
			"sqlite store path %q is not usable; want a file path without '?', not empty, \":memory:\" or a file: URI", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	// Create the file ourselves so that it (and the -wal/-shm files,
	// which SQLite gives the database file's mode) is private.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}

	pragmas := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=journal_size_limit(%d)", busyTimeout.Milliseconds(), walSizeLimit)
	w, err := openDB(path + "?" + pragmas + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	ctx := context.Background()
	// Two processes opening a new file at once contend for the lock that
	// switching it to WAL takes; the busy timeout does not cover that, so
	// retry for as long as it would have waited.
	if err := retryBusy(func() error { return checkJournalMode(ctx, w) }); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	if err := retryBusy(func() error { return migrate(ctx, w) }); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}

	// The readers open after the writer has switched the file to WAL
	// (a persistent property of the file), so they need not set it.
	r, err := openDB(path + "?" + pragmas + "&_pragma=query_only(1)")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	wq, err := newPrepared(ctx, w, txStatements...)
	if err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store %s: %w", path, err)
	}
	rq, _ := newPrepared(ctx, r)
	rq.reads = true
	return &Store{path: path, w: w, r: r, wq: wq, rq: rq}, nil
}

// openDB opens a pool of connections to dsn, each in persistent-WAL mode
// (persistWAL).
func openDB(dsn string) (*sql.DB, error) {
	c, err := msqlite.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(persistWAL{c}), nil
}

// persistWAL opens connections with SQLITE_FCNTL_PERSIST_WAL set: the last
// one to close empties the -wal file (journal_size_limit) and keeps it and
// the -shm file rather than delete them. Without that, the next connection
// must create the -shm file and allocate its 32 KiB, which a disk that has
// filled up since refuses ("disk I/O error", SQLITE_IOERR_SHMSIZE): even
// `stratus status` could not read a run (docs/security.md § Output that did
// not persist). With them kept, opening the store to read allocates
// nothing.
type persistWAL struct{ driver.Connector }

func (p persistWAL) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := p.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	fc, ok := c.(msqlite.FileControl)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("the sqlite driver's connection %T has no file control", c)
	}
	if _, err := fc.FileControlPersistWAL("main", 1); err != nil {
		c.Close()
		return nil, fmt.Errorf("persist the WAL: %w", err)
	}
	return c, nil
}

// walSizeLimit is journal_size_limit, in bytes: a WAL that grew past it is
// cut back to it once checkpointed, and the last connection to close
// empties it (persistWAL). Above what the default auto-checkpoint (1000
// pages) lets the WAL reach, so that it only takes effect at that close.
const walSizeLimit = 16 << 20

// txStatements are the statements run inside a transaction on the
// writer, prepared when the store opens (newPrepared says why).
var txStatements = []string{selectStepByDedupSQL, insertStepSQL, lastVisitSQL, updateStepSQL, updateAttemptSQL, insertOutputSQL,
	selectWorkspaceSQL, updateWorkspaceSQL, insertAttemptSQL, selectUsageSQL, addTotalsSQL}

// Close closes the store's connections. It is safe to call more than once.
func (s *Store) Close() error {
	err := errors.Join(s.rq.close(), s.wq.close(), s.r.Close(), s.w.Close())
	if err != nil {
		return fmt.Errorf("close sqlite store %s: %w", s.path, err)
	}
	return nil
}

func checkJournalMode(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("read journal_mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal_mode is %q, want \"wal\" (does the file system support shared memory?)", mode)
	}
	return nil
}

// isUniqueViolation reports whether err is SQLite refusing a row because
// of a PRIMARY KEY or UNIQUE constraint (including a partial unique index).
func isUniqueViolation(err error) bool {
	var e *msqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

// rowScanner is what *sql.Row and *sql.Rows have in common.
type rowScanner interface {
	Scan(dest ...any) error
}

// millis maps a time to the stored form: UTC unix milliseconds, NULL for
// the zero time.
func millis(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

// fromMillis is the inverse of millis.
func fromMillis(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64).UTC()
}

// stored returns t as it reads back from the store.
func stored(t time.Time) time.Time {
	return fromMillis(millis(t))
}

// blob maps an optional byte slice to a nullable BLOB: NULL when empty.
func blob(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// retryBusy runs f until it does not fail with SQLITE_BUSY/LOCKED, for at
// most busyTimeout.
func retryBusy(f func() error) error {
	deadline := time.Now().Add(busyTimeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		var se *msqlite.Error
		busy := errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
		if !busy && !strings.Contains(err.Error(), "database is locked") {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// PagesRead returns how many database pages the store's connections have
// read since each opened: SQLite's page-cache hits and misses
// (sqlite3_db_status, SQLITE_DBSTATUS_CACHE_HIT and _MISS) summed over
// the writer and every reader. A request's pages read are the SQLite
// counterpart of the items a DynamoDB request reads (README.md §
// Performance): a seek reads a B-tree's depth of pages, a read of a whole
// run's rows a page per few rows. It takes every connection of each pool
// in turn, so it waits for statements running on them. Errors: the
// driver's, or ctx's.
func (s *Store) PagesRead(ctx context.Context) (int64, error) {
	var n int64
	for _, db := range []*sql.DB{s.w, s.r} {
		conns := make([]*sql.Conn, 0, db.Stats().MaxOpenConnections)
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range cap(conns) { // all of the pool's, each once
			c, err := db.Conn(ctx)
			if err != nil {
				return 0, fmt.Errorf("pages read of sqlite store %s: %w", s.path, err)
			}
			conns = append(conns, c)
			err = c.Raw(func(dc any) error {
				st, ok := dc.(msqlite.DBStatus)
				if !ok {
					return fmt.Errorf("the sqlite driver's connection %T has no status", dc)
				}
				for _, op := range []msqlite.DBStatusOp{msqlite.DBStatusCacheHit, msqlite.DBStatusCacheMiss} {
					cur, _, err := st.Status(op, false)
					if err != nil {
						return err
					}
					n += int64(cur)
				}
				return nil
			})
			if err != nil {
				return 0, fmt.Errorf("pages read of sqlite store %s: %w", s.path, err)
			}
		}
	}
	return n, nil
}
