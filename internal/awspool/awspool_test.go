package awspool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/lifecycle"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/taskpool"
)

var fixtures atomic.Int64

// execs is Step Functions as the pool sees it: it records the executions
// started.
type execs struct {
	mu      sync.Mutex
	started []string // run ids, in order
	fail    error
}

func (e *execs) StartExecution(_ context.Context, in executor.StartInput) (executor.Execution, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail != nil {
		return executor.Execution{}, e.fail
	}
	e.started = append(e.started, in.Name)
	arn, _ := executor.ExecutionARN(in.StateMachine, in.Name)
	return executor.Execution{ARN: arn, Name: in.Name, Status: executor.StatusRunning}, nil
}

func (e *execs) DescribeExecution(context.Context, string) (executor.Execution, error) {
	return executor.Execution{}, executor.APIError(executor.ErrExecutionDoesNotExist, "ARN", "none")
}

func (e *execs) runs() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.started)
}

type fixture struct {
	ctx  context.Context
	pool *Pool
	ex   *execs
}

func newFixture(t *testing.T, maxTasks int) *fixture {
	t.Helper()
	cfg := awstest.Moto(t).Config()
	n := fixtures.Add(1)
	ctx := t.Context()
	bucket := fmt.Sprintf("stratus-pool-%d", n)
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	sk, err := s3sink.New(s3c, bucket, "stratus/")
	if err != nil {
		t.Fatal(err)
	}
	ddb := awsddb.NewFromConfig(cfg)
	prefix := fmt.Sprintf("pool%d-", n)
	if err := dynamodb.CreateTables(ctx, ddb, prefix); err != nil {
		t.Fatal(err)
	}
	st, err := dynamodb.New(ddb, dynamodb.Options{Table: dynamodb.TableName(prefix), Blobs: sk})
	if err != nil {
		t.Fatal(err)
	}
	ex := &execs{}
	return &fixture{ctx: ctx, ex: ex, pool: &Pool{Ports: Ports{Store: st, Sink: sk, Exec: ex}, Max: maxTasks}}
}

const sm = "arn:aws:states:us-east-1:123456789012:stateMachine:s-implementation-abc"

// taskFile is a task file of id with front matter extra.
func taskFile(id, extra string) []byte {
	return fmt.Appendf(nil, "---\nid: %s\ntitle: Task %s\ntask_type: implementation\n%s---\n\nDo %s.\n", id, id, extra, id)
}

// submit queues task id (file <id>.md) with a prepared run r-<id>.
func (f *fixture) submit(t *testing.T, id, extra string) {
	t.Helper()
	pr := Prepared{Run: stratus.Run{ID: "r-" + id, TaskID: id, Flow: "implementation"}, StateMachine: sm, File: id + ".md"}
	if err := lifecycle.PutDefinition(f.ctx, f.pool.Sink, pr.Run.ID, []byte(`{"StartAt":"x","States":{"x":{"Type":"Succeed"}}}`)); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.Submit(f.ctx, pr, taskFile(id, extra)); err != nil {
		t.Fatalf("Submit %s: %v", id, err)
	}
}

// end records run r-<id> ended with status.
func (f *fixture) end(t *testing.T, id, status string) {
	t.Helper()
	run, err := f.pool.Store.GetRun(f.ctx, "r-"+id)
	if err != nil {
		t.Fatal(err)
	}
	run.Status = status
	if err := f.pool.Store.UpdateRun(f.ctx, run); err != nil {
		t.Fatal(err)
	}
	f.pool.Store.UnlockTask(f.ctx, id, run.ID)
}

func (f *fixture) tick(t *testing.T) Result {
	t.Helper()
	res, err := f.pool.Tick(f.ctx)
	if err != nil {
		t.Fatalf("Tick: %v", err)
	}
	return res
}

func (f *fixture) keys(t *testing.T, state string) []string {
	t.Helper()
	keys, err := f.pool.Sink.List(f.ctx, TasksDir+"/"+state)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, strings.TrimPrefix(k, TasksDir+"/"+state+"/"))
	}
	return out
}

// README.md § Task pool: five tasks — priorities, a queue the claim does
// not serve, a depends_on chain — run in the pool's order, at most Max at
// a time, each moved with its summary when its run ends.
func TestTick_RunsThePoolInOrderAtMostMaxAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 2)
	f.submit(t, "t1", "priority: low\n")
	f.submit(t, "t2", "priority: high\ndepends_on: [t3]\n")
	f.submit(t, "t3", "priority: mid\n")
	f.submit(t, "t4", "priority: high\nqueue: other\n")
	f.submit(t, "t5", "priority: high\n")

	f.tick(t)
	if got := f.ex.runs(); !slices.Equal(got, []string{"r-t5", "r-t3"}) {
		t.Fatalf("first claim started %v; want [r-t5 r-t3] (high, then mid; t2 waits on t3, t4 is another queue's)", got)
	}
	// Full: nothing more starts, and a second claim changes nothing.
	if res := f.tick(t); len(res.Started) != 0 || res.Running != 2 {
		t.Fatalf("a claim with the pool full: %+v", res)
	}
	l, err := f.pool.Listing(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	waits := map[string]string{}
	for _, r := range l {
		waits[r.ID] = r.State + ":" + r.Waits
	}
	want := map[string]string{"t5": "running:", "t3": "running:", "t2": "pending:depends_on t3", "t1": "pending:queue full", "t4": "pending:queue other"}
	for id, w := range want {
		if waits[id] != w {
			t.Errorf("listing of %s = %q; want %q (all: %v)", id, waits[id], w, waits)
		}
	}

	f.end(t, "t3", stratus.RunDone)
	f.tick(t)
	if got := f.ex.runs(); !slices.Equal(got, []string{"r-t5", "r-t3", "r-t2"}) {
		t.Fatalf("after t3 ended done: started %v; want t2 next (its dependency is done, and it is high)", got)
	}
	if got := f.keys(t, taskpool.Done); !slices.Equal(got, []string{"t3.md", "t3.summary.md"}) {
		t.Errorf("done/ = %v; want t3.md and its summary", got)
	}
	f.end(t, "t5", stratus.RunFailed)
	f.tick(t)
	if got := f.ex.runs(); len(got) != 4 || got[3] != "r-t1" {
		t.Fatalf("after t5 failed: started %v; want t1 last", got)
	}
	if got := f.keys(t, taskpool.Failed); !slices.Equal(got, []string{"t5.md", "t5.summary.md"}) {
		t.Errorf("failed/ = %v; want t5.md and its summary", got)
	}
	sum, err := f.pool.Sink.Get(f.ctx, TaskKey(taskpool.Failed, "t5.summary.md"))
	if err != nil || !strings.Contains(string(sum), "r-t5") {
		t.Errorf("t5's summary: %q %v; want one naming its run", sum, err)
	}
	if got := f.keys(t, taskpool.Pending); !slices.Equal(got, []string{"t1.md", "t2.md", "t4.md"}) {
		t.Errorf("pending/ = %v; want the claimed t1, t2 and the other queue's t4", got)
	}
}

// Two claims at once: one holds the lease, the other is told to come
// back; a task is claimed once whoever claims it.
func TestTick_TwoClaimsAtOnceStartEachTaskOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	for i := 1; i <= 5; i++ {
		f.submit(t, fmt.Sprintf("t%d", i), "")
	}
	var wg sync.WaitGroup
	var busy atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := f.pool.Tick(f.ctx)
				if errors.Is(err, ErrBusy) {
					busy.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
				}
				return
			}
		}()
	}
	wg.Wait()
	got := f.ex.runs()
	slices.Sort(got)
	if !slices.Equal(got, []string{"r-t1", "r-t2", "r-t3", "r-t4", "r-t5"}) {
		t.Fatalf("started %v; want each task's run once", got)
	}
	err := f.pool.Store.ClaimPoolTask(f.ctx, dynamodb.PoolClaim{TaskID: "t1", RunID: "r-other"})
	if stratus.ErrorCode(err) != stratus.ECONFLICT || !strings.Contains(err.Error(), "r-t1") {
		t.Errorf("a second claim of t1: %v; want ECONFLICT naming r-t1", err)
	}
}

// Bad input (README.md § Task pool): a depends_on cycle, an unknown id, a
// file nobody submitted, a file changed since it was submitted: each moved
// to failed/ with the reason, nothing started; a file that does not parse
// stays pending.
func TestTick_RefusesWhatCanNeverRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	f.submit(t, "a", "depends_on: [b]\n")
	f.submit(t, "b", "depends_on: [a]\n")
	f.submit(t, "c", "depends_on: [nope]\n")
	f.submit(t, "d", "")
	// d's file rewritten by hand after its submit; e written by hand.
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Pending, "d.md"), taskFile("d", "priority: high\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Pending, "e.md"), taskFile("e", "")); err != nil {
		t.Fatal(err)
	}
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Pending, "half.md"), []byte("---\nid: [\n")); err != nil {
		t.Fatal(err)
	}
	f.tick(t)
	if got := f.ex.runs(); len(got) != 0 {
		t.Fatalf("started %v; want nothing", got)
	}
	for id, why := range map[string]string{"a": "depends_on cycle", "b": "depends_on cycle", "c": "depends_on nope", "d": "not the task file submitted", "e": "no run was prepared"} {
		sum, err := f.pool.Sink.Get(f.ctx, TaskKey(taskpool.Failed, id+".summary.md"))
		if err != nil || !strings.Contains(string(sum), why) {
			t.Errorf("%s: summary %q %v; want %q", id, sum, err, why)
		}
	}
	if got := f.keys(t, taskpool.Pending); !slices.Equal(got, []string{"half.md"}) {
		t.Errorf("pending/ = %v; want only the file that does not parse", got)
	}
}

// A claim that died after its conditional write, before the run was
// recorded: the next claim launches that very run.
func TestTick_AClaimThatDiedIsLaunchedByTheNext(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.submit(t, "t1", "")
	if err := f.pool.Store.ClaimPoolTask(f.ctx, dynamodb.PoolClaim{TaskID: "t1", File: "t1.md", RunID: "r-t1"}); err != nil {
		t.Fatal(err)
	}
	f.tick(t)
	if got := f.ex.runs(); !slices.Equal(got, []string{"r-t1"}) {
		t.Fatalf("started %v; want r-t1", got)
	}
	if run, err := f.pool.Store.GetRun(f.ctx, "r-t1"); err != nil || run.Status != stratus.RunRunning {
		t.Fatalf("run r-t1: %+v %v", run, err)
	}
	// Its execution failing to start ends the run failed: settled so.
	f.end(t, "t1", stratus.RunDone)
	f.submit(t, "t2", "")
	f.ex.fail = errors.New("ExecutionLimitExceeded")
	f.tick(t)
	f.ex.fail = nil
	f.tick(t)
	if got := f.keys(t, taskpool.Failed); !slices.Equal(got, []string{"t2.md", "t2.summary.md"}) {
		t.Errorf("failed/ = %v; want t2, whose execution did not start", got)
	}
}

// Submit refuses a task queued already.
func TestSubmit_RefusesATaskQueuedAlready(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.submit(t, "t1", "")
	err := f.pool.Submit(f.ctx, Prepared{Run: stratus.Run{ID: "r-again", TaskID: "t1"}, File: "other.md"}, taskFile("t1", ""))
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "queued already") {
		t.Fatalf("Submit of a queued task: %v; want EINVALID queued already", err)
	}
}

// A task refused when taken frees its slot at once: the next eligible task
// starts in the same claim.
func TestTick_ARefusedTaskFreesItsSlotForTheNext(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Pending, "a.md"), taskFile("a", "priority: high\n")); err != nil {
		t.Fatal(err)
	}
	f.submit(t, "b", "priority: low\n")
	// a, written by hand, is taken first (high) and refused: the pool has
	// an environment but this claim cannot prepare runs.
	f.tick(t)
	if got := f.ex.runs(); !slices.Equal(got, []string{"r-b"}) {
		t.Fatalf("started %v; want r-b in the claim that refused a", got)
	}
	if got := f.keys(t, taskpool.Failed); !slices.Equal(got, []string{"a.md", "a.summary.md"}) {
		t.Errorf("failed/ = %v; want a", got)
	}
}

// Two raw files of one id: the task runs once, the second file is refused
// beside its own summary (not over the first's), and the listing gives a
// refused file no run of another's.
func TestTick_ASecondFileOfAnIDIsRefusedNotRunTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	f.submit(t, "d1", "")
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Pending, "d1copy.md"), taskFile("d1", "")); err != nil {
		t.Fatal(err)
	}
	f.tick(t)
	if got := f.ex.runs(); !slices.Equal(got, []string{"r-d1"}) {
		t.Fatalf("started %v; want r-d1 once", got)
	}
	if got := f.keys(t, taskpool.Failed); !slices.Equal(got, []string{"d1copy.md", "d1copy.summary.md"}) {
		t.Fatalf("failed/ = %v; want d1copy beside its own summary", got)
	}
	l, err := f.pool.Listing(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range l {
		if r.File == "d1copy.md" && r.RunID != "" {
			t.Errorf("the refused d1copy.md is listed with run %s, d1.md's", r.RunID)
		}
	}
}

// CheckSubmit refuses, before anything is prepared, a batch with one file
// twice, two files of one name or of one id, a task queued already, and a
// file whose name done/ holds for another task.
func TestCheckSubmit_RefusesWhatSubmitWould(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1)
	f.submit(t, "q1", "")
	if err := f.pool.Sink.Put(f.ctx, TaskKey(taskpool.Done, "k.md"), taskFile("k", "")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := func(rel, id string) string {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, taskFile(id, ""), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, a2, b, b2, q1, k := file("a.md", "a"), file("sub/a.md", "a2"), file("b.md", "b"), file("b2.md", "b"), file("q1.md", "q1"), file("k2/k.md", "other")
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{a, a}, "would both be queued"},
		{[]string{a, a2}, "would both be queued"},
		{[]string{b, b2}, "are both task b"},
		{[]string{a, q1}, "queued already"},
		{[]string{k}, "is task k's"},
	} {
		err := f.pool.CheckSubmit(f.ctx, c.paths)
		if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckSubmit %v: %v; want EINVALID %q", c.paths, err, c.want)
		}
	}
	if err := f.pool.CheckSubmit(f.ctx, []string{a, b}); err != nil {
		t.Errorf("CheckSubmit of a good batch: %v", err)
	}
}
