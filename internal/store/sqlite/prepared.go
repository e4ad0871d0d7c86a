package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// maxPrepared bounds the statements one pool keeps prepared; the store
// issues a few dozen distinct texts, so the bound only guards against a
// query built from unbounded input.
const maxPrepared = 256

// prepared runs statements on one pool (the writer or the readers), each
// text prepared once and kept (README.md § Performance: parsing a statement
// cost more than running it on the submit path). database/sql prepares a kept
// statement again on each connection of the pool that runs it, and a
// transaction on the pool borrows its connection's copy (in).
type prepared struct {
	db *sql.DB
	tx *sql.Tx // set on the view in returns

	mu    *sync.Mutex
	stmts map[string]*sql.Stmt

	// reads marks the readers' view (WAL readers, query_only): see
	// readCtx.
	reads bool
}

// readCtx is the context a statement of p runs under. A reader's is
// ctx without its cancellation while ctx is not done yet (a done one is
// kept, and the driver refuses the statement with its error):
// a WAL reader never waits for a lock (a writer never blocks it), so
// there is no wait for a cancellation to cut short, and the driver
// watches a cancellable context with a goroutine of its own per statement
// (modernc.org/sqlite's interruptOnDone) — the goroutine, its channel and
// the progress handler cost every read more than most reads take
// (README.md § Performance). A writer's statements keep ctx: a write
// waits for the file's lock, and a cancelled caller stops waiting.
func (p *prepared) readCtx(ctx context.Context) context.Context {
	if !p.reads || ctx.Err() != nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// newPrepared returns db's prepared view with eager prepared now: every
// statement a transaction runs must be among them, since a transaction
// holds the writer's one connection and preparing on the pool would wait
// for it forever (a transaction's view runs a statement it finds missing
// unprepared).
func newPrepared(ctx context.Context, db *sql.DB, eager ...string) (*prepared, error) {
	p := &prepared{db: db, mu: &sync.Mutex{}, stmts: map[string]*sql.Stmt{}}
	for _, q := range eager {
		s, err := db.PrepareContext(ctx, q)
		if err != nil {
			p.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		p.stmts[q] = s
	}
	return p, nil
}

// in is p's view inside transaction tx, begun on p's pool.
func (p *prepared) in(tx *sql.Tx) *prepared {
	c := *p
	c.tx = tx
	return &c
}

// stmt returns query prepared, or nil when it cannot be (the caller then
// runs it unprepared, which reports the same error), too many are kept,
// or p is a transaction's view of a statement not prepared yet (see
// newPrepared).
//
// The lock is never held while a statement is prepared: preparing on the
// writer waits for its one connection, which a transaction may hold, and
// that transaction's own statements need the lock to be found (a host's
// concurrent runs deadlocked so on their first statements).
func (p *prepared) stmt(ctx context.Context, query string) *sql.Stmt {
	p.mu.Lock()
	s, ok := p.stmts[query]
	full := p.stmts == nil || len(p.stmts) >= maxPrepared
	p.mu.Unlock()
	if ok {
		return s
	}
	if p.tx != nil || full {
		return nil
	}
	s, err := p.db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if kept, ok := p.stmts[query]; ok {
		s.Close() // another caller prepared it meanwhile
		return kept
	}
	if p.stmts == nil { // closed meanwhile
		s.Close()
		return nil
	}
	p.stmts[query] = s
	return s
}

// bind is query's statement for this view, or nil (run it unprepared).
func (p *prepared) bind(ctx context.Context, query string) *sql.Stmt {
	s := p.stmt(ctx, query)
	if s != nil && p.tx != nil {
		s = p.tx.StmtContext(ctx, s) // closed with the transaction
	}
	return s
}

// ExecContext is sql.DB's (or sql.Tx's), with query prepared once.
func (p *prepared) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx = p.readCtx(ctx)
	if s := p.bind(ctx, query); s != nil {
		return s.ExecContext(ctx, args...)
	}
	if p.tx != nil {
		return p.tx.ExecContext(ctx, query, args...)
	}
	return p.db.ExecContext(ctx, query, args...)
}

// QueryContext is sql.DB's (or sql.Tx's), with query prepared once.
func (p *prepared) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx = p.readCtx(ctx)
	if s := p.bind(ctx, query); s != nil {
		return s.QueryContext(ctx, args...)
	}
	if p.tx != nil {
		return p.tx.QueryContext(ctx, query, args...)
	}
	return p.db.QueryContext(ctx, query, args...)
}

// QueryRowContext is sql.DB's (or sql.Tx's), with query prepared once.
func (p *prepared) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	ctx = p.readCtx(ctx)
	if s := p.bind(ctx, query); s != nil {
		return s.QueryRowContext(ctx, args...)
	}
	if p.tx != nil {
		return p.tx.QueryRowContext(ctx, query, args...)
	}
	return p.db.QueryRowContext(ctx, query, args...)
}

// close releases the kept statements; later calls run unprepared.
func (p *prepared) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, s := range p.stmts {
		errs = append(errs, s.Close())
	}
	p.stmts = nil
	return errors.Join(errs...)
}
