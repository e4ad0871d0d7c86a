package report

import (
	"context"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
)

// RunDir finds a run's logs where its marker is: the task's logs dir for
// the latest run, its attempt-N/ for an earlier one; logs from before the
// marker by the run summary.md names; and says when none are kept.
func TestRunDir(t *testing.T) {
	ctx := context.Background()
	sk := fs.New(t.TempDir())
	put := func(key, body string) {
		if err := sk.Put(ctx, key, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	d := Dir("t")
	put(d+"/attempt-1/summary.md", "# T\n\nTask `t`, flow `f`, run `r-old`: done.\n") // before markers
	put(d+"/attempt-2/"+RunMarker, "r-mid\n")
	put(d+"/attempt-10/"+RunMarker, "r-late\n")
	if err := MarkRun(ctx, sk, "t", "r-new"); err != nil {
		t.Fatal(err)
	}
	for run, want := range map[string]string{"r-new": d, "r-mid": d + "/attempt-2", "r-late": d + "/attempt-10", "r-old": d + "/attempt-1"} {
		if got, err := RunDir(ctx, sk, "t", run); err != nil || got != want {
			t.Errorf("RunDir(%s) = %q, %v; want %q", run, got, err, want)
		}
	}
	if _, err := RunDir(ctx, sk, "t", "r-gone"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("RunDir of a run whose logs were replaced: %v; want ENOTFOUND", err)
	}
	// Logs written before markers, unclaimed: the latest run's.
	if got, err := RunDir(ctx, sk, "u", "r-any"); err != nil || got != Dir("u") {
		t.Errorf("RunDir of an unmarked task dir = %q, %v", got, err)
	}
}

// byRun is a sink that keeps each run's work-dir files apart, as a
// stack's bucket does (sink.RunKeyed), on a directory.
type byRun struct{ *fs.Sink }

func (byRun) RunKey(runID, key string) string { return "runs/" + runID + "/workdir/" + key }

// In a sink that keeps runs apart, each run's logs are its own Dir(task)
// under the run, whatever run of the task came later; logs a bucket kept
// by task before (one set, its marker naming the run) are still found.
func TestRunDir_RunKeyedSink(t *testing.T) {
	ctx := context.Background()
	sk := byRun{fs.New(t.TempDir())}
	for _, run := range []string{"r-1", "r-2"} {
		if err := MarkRun(ctx, sink.ForRun(sk, run), "t", run); err != nil {
			t.Fatal(err)
		}
		if err := MarkRun(ctx, sk, "t", run); err != nil { // the task's latest run
			t.Fatal(err)
		}
	}
	for _, run := range []string{"r-1", "r-2"} {
		if got, err := RunDir(ctx, sk, "t", run); err != nil || got != "runs/"+run+"/workdir/"+Dir("t") {
			t.Errorf("RunDir(%s) = %q, %v; want the run's own", run, got, err)
		}
	}
	if err := MarkRun(ctx, sk, "old", "r-0"); err != nil { // logs kept by task
		t.Fatal(err)
	}
	if got, err := RunDir(ctx, sk, "old", "r-0"); err != nil || got != Dir("old") {
		t.Errorf("RunDir of logs kept by task = %q, %v; want %q", got, err, Dir("old"))
	}
	if _, err := RunDir(ctx, sk, "t", "r-gone"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("RunDir of a run with no logs: %v; want ENOTFOUND", err)
	}
}
