package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus"
)

// A run created before version 15 (spend_kept 0) keeps no totals: RunTotals
// says so, and its attempts' writes go on without making any.
func TestRunTotals_RunCreatedBeforeThem(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openT(t, filepath.Join(t.TempDir(), "stratus.db"))
	if err := s.CreateRun(ctx, stratus.Run{ID: "old", Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, "UPDATE runs SET spend_kept = 0 WHERE id = 'old'"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateStep(ctx, stratus.Step{TID: "old.impl.1", RunID: "old", Node: "impl", Visit: 1}); err != nil {
		t.Fatal(err)
	}
	a := stratus.Attempt{TID: "old.impl.1", N: 1, PromptTokens: 10}
	if err := s.CreateAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	a.PromptTokens = 20
	if err := s.UpdateAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	if tot, kept, err := s.RunTotals(ctx, "old"); err != nil || kept || tot.Tokens != 0 {
		t.Errorf("RunTotals(old) = %+v, kept %v, %v; want zero, not kept", tot, kept, err)
	}
}
