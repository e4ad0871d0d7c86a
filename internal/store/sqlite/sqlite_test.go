package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/storetest"
)

// newStore opens a store on a fresh file; storetest closes it.
func newStore(t *testing.T) store.Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, newStore)
}

// openT opens path and closes it when the test ends.
func openT(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestOpen_CreatesPrivateFileAndDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "proj", ".stratus")
	path := filepath.Join(dir, "stratus.db")
	openT(t, path)
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if fi.Mode() != want {
			t.Errorf("%s mode = %v, want %v", p, fi.Mode(), want)
		}
	}
}

func TestOpen_Pragmas(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	ctx := context.Background()
	check := func(pool, pragma, want string) {
		t.Helper()
		db := s.w
		if pool == "reader" {
			db = s.r
		}
		var got string
		if err := db.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("%s PRAGMA %s: %v", pool, pragma, err)
		}
		if got != want {
			t.Errorf("%s PRAGMA %s = %q, want %q", pool, pragma, got, want)
		}
	}
	for _, pool := range []string{"writer", "reader"} {
		check(pool, "journal_mode", "wal")
		check(pool, "foreign_keys", "1")
		check(pool, "busy_timeout", "10000")
	}
	check("reader", "query_only", "1")
	check("writer", "query_only", "0")
}

// docs/security.md § Output that did not persist: once the store closes,
// its -wal file is kept empty and its -shm file kept whole (persistWAL), so
// that opening it again to read allocates nothing on a disk that has filled
// up since; what was written is in the database file itself.
func TestClose_KeepsTheWALFilesForTheNextReader(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stratus.db")
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := s.CreateRun(ctx, stratus.Run{ID: fmt.Sprintf("run-%d", i), Status: stratus.RunRunning, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.ListRuns(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path + "-wal"); err != nil || fi.Size() != 0 {
		t.Errorf("-wal after Close: %v; want it kept, empty", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("-wal mode %v; want 0600", fi.Mode().Perm())
	}
	if fi, err := os.Stat(path + "-shm"); err != nil || fi.Size() == 0 {
		t.Errorf("-shm after Close: %v; want it kept", err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("-shm mode %v; want 0600", fi.Mode().Perm())
	}
	runs, err := openT(t, path).ListRuns(ctx, 0)
	if err != nil || len(runs) != 50 {
		t.Errorf("after reopening: %d runs, %v; want 50", len(runs), err)
	}
}

func TestOpen_SchemaVersionRecorded(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	var v int
	if err := s.r.QueryRow("SELECT version FROM schema_version WHERE id = 1").Scan(&v); err != nil {
		t.Fatalf("read schema_version: %v", err)
	}
	if v != len(migrations) {
		t.Errorf("schema_version = %d, want %d", v, len(migrations))
	}
}

func TestOpen_ReopenKeepsDataAndSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stratus.db")
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	r := stratus.Run{ID: "run-1", Status: stratus.RunRunning, CreatedAt: time.UnixMilli(1741945166535)}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	s2 := openT(t, path)
	got, err := s2.GetRun(ctx, "run-1")
	if err != nil {
		t.Fatalf("GetRun after reopen: %v", err)
	}
	if !got.CreatedAt.Equal(r.CreatedAt) || got.Status != r.Status {
		t.Errorf("GetRun after reopen = %+v, want %+v", got, r)
	}
}

func TestOpen_NewerSchema_Refused(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stratus.db")
	s := openT(t, path)
	if _, err := s.w.Exec("UPDATE schema_version SET version = ?", len(migrations)+1); err != nil {
		t.Fatalf("bump schema_version: %v", err)
	}
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "newer than this binary supports") {
		t.Errorf("Open of a newer schema: err = %v, want one saying the schema is newer", err)
	}
}

func TestOpen_UnusablePath_Invalid(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", ":memory:", "file:x.db", filepath.Join(t.TempDir(), "a?b.db")} {
		_, err := Open(p)
		if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "path") {
			t.Errorf("Open(%q): err = %v, want EINVALID naming the path", p, err)
		}
	}
}

// The partial unique index that admits one Final per attempt spells the
// kind as a literal; it must be the domain's.
func TestSchema_FinalKindIsDomains(t *testing.T) {
	if !strings.Contains(migrations[0], "WHERE kind = '"+stratus.OutputFinal+"'") {
		t.Errorf("outputs_one_final does not use stratus.OutputFinal = %q", stratus.OutputFinal)
	}
}

// Errors name the key they are about, so a message says what failed.
func TestErrors_NameTheKey(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	ctx := context.Background()
	if err := s.CreateRun(ctx, stratus.Run{ID: "run-x"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateStep(ctx, stratus.Step{TID: "tid-x", RunID: "run-x", DedupKey: "d1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateAttempt(ctx, stratus.Attempt{TID: "tid-x", N: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendOutput(ctx, stratus.OutputEvent{TID: "tid-x", Attempt: 7, Kind: stratus.OutputFinal}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHandle(ctx, stratus.Handle{Handle: "wh-abcdefgh", TID: "tid-x", Attempt: 7}); err != nil {
		t.Fatal(err)
	}
	errOf := func(_ any, err error) error { return err }
	errOf3 := func(_ any, _ bool, err error) error { return err }
	for _, c := range []struct {
		name string
		err  error
		code string
		keys []string
	}{
		{"CreateRun", s.CreateRun(ctx, stratus.Run{ID: "run-x"}), stratus.ECONFLICT, []string{`"run-x"`}},
		{"GetRun", errOf(s.GetRun(ctx, "run-y")), stratus.ENOTFOUND, []string{`"run-y"`}},
		{"UpdateRun", s.UpdateRun(ctx, stratus.Run{ID: "run-y"}), stratus.ENOTFOUND, []string{`"run-y"`}},
		{"CreateStep", errOf3(s.CreateStep(ctx, stratus.Step{TID: "tid-x", DedupKey: "d2"})), stratus.ECONFLICT, []string{`"tid-x"`}},
		{"GetStep", errOf(s.GetStep(ctx, "tid-y")), stratus.ENOTFOUND, []string{`"tid-y"`}},
		{"UpdateStep", s.UpdateStep(ctx, stratus.Step{TID: "tid-y"}), stratus.ENOTFOUND, []string{`"tid-y"`}},
		{"CreateAttempt", s.CreateAttempt(ctx, stratus.Attempt{TID: "tid-x", N: 7}), stratus.ECONFLICT, []string{`"tid-x"`, "7"}},
		{"GetAttempt", errOf(s.GetAttempt(ctx, "tid-x", 8)), stratus.ENOTFOUND, []string{`"tid-x"`, "8"}},
		{"LatestAttempt", errOf(s.LatestAttempt(ctx, "tid-y")), stratus.ENOTFOUND, []string{`"tid-y"`}},
		{"UpdateAttempt", s.UpdateAttempt(ctx, stratus.Attempt{TID: "tid-x", N: 8}), stratus.ENOTFOUND, []string{`"tid-x"`, "8"}},
		{"AppendOutput", errOf(s.AppendOutput(ctx, stratus.OutputEvent{TID: "tid-x", Attempt: 7, Kind: stratus.OutputFinal})), stratus.ECONFLICT, []string{`"tid-x"`, "7", "final"}},
		{"PutHandle", s.PutHandle(ctx, stratus.Handle{Handle: "wh-abcdefgh"}), stratus.ECONFLICT, []string{`"wh-abcdefgh"`}},
		{"GetHandle", errOf(s.GetHandle(ctx, "wh-zzzzzzzz")), stratus.ENOTFOUND, []string{`"wh-zzzzzzzz"`}},
	} {
		if got := stratus.ErrorCode(c.err); got != c.code {
			t.Errorf("%s: error %v has code %q, want %q", c.name, c.err, got, c.code)
			continue
		}
		for _, k := range c.keys {
			if !strings.Contains(stratus.ErrorMessage(c.err), k) {
				t.Errorf("%s: message %q does not name %s", c.name, stratus.ErrorMessage(c.err), k)
			}
		}
	}
}

// An empty DedupKey is no key: two steps without one are two steps.
func TestCreateStep_EmptyDedupKey_NeverMatches(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	ctx := context.Background()
	for i, tid := range []string{"tid-1", "tid-2"} {
		if _, created, err := s.CreateStep(ctx, stratus.Step{TID: tid, RunID: "run-1", Node: "impl", Visit: i + 1}); err != nil || !created {
			t.Fatalf("CreateStep(%s) = created %v, err %v; want created", tid, created, err)
		}
	}
	if n, err := s.CountVisits(ctx, "run-1", "impl"); err != nil || n != 2 {
		t.Errorf("CountVisits = %d, %v; want 2", n, err)
	}
}

// A closed store fails with a wrapped error, not a panic or a stratus code.
func TestClosed_FailsInternal(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetRun(context.Background(), "run-1")
	if stratus.ErrorCode(err) != stratus.EINTERNAL || !strings.Contains(err.Error(), `get run "run-1"`) {
		t.Errorf("GetRun on a closed store: %v, want a wrapped internal error naming the run", err)
	}
}

// Migration 4 adds the attempts' resolved column: an attempt recorded by a
// version-3 database reads back with a zero Resolved, and new attempts
// record theirs (docs/contracts.md § Per-node overrides).
func TestMigrate_V3AttemptsReadZeroResolved(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stratus.db")
	ctx := context.Background()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatalf("open raw: %v", err)
	}
	for v := range 3 {
		if _, err := db.Exec(migrations[v]); err != nil {
			t.Fatalf("apply migration %d: %v", v+1, err)
		}
	}
	for _, q := range []string{
		"CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL) STRICT",
		"INSERT INTO schema_version (id, version) VALUES (1, 3)",
		`INSERT INTO attempts (tid, n, agent, status, terminal, reason, system, prompt, steps, prompt_tokens, completion_tokens)
		 VALUES ('t1', 1, 'review', 'submitted', 'captured', '', 'sys', 'prompt', 2, 10, 5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close raw: %v", err)
	}

	s := openT(t, path)
	old, err := s.GetAttempt(ctx, "t1", 1)
	if err != nil {
		t.Fatalf("GetAttempt of a version-3 attempt: %v", err)
	}
	if !reflect.ValueOf(old.Resolved).IsZero() || old.Agent != "review" || old.Steps != 2 {
		t.Errorf("version-3 attempt after migration = %+v, want its fields and a zero Resolved", old)
	}
	a := old
	a.N, a.Resolved = 2, stratus.Resolved{Provider: "claude", Model: "claude-opus-5", PermissionProfile: "read-only", TimeoutSeconds: 600}
	if err := s.CreateAttempt(ctx, a); err != nil {
		t.Fatalf("CreateAttempt after migration: %v", err)
	}
	got, err := s.GetAttempt(ctx, "t1", 2)
	if err != nil || !reflect.DeepEqual(got.Resolved, a.Resolved) {
		t.Errorf("GetAttempt after migration: Resolved = %+v, err %v; want %+v", got.Resolved, err, a.Resolved)
	}
}

// A read whose context is done is refused with the context's error, as
// before the readers stopped passing the cancellation to the driver
// (prepared.readCtx); a live context reads.
func TestReaders_ADoneContextIsRefused(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "s.db"))
	ctx := context.Background()
	if err := s.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t", Flow: "f", Status: stratus.RunRunning, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetRun(ctx, "r1"); err != nil {
		t.Fatalf("GetRun: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.GetRun(done, "r1"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetRun with a cancelled context: %v; want context.Canceled", err)
	}
	if _, err := s.ListSteps(done, "r1"); !errors.Is(err, context.Canceled) {
		t.Errorf("ListSteps with a cancelled context: %v; want context.Canceled", err)
	}
}

// NodeSteps (NodesSteps of one node), NodesSteps and the visit count (CountVisits,
// CreateNextStep) read their nodes' entries of steps_run_node_visit, not
// the run's (steps_run), which the planner may pick without statistics
// (README.md § Performance).
func TestNodesStepsAndLastVisit_SeekTheNodesIndexEntries(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{nodesStepsSQL(1), []any{"run-1", "a", 3}},
		{nodesStepsSQL(3), []any{"run-1", "a", "b", "c", -1}},
		{lastVisitSQL, []any{"run-1", "a"}},
	} {
		if got := queryPlan(t, s, q.sql, q.args...); !strings.Contains(got, "INDEX steps_run_node_visit (run_id=? AND node=?)") || strings.Contains(got, "INDEX steps_run (") || strings.Contains(got, "SCAN steps") {
			t.Errorf("plan of %s: %s; want a search of steps_run_node_visit by run_id and node", q.sql, got)
		}
	}
}
