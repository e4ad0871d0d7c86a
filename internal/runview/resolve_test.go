package runview_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store/sqlite"
)

// TestResolve_NamingARun: README § Naming a run. RUN is a whole run id, a
// unique prefix of one, a task id (its newest run) or latest; a prefix of
// several runs lists them (EINVALID), a name of none is ENOTFOUND naming it.
func TestResolve_NamingARun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, r := range []stratus.Run{
		{ID: "r-20250101T000000-eee444", TaskID: "r-2025"},
		{ID: "r-20250101T000001-fff555", TaskID: "other"},
		{ID: "r-20260102T030405-aaa111", TaskID: "fix-login"},
		{ID: "r-20260102T030406-abc222", TaskID: "add-retry"},
		{ID: "r-20260102T030407-abd333", TaskID: "fix-login"},
	} {
		r.Status, r.Flow, r.CreatedAt = stratus.RunDone, "implementation", t0.Add(time.Duration(i)*time.Second)
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ ref, want string }{
		{"r-20260102T030406-abc222", "r-20260102T030406-abc222"},
		{"r-20260102T030405", "r-20260102T030405-aaa111"},
		{"r-20260102T030406-ab", "r-20260102T030406-abc222"},
		{"fix-login", "r-20260102T030407-abd333"},
		{"add-retry", "r-20260102T030406-abc222"},
		{"latest", "r-20260102T030407-abd333"},
		// A whole task id wins over a prefix of run ids it also is.
		{"r-2025", "r-20250101T000000-eee444"},
	} {
		r, err := runview.Resolve(ctx, st, c.ref)
		if err != nil || r.ID != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.ref, r.ID, err, c.want)
		}
	}
	_, err = runview.Resolve(ctx, st, "r-2026")
	if stratus.ErrorCode(err) != stratus.EINVALID {
		t.Fatalf("Resolve(ambiguous prefix) = %v, want EINVALID", err)
	}
	for _, want := range []string{`"r-2026" is ambiguous`, "\n  r-20260102T030407-abd333  task fix-login  done  started 2026-01-02T03:04:09Z\n", "\n  r-20260102T030406-abc222  task add-retry  done  started 2026-01-02T03:04:08Z\n"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("ambiguous: %q lacks %q", err, want)
		}
	}
	for _, ref := range []string{"r-1999", "no-such-task"} {
		_, err := runview.Resolve(ctx, st, ref)
		if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), `"`+ref+`"`) {
			t.Errorf("Resolve(%q) = %v, want ENOTFOUND naming it", ref, err)
		}
	}
	empty, err := sqlite.Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, err := runview.Resolve(ctx, empty, "latest"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("Resolve(latest) of no runs = %v, want ENOTFOUND", err)
	}
}
