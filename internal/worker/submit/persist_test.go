package submit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// checksBody is a passing checks result.
func checksBody() string {
	b, _ := json.Marshal(nodeexec.Result{Kind: flow.KindChecks, Checks: &nodeexec.ChecksResult{
		Checker: nodeexec.CommandProfile, Selection: nodeexec.SelectedAll, Runs: []nodeexec.CheckRun{{
			Set: "go", Name: "test", Argv: []string{"go", "test", "./..."}, Status: nodeexec.StatusExited}}}})
	return string(b)
}

// docs/security.md § Output that did not persist: a submit whose file the
// sink refuses — an agent's <node>.md, a checks node's — fails its step
// (never done), its attempt, and its Task state (never SendTaskSuccess);
// the reason names the step and the cause: for a full disk "the disk is
// full (ENOSPC)" and the file. The worker gets 507 for a full disk (500
// otherwise) with no path, and the Final stays in the tail: what the
// engine reported is not lost.
func TestSubmit_OutputThatDidNotPersistFailsTheStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, node, file, body string
		err                    error
		code, cause            string
	}{
		{"agent, disk full", "draft", "draft.md", "# Draft\n", syscall.ENOSPC, stratus.ENOSPACE, "the disk is full (ENOSPC): "},
		{"agent, quota", "draft", "draft.md", "# Draft\n", syscall.EDQUOT, stratus.ENOSPACE, "the disk is full (EDQUOT): "},
		{"agent, I/O error", "draft", "draft.md", "# Draft\n", syscall.EIO, stratus.EINTERNAL, "input/output error"},
		{"checks, disk full", "testing", "testing.md", checksBody(), syscall.ENOSPC, stratus.ENOSPACE, "the disk is full (ENOSPC): "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
			if tc.node == "testing" {
				r.Visit(t, "draft", "# Draft\n")
			}
			step := r.Dispatch(t, tc.node)
			r.Svc.Sink = &workertest.RefusingSink{Sink: r.Svc.Sink, Suffix: "/" + tc.file, Err: tc.err}
			before, _ := r.Tokens.Counts()
			sv, err := r.Submit(t, tc.body)
			if sv != nil || stratus.ErrorCode(err) != tc.code || !errors.Is(err, core.ErrNotPersisted) || !errors.Is(err, tc.err) {
				t.Fatalf("submit: %+v, %v (code %q); want %s wrapping ErrNotPersisted and %v", sv, err, stratus.ErrorCode(err), tc.code, tc.err)
			}
			if msg := stratus.ErrorMessage(err); strings.Contains(msg, "/work/") || !strings.Contains(msg, step.StepRef) {
				t.Errorf("the worker is told %q; want the step named and no path", msg)
			}
			if fail := r.Tokens.Failure(step.TaskToken); !strings.HasPrefix(fail, core.ErrProjection+": "+step.StepRef+" failed: ") {
				t.Errorf("the Task state got failure %q; want %s naming %s", fail, core.ErrProjection, step.StepRef)
			}
			if after, _ := r.Tokens.Counts(); after != before {
				t.Errorf("SendTaskSuccess was called for the failed step")
			}
			got, err := r.Svc.Store.GetStep(context.Background(), step.TID)
			if err != nil {
				t.Fatal(err)
			}
			var v core.StepValue
			json.Unmarshal(got.Value, &v)
			if got.Status != stratus.StepFailed || got.Verdict != "failed" || v.Outcome != "failed" {
				t.Errorf("step %s is %s/%s (value outcome %q); want failed", step.StepRef, got.Status, got.Verdict, v.Outcome)
			}
			for _, want := range []string{"its output did not persist: ", tc.cause, "/work/workspace/tasks/t1/ctx/" + tc.file, step.StepRef + " runs again"} {
				if !strings.Contains(v.Reason, want) {
					t.Errorf("the step's reason %q does not say %q", v.Reason, want)
				}
			}
			att, err := r.Svc.Store.LatestAttempt(context.Background(), step.TID)
			if err != nil || att.Status != stratus.AttemptFailed || att.Reason != v.Reason {
				t.Errorf("attempt %+v, %v; want failed with the step's reason", att, err)
			}
			tail, err := r.Svc.Store.ListOutput(context.Background(), step.TID, att.N)
			if err != nil || len(tail) == 0 || tail[len(tail)-1].Kind != stratus.OutputFinal {
				t.Errorf("the tail %v, %v; want the Final kept", tail, err)
			}
			if _, err := os.Stat(r.Ctx(tc.file)); err == nil {
				t.Errorf("%s exists though the sink refused it", tc.file)
			}
		})
	}
}

// docs/security.md § Output that did not persist: a step reads done only
// once its files persisted — while its submit writes them, its record is
// still running — so a process that dies between the two leaves a step a
// resume runs again, never a done step without its files.
func TestSubmit_StepReadsDoneOnlyAfterItsFiles(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
	step := r.Dispatch(t, "draft")
	var mu sync.Mutex
	var seen []string
	r.Svc.Sink = &workertest.RefusingSink{Sink: r.Svc.Sink, Suffix: "\x00", OnPut: func(key string) {
		st, err := r.Svc.Store.GetStep(context.Background(), step.TID)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, fmt.Sprintf("%s:%s:%v", key, st.Status, err))
	}}
	if _, err := r.Submit(t, "# Draft\n"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the submit wrote no file")
	}
	for _, s := range seen {
		if !strings.HasSuffix(s, ":"+stratus.StepRunning+":<nil>") {
			t.Errorf("while the submit wrote a file the step was %s; want running", s)
		}
	}
	if got, _ := r.Svc.Store.GetStep(context.Background(), step.TID); got.Status != stratus.StepCompleted || r.Tokens.Success(step.TaskToken) == nil {
		t.Errorf("after the submit the step is %s (success %s); want completed, its state told", got.Status, r.Tokens.Success(step.TaskToken))
	}
}

// docs/security.md § Output that did not persist: the step's own completed
// record is part of what must persist before its Task state succeeds: a
// store that refuses it fails the step's state instead.
func TestSubmit_UnrecordedCompletionIsNotSuccess(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
	step := r.Dispatch(t, "draft")
	r.Svc.Store = workertest.RefusingStore{Store: r.Svc.Store}
	_, err := r.Submit(t, "# Draft\n")
	if stratus.ErrorCode(err) != stratus.ENOSPACE || !errors.Is(err, core.ErrNotPersisted) {
		t.Fatalf("submit: %v; want ENOSPACE wrapping ErrNotPersisted", err)
	}
	if r.Tokens.Success(step.TaskToken) != nil || !strings.Contains(r.Tokens.Failure(step.TaskToken), "the disk is full (SQLITE_FULL)") {
		t.Errorf("the Task state: success %s, failure %q; want it failed, saying the disk is full", r.Tokens.Success(step.TaskToken), r.Tokens.Failure(step.TaskToken))
	}
	if got, _ := r.Svc.Store.GetStep(context.Background(), step.TID); got.Status != stratus.StepFailed {
		t.Errorf("step %s; want failed", got.Status)
	}
}

// docs/security.md § Output that did not persist: embedded (DiskFull set),
// a step whose output the disk refused still fails — never done, the
// worker told 507, the same reason — but its Task state is not told:
// DiskFull is, naming the step, the errno and the file, and stops the run
// (interrupted, resumable). Another write error fails the state as before,
// and DiskFull hears nothing of it.
func TestSubmit_OutputAFullDiskRefusedStopsTheRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sink  error // the sink's error for draft.md; nil: the store refuses the step's completed record
		full  bool
		wants []string // in DiskFull's error
	}{
		{"file, disk full", syscall.ENOSPC, true, []string{"draft#1: its output did not persist (ENOSPC)", "/work/workspace/tasks/t1/ctx/draft.md"}},
		{"file, quota", syscall.EDQUOT, true, []string{"draft#1: its output did not persist (EDQUOT)"}},
		{"record, SQLite full", nil, true, []string{"draft#1: its output did not persist (SQLITE_FULL)", "record draft#1 done"}},
		{"file, I/O error", syscall.EIO, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.PersistFlow})
			spy := &workertest.DiskFullSpy{}
			r.Svc.DiskFull = spy.Hook
			step := r.Dispatch(t, "draft")
			if tc.sink != nil {
				r.Svc.Sink = &workertest.RefusingSink{Sink: r.Svc.Sink, Suffix: "/draft.md", Err: tc.sink}
			} else {
				r.Svc.Store = workertest.RefusingStore{Store: r.Svc.Store}
			}
			_, err := r.Submit(t, "# Draft\n")
			if !errors.Is(err, core.ErrNotPersisted) {
				t.Fatalf("submit: %v; want it wrapping ErrNotPersisted", err)
			}
			if got, _ := r.Svc.Store.GetStep(context.Background(), step.TID); got.Status != stratus.StepFailed {
				t.Errorf("step %s is %s; want failed, never done", step.StepRef, got.Status)
			}
			told := spy.Told()
			if !tc.full {
				if len(told) != 0 || !strings.HasPrefix(r.Tokens.Failure(step.TaskToken), core.ErrProjection+": ") {
					t.Errorf("DiskFull told %v, the state's failure %q; want DiskFull told nothing and the state failed", told, r.Tokens.Failure(step.TaskToken))
				}
				return
			}
			if stratus.ErrorCode(err) != stratus.ENOSPACE {
				t.Errorf("the worker is answered %q; want %s", stratus.ErrorCode(err), stratus.ENOSPACE)
			}
			if len(told) != 1 || !stratus.StorageFull(told[0]) {
				t.Fatalf("DiskFull told %v; want one full-disk error", told)
			}
			for _, want := range tc.wants {
				if !strings.Contains(told[0].Error(), want) {
					t.Errorf("DiskFull told %q; want it to say %q", told[0], want)
				}
			}
			if s, f := r.Tokens.Counts(); s != 0 || f != 0 {
				t.Errorf("the Task state was told (%d successes, %d failures: %q); want it left to the run's stop", s, f, r.Tokens.Failure(step.TaskToken))
			}
		})
	}
}
