package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are applied in order; migrations[i] takes the schema from
// version i to version i+1. Never edit one that has shipped: append a new
// one. Each element may hold several statements.
var migrations = []string{
	// 1: the initial schema.
	`
CREATE TABLE runs (
	id         TEXT PRIMARY KEY,
	task_id    TEXT NOT NULL,
	task_title TEXT NOT NULL,
	flow       TEXT NOT NULL,
	status     TEXT NOT NULL,
	work_dir   TEXT NOT NULL,
	task_path  TEXT NOT NULL,
	execution  TEXT NOT NULL,
	created_at INTEGER,
	ended_at   INTEGER
) STRICT;

CREATE TABLE steps (
	seq        INTEGER PRIMARY KEY, -- rowid: creation order
	tid        TEXT NOT NULL UNIQUE,
	run_id     TEXT NOT NULL,
	node       TEXT NOT NULL,
	kind       TEXT NOT NULL,
	visit      INTEGER NOT NULL,
	step_ref   TEXT NOT NULL,
	dedup_key  TEXT NOT NULL,
	task_token TEXT NOT NULL,
	status     TEXT NOT NULL,
	verdict    TEXT NOT NULL,
	value      BLOB,
	created_at INTEGER,
	ended_at   INTEGER
) STRICT;
CREATE UNIQUE INDEX steps_dedup_key ON steps (dedup_key) WHERE dedup_key <> '';
CREATE INDEX steps_run ON steps (run_id);
CREATE INDEX steps_run_node ON steps (run_id, node);

CREATE TABLE attempts (
	tid               TEXT NOT NULL,
	n                 INTEGER NOT NULL,
	agent             TEXT NOT NULL,
	status            TEXT NOT NULL,
	terminal          TEXT NOT NULL,
	reason            TEXT NOT NULL,
	system            TEXT NOT NULL,
	prompt            TEXT NOT NULL,
	steps             INTEGER NOT NULL,
	prompt_tokens     INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	cost_usd          REAL,
	started_at        INTEGER,
	engine_started_at INTEGER,
	ended_at          INTEGER,
	PRIMARY KEY (tid, n)
) STRICT;

CREATE TABLE outputs (
	tid     TEXT NOT NULL,
	attempt INTEGER NOT NULL,
	seq     INTEGER NOT NULL,
	kind    TEXT NOT NULL,
	name    TEXT NOT NULL,
	body    BLOB NOT NULL,
	ok      INTEGER NOT NULL,
	at      INTEGER,
	PRIMARY KEY (tid, attempt, seq)
) STRICT;
-- 'final' is stratus.OutputFinal; the index is what makes a second Final fail.
CREATE UNIQUE INDEX outputs_one_final ON outputs (tid, attempt) WHERE kind = 'final';

CREATE TABLE handles (
	handle     TEXT PRIMARY KEY,
	tid        TEXT NOT NULL,
	attempt    INTEGER NOT NULL,
	expires_at INTEGER
) STRICT;
`,
	// 2: degradation records and agent render sizes
	// (docs/contracts.md § Routes).
	`
CREATE TABLE degradations (
	seq      INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id   TEXT NOT NULL,
	step_ref TEXT NOT NULL,
	attempt  INTEGER NOT NULL,
	tool     TEXT NOT NULL,
	error    TEXT NOT NULL,
	fallback TEXT NOT NULL,
	note     TEXT NOT NULL,
	at       INTEGER
) STRICT;
CREATE INDEX degradations_run ON degradations (run_id, seq);

CREATE TABLE render_sizes (
	agent TEXT PRIMARY KEY,
	bytes INTEGER NOT NULL,
	at    INTEGER
) STRICT;
`,
	// 3: a large output body is stored in a blob file named by its SHA-256.
	`
ALTER TABLE outputs ADD COLUMN blob TEXT NOT NULL DEFAULT '';
`,
	// 4: an attempt's resolved per-node overrides (stratus.Resolved as
	// JSON; '' for an attempt recorded before version 4).
	`
ALTER TABLE attempts ADD COLUMN resolved TEXT NOT NULL DEFAULT '';
`,
	// 5: durable runs (docs/architecture.md § The run lifecycle): the owner
	// of a running run, its resume count and caps, and the state input each
	// step was dispatched with.
	`
ALTER TABLE runs ADD COLUMN owner TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN resumes INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN max_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE steps ADD COLUMN input BLOB;
`,
	// 6: workspaces: a run's workspace as JSON ('' = none),
	// whose head and bundles AdvanceWorkspace changes.
	`
ALTER TABLE runs ADD COLUMN workspace TEXT NOT NULL DEFAULT '';
`,
	// 7: LatestSteps seeks each node's latest step of a kind and status
	// instead of reading the run's steps (README.md § Performance); the rowid
	// (seq) ends every index entry, so "latest" is the last entry of a range.
	`
CREATE INDEX steps_run_node_kind_status ON steps (run_id, node, kind, status);
`,
	// 8: CountVisits seeks a node's highest visit (README.md § Performance);
	// this index's (run_id, node) prefix serves what steps_run_node did.
	`
CREATE INDEX steps_run_node_visit ON steps (run_id, node, visit);
DROP INDEX steps_run_node;
`,
	// 9: a handle names its run (docs/security.md § Handles); '' for a
	// handle stored before version 9.
	`
ALTER TABLE handles ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
`,
	// 10: a run's duration is the sum of its active spans (README § Durable
	// runs): when its latest resume began, and what the spans before it ran.
	`
ALTER TABLE runs ADD COLUMN resumed_at INTEGER;
ALTER TABLE runs ADD COLUMN active_ms INTEGER NOT NULL DEFAULT 0;
`,
	// 11: retention (docs/security.md § Retention): when a run was pruned
	// (NULL: kept), and the outputs naming each blob file, so that a blob
	// no output names any more is found without reading every output.
	`
ALTER TABLE runs ADD COLUMN pruned_at INTEGER;
CREATE INDEX outputs_blob ON outputs (blob) WHERE blob <> '';
`,
	// 12: a failed attempt's failure class and the reset its failure
	// named (internal/failclass); '' and NULL for an attempt recorded
	// before version 12.
	`
ALTER TABLE attempts ADD COLUMN class TEXT NOT NULL DEFAULT '';
ALTER TABLE attempts ADD COLUMN retry_at INTEGER;
`,
	// 13: the latest entry of a step's Task state (store.ReenterStep): a
	// retried or unparked node goes on in the same step, and a redelivered
	// message of that entry finds it already recorded. '' for the entry
	// that created the step.
	`
ALTER TABLE steps ADD COLUMN entry TEXT NOT NULL DEFAULT '';
`,
	// 14: what a run's publish step left on its git host
	// (stratus.Publication as JSON; '' = nothing published).
	`
ALTER TABLE runs ADD COLUMN publication TEXT NOT NULL DEFAULT '';
`,
	// 15: a run's spend totals (store.Store.RunTotals), kept by the
	// writes of its attempts; spend_kept is 0 for a run created before
	// version 15, whose totals were never kept.
	`
ALTER TABLE runs ADD COLUMN spend_kept INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spend_cost_usd REAL NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spend_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN spend_unpriced INTEGER NOT NULL DEFAULT 0;
`,
}

// schemaVersion is the version this binary writes.
var schemaVersion = len(migrations)

// migrate brings db to schemaVersion in one IMMEDIATE transaction (the
// writer's _txlock), so two processes opening a new file at once cannot
// both apply a migration.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
	id      INTEGER PRIMARY KEY CHECK (id = 1),
	version INTEGER NOT NULL
) STRICT`); err != nil {
		return fmt.Errorf("migrate: create schema_version: %w", err)
	}
	var have int
	err = tx.QueryRowContext(ctx, "SELECT version FROM schema_version WHERE id = 1").Scan(&have)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("migrate: read schema_version: %w", err)
	}
	if have > schemaVersion {
		return fmt.Errorf("migrate: schema version %d is newer than this binary supports (%d); upgrade stratus", have, schemaVersion)
	}
	if have == schemaVersion {
		return nil
	}
	for v := have; v < schemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migrate: to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO schema_version (id, version) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET version = excluded.version",
		schemaVersion); err != nil {
		return fmt.Errorf("migrate: write schema_version %d: %w", schemaVersion, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}
