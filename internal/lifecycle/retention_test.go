package lifecycle

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/security.md § Retention: pulling a run whose files retention
// removed says so — a pruned run (embedded) before anything is read, a
// run whose bundle is gone from the sink (AWS: the bucket's rule) naming
// the bundle — rather than failing on a missing file.
func TestPullWorkspace_APrunedOrExpiredRunSaysSo(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "pull writes a branch with git")
	ctx := context.Background()
	repo := t.TempDir()
	if out, err := exec.Command("git", "-C", repo, "init", "-q").CombinedOutput(); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	key := "runs/r-20250101T000000-aaaaaa/workspace/base.bundle"
	run := stratus.Run{ID: "r-20250101T000000-aaaaaa", TaskID: "t1", Status: stratus.RunDone, CreatedAt: time.Now(),
		Workspace: &stratus.Workspace{Base: strings.Repeat("a", 40), Head: strings.Repeat("a", 40), Bundles: []string{key}}}
	sk := fs.New(t.TempDir())

	_, err := PullWorkspace(ctx, sk, run, repo, false)
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "no longer has its file "+key) || !strings.Contains(err.Error(), "RetentionDays") {
		t.Errorf("pull of a run whose bundle expired: %v; want ENOTFOUND naming the bundle and the retention period", err)
	}
	run.EndedAt, run.PrunedAt = time.Now().Add(-40*24*time.Hour), time.Now()
	_, err = PullWorkspace(ctx, sk, run, repo, false)
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), "was pruned") || !strings.Contains(err.Error(), "cannot pull its commits") {
		t.Errorf("pull of a pruned run: %v; want ENOTFOUND saying it was pruned", err)
	}
}
