package report

import (
	"bytes"
	"context"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
)

// RunMarker is the file in a task's logs dir (Dir) naming the run whose
// logs they are, one line. A run writes it when it starts; a later run of
// the same task moves it, with the rest, into attempt-N/.
const RunMarker = "run_id"

// MarkRun writes RunMarker for run runID of task taskID into sk's
// Dir(taskID). A run on a stack's bucket marks both its own files
// (sink.ForRun), where RunDir finds its logs, and the bucket's
// Dir(taskID), which then names the task's latest run.
func MarkRun(ctx context.Context, sk sink.Sink, taskID, runID string) error {
	return sk.Put(ctx, path.Join(Dir(taskID), RunMarker), []byte(runID+"\n"))
}

// RunDir returns the sink key prefix that holds run runID's logs (its
// summaries, stages/, supervisor/), as a key of sk. In a sink that keeps
// each run's files apart (sink.RunKeyed: a stack's bucket) that is the
// run's own Dir(taskID), sink.RunKey(sk, runID, Dir(taskID)), once the
// run marked it (MarkRun through sink.ForRun). In a work dir it is
// Dir(taskID) while the run is the task's latest, the attempt-N/ a later
// run moved them to otherwise (docs/contracts.md § Prompt audit: "archived
// into attempt-<N>/ on rerun"). The dirs are told apart by RunMarker, or, for
// logs written before it existed, by the run id summary.md names; logs a
// bucket kept by task, before runs had their own, are found the same way.
// Errors: ENOTFOUND when no dir holds them (a later run of the task overwrote
// them); the sink's errors.
func RunDir(ctx context.Context, sk sink.Sink, taskID, runID string) (string, error) {
	if own := sink.RunKey(sk, runID, Dir(taskID)); own != Dir(taskID) {
		switch o, err := owner(ctx, sk, own, runID); {
		case err != nil:
			return "", err
		case o == ownedBy:
			return own, nil
		}
	}
	dir := Dir(taskID)
	latest, err := owner(ctx, sk, dir, runID)
	if err != nil {
		return "", err
	}
	if latest == ownedBy {
		return dir, nil
	}
	keys, err := sk.List(ctx, dir)
	if err != nil {
		return "", err
	}
	seen := map[int]bool{}
	var attempts []int
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, dir+"/attempt-")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
		if err == nil && !seen[n] {
			seen[n] = true
			attempts = append(attempts, n)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(attempts)))
	for _, n := range attempts {
		a := path.Join(dir, "attempt-"+strconv.Itoa(n))
		o, err := owner(ctx, sk, a, runID)
		if err != nil {
			return "", err
		}
		if o == ownedBy {
			return a, nil
		}
	}
	if latest == unclaimed {
		return dir, nil // written by a stratus that did not mark its runs: the latest run's
	}
	return "", stratus.Errorf(stratus.ENOTFOUND, "the logs of run %s are no longer kept: a later run of task %s replaced them", runID, taskID)
}

type ownership int

const (
	unclaimed ownership = iota // nothing names a run
	ownedBy                    // names this run
	other                      // names another run
)

func owner(ctx context.Context, sk sink.Sink, dir, runID string) (ownership, error) {
	b, err := sk.GetMax(ctx, path.Join(dir, RunMarker), 1<<10)
	switch {
	case err == nil:
		if strings.TrimSpace(string(b)) == runID {
			return ownedBy, nil
		}
		return other, nil
	case stratus.ErrorCode(err) != stratus.ENOTFOUND:
		return 0, err
	}
	md, err := sk.GetMax(ctx, path.Join(dir, "summary.md"), 4<<20)
	switch {
	case stratus.ErrorCode(err) == stratus.ENOTFOUND:
		return unclaimed, nil
	case err != nil:
		return 0, err
	case bytes.Contains(md, []byte(", run `"+runID+"`")):
		return ownedBy, nil
	case bytes.Contains(md, []byte(", run `")):
		return other, nil
	}
	return unclaimed, nil
}
