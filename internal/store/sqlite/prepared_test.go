package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// A host's runs share one store. Their first statements (prepared on first
// use, on the writer's one connection) and another run's transaction (which
// holds that connection, and looks its own statements up) must not wait on
// each other: a fresh store under concurrent first uses and transactions gets
// through.
func TestPrepared_FirstUseBesideATransactionDoesNotDeadlock(t *testing.T) {
	for round := range 20 {
		s, err := Open(filepath.Join(t.TempDir(), "stratus.db"))
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(2)
			go func() { // transactions
				defer wg.Done()
				for i := range 10 {
					s.CreateStep(ctx, stratus.Step{TID: fmt.Sprintf("t-%d-%d", g, i), RunID: "r", DedupKey: fmt.Sprintf("d-%d-%d", g, i)})
				}
			}()
			go func() { // first uses of statements outside a transaction
				defer wg.Done()
				id := fmt.Sprintf("r-%d", g)
				s.CreateRun(ctx, stratus.Run{ID: id, TaskID: "t", Status: stratus.RunRunning, CreatedAt: time.Now()})
				s.GetRun(ctx, id)
				s.CountVisits(ctx, id, "n")
				s.ListSteps(ctx, id)
			}()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the store's callers still wait 30 s later (deadlock)", round)
		}
		s.Close()
	}
}
