package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// docs/security.md § Retention: pruning a run removes the blob files of
// its large bodies that no other output names, and keeps one another run's
// output names (blobs are content-addressed, so two runs share one).
func TestPruneRun_RemovesBlobsNoOtherOutputNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	shared := bytes.Repeat([]byte("s"), SpillBytes+1)
	own := bytes.Repeat([]byte("o"), SpillBytes+1)
	put := func(runID, status string, bodies ...[]byte) {
		if err := s.CreateRun(ctx, stratus.Run{ID: runID, Status: status, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.CreateStep(ctx, stratus.Step{TID: runID + ".impl.1", RunID: runID, Node: "impl", Visit: 1}); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if _, err := s.AppendOutput(ctx, stratus.OutputEvent{TID: runID + ".impl.1", Attempt: 1, Kind: stratus.OutputArtifact, Name: "p", Body: b}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put("old", stratus.RunDone, shared, own)
	put("new", stratus.RunRunning, shared)
	if err := s.PruneRun(ctx, "old", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.blobPath(sum(own))); !os.IsNotExist(err) {
		t.Errorf("the pruned run's own blob is still there (%v)", err)
	}
	tail, err := s.ListOutput(ctx, "new.impl.1", 1)
	if err != nil || len(tail) != 1 || !bytes.Equal(tail[0].Body, shared) {
		t.Errorf("the other run's output with the shared body: %d events, %v", len(tail), err)
	}
}

// docs/security.md § Retention: a large body spilled to a blob file that
// a prune removes before the output naming it is inserted (spill found the
// file there and kept it) is written again inside the insert's
// transaction: the output reads back whole. Without keepBlob it named a
// missing file.
func TestAppendOutput_BlobRemovedAfterSpillIsWrittenAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("b"), SpillBytes+1)
	e := stratus.OutputEvent{TID: "t.impl.1", Attempt: 1, Kind: stratus.OutputArtifact, Name: "p", Body: body}
	row, err := s.spill(e)
	if err != nil || row.blob == "" {
		t.Fatalf("spill: %+v, %v; want a blob", row.blob, err)
	}
	if err := os.Remove(s.blobPath(row.blob)); err != nil { // what a prune in between does
		t.Fatal(err)
	}
	if _, err := s.appendRow(ctx, row); err != nil {
		t.Fatal(err)
	}
	tail, err := s.ListOutput(ctx, "t.impl.1", 1)
	if err != nil || len(tail) != 1 || !bytes.Equal(tail[0].Body, body) {
		t.Errorf("ListOutput: %d events, %v; want the body whole", len(tail), err)
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
