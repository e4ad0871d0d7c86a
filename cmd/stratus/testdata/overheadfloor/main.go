// Command overheadfloor is the overhead figure's floor (README.md §
// Performance): a program that does only what a durable step must do, for
// each of a chain's steps — one SQLite transaction inserting the step row and
// its attempt row, three small files written in a new step directory (the
// prompt, the runner log, the projection), one spawn of the engine fed its
// request on stdin with its output read, and one transaction marking the
// step and attempt done. The database is opened as internal/store/sqlite
// opens its writer: WAL, synchronous=NORMAL, one connection, BEGIN
// IMMEDIATE.
//
//	overheadfloor <dir> <engine.sh> <steps>
//
// It exits 1 with the error on stderr when any of it fails. With
// STRATUS_TRACE=FILE it writes its execution trace there, each part of a
// step a region ("step", "tx", "files", "engine"), as stratus marks its own.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"strconv"
	"time"

	_ "modernc.org/sqlite"
)

// request is the envelope one spawn is fed (the workflow child contract v1's
// agent request, as the overhead figure's spawn anchor feeds it).
const request = `{"workflow_contract":1,"id":"cr-1","kind":"agent","input":{"query":"q"}}` + "\n"

const schema = `
CREATE TABLE IF NOT EXISTS steps (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, node TEXT NOT NULL, visit INTEGER NOT NULL,
  status TEXT NOT NULL, output TEXT, created_at INTEGER NOT NULL, finished_at INTEGER);
CREATE TABLE IF NOT EXISTS attempts (id INTEGER PRIMARY KEY, step_id INTEGER NOT NULL REFERENCES steps(id), n INTEGER NOT NULL,
  status TEXT NOT NULL, started_at INTEGER NOT NULL, finished_at INTEGER);`

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: overheadfloor <dir> <engine.sh> <steps>")
		os.Exit(2)
	}
	steps, err := strconv.Atoi(os.Args[3])
	if p := os.Getenv("STRATUS_TRACE"); err == nil && p != "" {
		var f *os.File
		if f, err = os.Create(p); err == nil {
			defer f.Close()
			if err = trace.Start(f); err == nil {
				defer trace.Stop()
			}
		}
	}
	if err == nil {
		err = run(os.Args[1], os.Args[2], steps)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "overheadfloor:", err)
		os.Exit(1)
	}
}

func run(dir, engine string, steps int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The pragmas of internal/store/sqlite's writer.
	db, err := sql.Open("sqlite", filepath.Join(dir, "floor.db")+
		"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_size_limit(16777216)"+
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(schema); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	for i := range steps {
		region := trace.StartRegion(context.Background(), "step")
		err := step(db, dir, engine, i+1)
		region.End()
		if err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func step(db *sql.DB, dir, engine string, n int) error {
	node := fmt.Sprintf("s%d", n)
	ctx := context.Background()
	region := trace.StartRegion(ctx, "tx")
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	res, err := tx.Exec(`INSERT INTO steps (run_id, node, visit, status, created_at) VALUES ('run-1', ?, 1, 'running', ?)`, node, time.Now().UnixNano())
	if err != nil {
		tx.Rollback()
		return err
	}
	id, _ := res.LastInsertId()
	if _, err := tx.Exec(`INSERT INTO attempts (step_id, n, status, started_at) VALUES (?, 1, 'running', ?)`, id, time.Now().UnixNano()); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	region.End()

	region = trace.StartRegion(ctx, "files")
	sd := filepath.Join(dir, "steps", fmt.Sprintf("%03d-%s", n, node))
	if err := os.MkdirAll(sd, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sd, "prompt.md"), []byte("# Step "+node+"\n\nDo the step.\n"), 0o644); err != nil {
		return err
	}
	region.End()
	region = trace.StartRegion(ctx, "engine")
	cmd := exec.Command("sh", engine)
	cmd.Stdin = bytes.NewReader([]byte(request))
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	region.End()
	region = trace.StartRegion(ctx, "files")
	if err := os.WriteFile(filepath.Join(sd, "runner.log"), out, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(sd, node+".md"), []byte("answer: 42\n"), 0o644); err != nil {
		return err
	}
	region.End()

	defer trace.StartRegion(ctx, "tx").End()
	tx, err = db.Begin()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	if _, err := tx.Exec(`UPDATE steps SET status = 'done', output = ?, finished_at = ? WHERE id = ?`, `{"answer":42}`, now, id); err != nil {
		tx.Rollback()
		return err
	}
	if _, err := tx.Exec(`UPDATE attempts SET status = 'done', finished_at = ? WHERE step_id = ?`, now, id); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}
