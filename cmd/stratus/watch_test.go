package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// poolWorkDir is an installed git work dir whose tasks run flow "tiny"
// (writeTwoStepFlow) on engine.sh holding engine, in the work dir
// (workspace: workdir), with an empty task pool in tasks/, all committed.
func poolWorkDir(t *testing.T, engine string) string {
	t.Helper()
	dir, task := tinyRun(t, "", engine, "", "unused")
	if err := os.Remove(task); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"workspace: workdir\n")
	for _, s := range []string{"preparing", "pending", "done", "failed"} {
		writeTestFile(t, filepath.Join(dir, "tasks", s, ".keep"), "")
	}
	writeTestFile(t, filepath.Join(dir, ".gitignore"), "engine.*\nslow\nrunning.*\npairs.log\n")
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "pool")
	return dir
}

// poolTask writes task id, flow tiny, into the pool's state directory,
// with front matter lines extra.
func poolTask(t *testing.T, dir, state, id, extra string) {
	t.Helper()
	writeTestFile(t, filepath.Join(dir, "tasks", state, id+".md"), "---\nid: "+id+"\ntitle: "+id+"\ntask_type: tiny\n"+extra+"---\nDo "+id+".\n")
}

var claimLine = regexp.MustCompile(`stratus: watch: claimed task (\S+) .*: run (\S+)`)

// claimed returns the task ids claimed in a watcher's stderr, in order.
func claimed(stderr string) []string {
	var out []string
	for _, m := range claimLine.FindAllStringSubmatch(stderr, -1) {
		out = append(out, m[1])
	}
	return out
}

// inDir lists the task files (not summaries) of tasks/state.
func inDir(t *testing.T, dir, state string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "tasks", state))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if n := de.Name(); strings.HasSuffix(n, ".md") && !strings.HasSuffix(n, ".summary.md") {
			out = append(out, strings.TrimSuffix(n, ".md"))
		}
	}
	slices.Sort(out)
	return out
}

// poolTasks is `stratus tasks --json`, by id.
func poolTasks(t *testing.T, dir string) map[string]PoolTask {
	t.Helper()
	r := runCLI(t, "tasks", "--json", "--dir", dir)
	if r.code != 0 {
		t.Fatalf("tasks: exit %d\n%s", r.code, r.stderr)
	}
	var l []PoolTask
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
		t.Fatalf("tasks --json: %v\n%s", err, r.stdout)
	}
	out := map[string]PoolTask{}
	for _, p := range l {
		out[p.ID] = p
	}
	return out
}

// README.md § Task pool: five tasks — priorities, one in a queue the
// watcher does not serve, a depends_on chain — run in the pool's order
// (depends_on before priority, then high > mid > low), each moved to done/
// beside its summary in an audit commit of only its files; the other
// queue's task stays pending.
func TestWatch_RunsThePoolInOrderAndFilesEachTask(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "t1", "priority: low\n")
	poolTask(t, dir, "pending", "t2", "priority: high\ndepends_on: [t10]\n")
	poolTask(t, dir, "pending", "t3", "priority: high\nqueue: gpu\n")
	poolTask(t, dir, "pending", "t9", "")
	poolTask(t, dir, "pending", "t10", "depends_on: [t1]\n")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-q", "-m", "five tasks")
	before := poolTasks(t, dir)
	if before["t2"].Waits != "depends_on t10" || before["t3"].Waits != "queue other" || before["t1"].Waits != "queue full" || before["t9"].Waits != "" {
		t.Errorf("tasks before the watch: %+v", before)
	}
	// Something the operator staged stays out of the audit commits.
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "mine\n")
	gitIn(t, dir, "add", "notes.txt")

	r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != ExitOK {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	if got, want := claimed(r.stderr), []string{"t9", "t1", "t10", "t2"}; !slices.Equal(got, want) {
		t.Fatalf("run order %v; want %v\n%s", got, want, r.stderr)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"t1", "t10", "t2", "t9"}) {
		t.Errorf("done/: %v", got)
	}
	if got := inDir(t, dir, "pending"); !slices.Equal(got, []string{"t3"}) {
		t.Errorf("pending/: %v; want t3 alone (queue gpu)", got)
	}
	after := poolTasks(t, dir)
	for _, id := range []string{"t1", "t2", "t9", "t10"} {
		sum := readFile(t, filepath.Join(dir, "tasks/done", id+".summary.md"))
		if after[id].State != "done" || after[id].RunID == "" || !strings.Contains(sum, after[id].RunID) {
			t.Errorf("%s: %+v; its summary does not name its run:\n%s", id, after[id], sum)
		}
		msg := "chore(orchestrator): audit trail for " + id
		var commits []string
		for _, l := range strings.Split(gitIn(t, dir, "log", "--format=%H %s"), "\n") {
			if h, subject, _ := strings.Cut(l, " "); subject == msg {
				commits = append(commits, h)
			}
		}
		if len(commits) != 1 {
			t.Fatalf("%s: want one audit commit %q, got %v", id, msg, commits)
		}
		commit := commits[0]
		files := gitIn(t, dir, "show", "--no-renames", "--name-status", "--format=%an <%ae>", commit)
		want := "Stratus <stratus@stratus.invalid>\n\nA\ttasks/done/" + id + ".md\nA\ttasks/done/" + id + ".summary.md\nD\ttasks/pending/" + id + ".md"
		if files != want {
			t.Errorf("audit commit of %s:\n%s\nwant:\n%s", id, files, want)
		}
	}
	if st := gitIn(t, dir, "status", "--porcelain", "--untracked-files=no"); st != "A  notes.txt" {
		t.Errorf("git status after the watch: %q; want the operator's staged file alone", st)
	}
}

// README.md § Task pool: two watchers started at once on one pool run
// each task once.
func TestWatch_TwoWatchersRunEachTaskOnce(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	ids := []string{"a1", "a2", "a3", "a4", "a5"}
	for _, id := range ids {
		poolTask(t, dir, "pending", id, "")
	}
	// Both watchers scan the same pool before either claims: the test
	// holds the pool's lock, under which claims are made, until both wait
	// for it (Linux's /proc/locks shows the waiters).
	unlock := holdPoolLock(t, dir)
	w1 := startCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	w2 := startCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	waitForLockWaiters(t, w1.cmd.Process.Pid, w2.cmd.Process.Pid)
	unlock()
	if c1, c2 := w1.wait(t), w2.wait(t); c1 != 0 || c2 != 0 {
		t.Fatalf("watchers: exit %d and %d\n%s\n---\n%s", c1, c2, w1.log(), w2.log())
	}
	all := append(claimed(w1.log()), claimed(w2.log())...)
	slices.Sort(all)
	if !slices.Equal(all, ids) {
		t.Fatalf("claims of both watchers: %v; want each task once\n%s\n---\n%s", all, w1.log(), w2.log())
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, ids) {
		t.Errorf("done/: %v", got)
	}
	r := runCLI(t, "runs", "--json", "--dir", dir)
	if n := strings.Count(r.stdout, `"run_id"`); n != len(ids) {
		t.Errorf("%d runs recorded; want %d\n%s", n, len(ids), r.stdout)
	}
}

// README.md § Task pool: a watcher killed (SIGKILL) during a run leaves
// its claim; the next watch adopts it and resumes the run from the step
// it was in: no task runs twice, none is lost.
func TestWatch_AKilledWatchersRunResumesUnderTheNextOne(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, secondHangsEngine)
	poolTask(t, dir, "pending", "k1", "priority: high\n")
	poolTask(t, dir, "pending", "k2", "")
	writeTestFile(t, filepath.Join(dir, "slow"), "")
	w := startCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	runID := killOwner(t, dir, w)
	if got := claimed(w.log()); !slices.Equal(got, []string{"k1"}) {
		t.Fatalf("claims before the kill: %v\n%s", got, w.log())
	}
	if p := poolTasks(t, dir)["k1"]; p.State != "claimed" || p.RunID != runID {
		t.Errorf("k1 after the kill: %+v; want claimed by run %s", p, runID)
	}
	if err := os.Remove(filepath.Join(dir, "slow")); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != ExitOK {
		t.Fatalf("second watch: exit %d\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "adopted task k1 (run "+runID+")") || !strings.Contains(r.stderr, "resuming run "+runID) {
		t.Errorf("the second watch did not adopt and resume run %s:\n%s", runID, r.stderr)
	}
	if got := claimed(r.stderr); !slices.Equal(got, []string{"k2"}) {
		t.Errorf("the second watch claimed %v; want k2 alone (k1 adopted, not claimed again)", got)
	}
	// k1's resumed run: answer again, then publish; first is not run again.
	if got := join(steps(r.stderr)); !strings.HasPrefix(got, "answer#2:done publish#1:done") {
		t.Errorf("steps: %s", got)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"k1", "k2"}) {
		t.Errorf("done/: %v", got)
	}
	if p := poolTasks(t, dir)["k1"]; p.RunID != runID {
		t.Errorf("k1 ran under %s; want %s", p.RunID, runID)
	}
	if n := strings.Count(runCLI(t, "runs", "--json", "--dir", dir).stdout, `"run_id"`); n != 2 {
		t.Errorf("%d runs recorded; want 2", n)
	}
}

// README.md § Task pool: bad input. A depends_on cycle and an unknown id
// move to failed/ naming the cycle or the id; a half-written file stays
// in pending/ with a warning; a task naming no flow fails with
// validation's message; the others run.
func TestWatch_BadInputIsRefusedOrLeft(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "ca", "depends_on: [cb]\n")
	poolTask(t, dir, "pending", "cb", "depends_on: [ca]\n")
	poolTask(t, dir, "pending", "un", "depends_on: [ghost]\n")
	writeTestFile(t, filepath.Join(dir, "tasks/pending/half.md"), "---\nid: half\ntitle: half\n")
	writeTestFile(t, filepath.Join(dir, "tasks/pending/nf.md"), "---\nid: nf\ntitle: nf\ntask_type: nosuch\n---\nbody\n")
	poolTask(t, dir, "pending", "ok", "")
	r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != ExitOK {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	if got := inDir(t, dir, "failed"); !slices.Equal(got, []string{"ca", "cb", "nf", "un"}) {
		t.Errorf("failed/: %v\n%s", got, r.stderr)
	}
	for id, want := range map[string]string{
		"ca": "depends_on cycle: ca → cb → ca", "cb": "depends_on cycle: cb → ca → cb",
		"un": "depends_on ghost: no task of the pool has that id", "nf": `task_type "nosuch" has no flow file`,
	} {
		if sum := readFile(t, filepath.Join(dir, "tasks/failed", id+".summary.md")); !strings.Contains(sum, want) {
			t.Errorf("%s.summary.md does not say %q:\n%s", id, want, sum)
		}
	}
	if p := poolTasks(t, dir)["nf"]; p.State != "failed" || p.RunID != "" {
		t.Errorf("tasks: nf: %+v; want failed with no run (none started)", p)
	}
	if got := inDir(t, dir, "pending"); !slices.Equal(got, []string{"half"}) {
		t.Errorf("pending/: %v; want half.md left", got)
	}
	if !strings.Contains(r.stderr, "warning: "+filepath.Join(dir, "tasks/pending/half.md")+" is not taken") {
		t.Errorf("no warning for half.md:\n%s", r.stderr)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("done/: %v", got)
	}
	if p := poolTasks(t, dir)["half"]; p.State != "pending" || !strings.Contains(p.Invalid, "closing `---`") {
		t.Errorf("tasks: half: %+v", p)
	}
}

// README.md § Task pool: paths.tasks_dir must stay inside the work dir;
// watch, tasks and promote refuse it at load, naming the field.
func TestWatch_TasksDirOutsideTheWorkDirIsRefused(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"paths:\n  tasks_dir: ../elsewhere\n")
	for _, args := range [][]string{{"watch", "--once"}, {"tasks"}, {"promote", "--all"}} {
		r := runCLI(t, append(args, "--dir", dir)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, `paths.tasks_dir: "../elsewhere" leaves the work dir`) {
			t.Errorf("%v: exit %d\n%s", args, r.code, r.stderr)
		}
	}
}

// README.md § Task pool: promote moves a task from preparing/ to
// pending/ by id or file, or all of them; a name not there exits 2.
func TestPromote_MovesFromPreparingAndRefusesWhatIsNotThere(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	for _, id := range []string{"p1", "p2", "p3"} {
		poolTask(t, dir, "preparing", id, "")
	}
	if p := poolTasks(t, dir)["p1"]; p.State != "preparing" {
		t.Errorf("tasks: p1 %+v", p)
	}
	if r := runCLI(t, "promote", "p1", "--dir", dir); r.code != 0 {
		t.Fatalf("promote p1: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "promote", filepath.Join(dir, "tasks/preparing/p2.md"), "--dir", dir); r.code != 0 {
		t.Fatalf("promote FILE: exit %d\n%s", r.code, r.stderr)
	}
	if got := inDir(t, dir, "pending"); !slices.Equal(got, []string{"p1", "p2"}) {
		t.Errorf("pending/: %v", got)
	}
	if r := runCLI(t, "promote", "p1", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, `"p1" is not in `+filepath.Join(dir, "tasks/preparing")) {
		t.Errorf("promote of a task not in preparing/: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "promote", "--dir", dir); r.code != ExitUsage {
		t.Errorf("promote with nothing named: exit %d", r.code)
	}
	if r := runCLI(t, "promote", "--all", "--dir", dir); r.code != 0 {
		t.Fatalf("promote --all: exit %d\n%s", r.code, r.stderr)
	}
	if got := inDir(t, dir, "preparing"); len(got) != 0 {
		t.Errorf("preparing/ after --all: %v", got)
	}
	if p := poolTasks(t, dir)["p3"]; p.State != "pending" {
		t.Errorf("tasks: p3 %+v", p)
	}
}

// holdPoolLock takes dir's task pool lock (.stratus/pool/lock, an flock)
// and returns its release.
func holdPoolLock(t *testing.T, dir string) func() {
	t.Helper()
	path := filepath.Join(dir, ".stratus/pool/lock")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }
}

// waitForLockWaiters waits until each of pids waits for an flock
// (/proc/locks: a "->" line naming the pid); skipped without /proc/locks.
func waitForLockWaiters(t *testing.T, pids ...int) {
	t.Helper()
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks: cannot tell that both watchers scanned before claiming")
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile("/proc/locks")
		waiting := 0
		for _, pid := range pids {
			for _, l := range strings.Split(string(b), "\n") {
				f := strings.Fields(l)
				if len(f) > 5 && f[1] == "->" && f[5] == strconv.Itoa(pid) {
					waiting++
					break
				}
			}
		}
		if waiting == len(pids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watchers %v do not both wait for the pool's lock:\n%s", pids, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// README.md § Task pool: each tick brings the base branch up to date
// first (git fetch and a fast-forward): a task pushed to the remote is
// run; a checkout with changes is not fast-forwarded, and the watcher says
// so.
func TestWatch_FetchesTasksPushedToTheBaseBranch(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	remote := filepath.Join(t.TempDir(), "origin.git")
	gitIn(t, dir, "init", "-q", "--bare", "-b", "main", remote)
	gitIn(t, dir, "remote", "add", "origin", remote)
	gitIn(t, dir, "push", "-q", "origin", "main")
	other := filepath.Join(t.TempDir(), "other")
	gitIn(t, dir, "clone", "-q", remote, other)
	poolTask(t, other, "pending", "pushed", "")
	gitIn(t, other, "add", "-A")
	gitIn(t, other, "commit", "-q", "-m", "a task")
	gitIn(t, other, "push", "-q", "origin", "main")

	// A tracked change in the checkout: no fast-forward, said.
	keep := filepath.Join(dir, "tasks/done/.keep")
	writeTestFile(t, keep, "changed\n")
	r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != 0 || !strings.Contains(r.stderr, "no git fetch this tick: the checkout has changes") || len(claimed(r.stderr)) != 0 {
		t.Fatalf("watch on a changed checkout: exit %d\n%s", r.code, r.stderr)
	}
	gitIn(t, dir, "checkout", "-q", "--", "tasks/done/.keep")
	r = runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != 0 || !slices.Equal(claimed(r.stderr), []string{"pushed"}) {
		t.Fatalf("watch: exit %d; want the pushed task run\n%s", r.code, r.stderr)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"pushed"}) {
		t.Errorf("done/: %v", got)
	}
}

// README.md § Task pool: SIGINT stops the watcher with its run
// interrupted as `stratus run` leaves one (exit 130); the next watch
// resumes it.
func TestWatch_InterruptedWatcherExits130AndTheNextResumes(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, secondHangsEngine)
	poolTask(t, dir, "pending", "i1", "")
	writeTestFile(t, filepath.Join(dir, "slow"), "")
	w := startCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	eventually(t, 60*time.Second, "the second step hangs", func() bool {
		_, err := os.Stat(filepath.Join(dir, "engine.pids"))
		return err == nil
	})
	if p := poolTasks(t, dir)["i1"]; p.State != "running" || p.RunID == "" {
		t.Errorf("tasks during the run: i1 %+v; want running with its run id", p)
	}
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != ExitInterrupted || !strings.Contains(w.log(), "stratus: watch: interrupted") {
		t.Fatalf("watch after SIGINT: exit %d; want %d\n%s", code, ExitInterrupted, w.log())
	}
	if got := inDir(t, dir, "pending"); !slices.Equal(got, []string{"i1"}) {
		t.Fatalf("pending/ after the interrupt: %v", got)
	}
	os.Remove(filepath.Join(dir, "slow"))
	r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0")
	if r.code != 0 || !strings.Contains(r.stderr, "resuming run") || len(claimed(r.stderr)) != 0 {
		t.Fatalf("the next watch: exit %d\n%s", r.code, r.stderr)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"i1"}) {
		t.Errorf("done/: %v", got)
	}
}

// pairEngine answers "ok"; a first step waits (30 s at most) until
// another first step runs beside it and notes in pairs.log whether one did.
const pairEngine = `read line
case "$line" in
*"First for"*)
  touch "running.$$"
  i=0
  while [ "$(ls running.* | wc -l)" -lt 2 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
  if [ $i -lt 300 ]; then echo together >> pairs.log; else echo alone >> pairs.log; fi
  sleep 0.5
  rm -f "running.$$"
  ;;
esac
printf '{"subrun_report": "ok"}\n'
`

// README.md § Task pool: orchestrator.max_concurrent_tasks runs that many
// tasks at once (here two, whose first steps wait for each other).
func TestWatch_MaxConcurrentTasksRunsThatManyAtOnce(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, pairEngine)
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"orchestrator:\n  max_concurrent_tasks: 2\n")
	poolTask(t, dir, "pending", "m1", "")
	poolTask(t, dir, "pending", "m2", "")
	r := runCLI(t, "watch", "--dir", dir, "--once")
	if r.code != 0 {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	if got := strings.Fields(readFile(t, filepath.Join(dir, "pairs.log"))); !slices.Equal(got, []string{"together", "together"}) {
		t.Errorf("first steps: %v; want both run together\n%s", got, r.stderr)
	}
	if got := inDir(t, dir, "done"); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("done/: %v", got)
	}
}

// README.md § Task pool: a dependency whose run opened a pull request
// counts once that pull request is merged, not before.
func TestWatch_DependsOnWaitsForTheDependencysPullRequestToMerge(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "base", "")
	if r := runCLI(t, "watch", "--dir", dir, "--once"); r.code != 0 {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	runID := poolTasks(t, dir)["base"].RunID
	setPR := func(state string) {
		st, err := openRuns(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		pub := stratus.Publication{Branch: "stratus/base", Remote: "origin", PullRequest: &stratus.PullRequest{Number: 7, State: state}}
		if err := st.SetPublication(context.Background(), runID, pub); err != nil {
			t.Fatal(err)
		}
	}
	setPR("open")
	poolTask(t, dir, "pending", "next", "depends_on: [base]\n")
	if p := poolTasks(t, dir)["next"]; p.Waits != "depends_on base (pull request #7 is open, not merged)" {
		t.Errorf("next waits %q", p.Waits)
	}
	if r := runCLI(t, "watch", "--dir", dir, "--once"); r.code != 0 || len(claimed(r.stderr)) != 0 {
		t.Fatalf("watch with the pull request open: exit %d\n%s", r.code, r.stderr)
	}
	setPR("merged")
	if r := runCLI(t, "watch", "--dir", dir, "--once"); r.code != 0 || !slices.Equal(claimed(r.stderr), []string{"next"}) {
		t.Fatalf("watch with the pull request merged: exit %d\n%s", r.code, r.stderr)
	}
}

// README.md § Task pool: with orchestrator.auto_mode.enabled and a poll
// interval, the watcher takes the next task as soon as one ends (not at
// the next tick, an hour away here), then goes on watching until SIGTERM.
func TestWatch_AutoModeChainsTasksAndKeepsWatching(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"orchestrator:\n  auto_mode:\n    enabled: true\n  poll_interval_seconds: 3600\n")
	poolTask(t, dir, "pending", "c1", "")
	poolTask(t, dir, "pending", "c2", "")
	w := startCLI(t, "watch", "--dir", dir)
	eventually(t, 60*time.Second, "both tasks done", func() bool {
		return len(inDir(t, dir, "done")) == 2
	})
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := w.wait(t); code != ExitInterrupted {
		t.Fatalf("watch after SIGTERM: exit %d\n%s", code, w.log())
	}
	if got := claimed(w.log()); !slices.Equal(got, []string{"c1", "c2"}) {
		t.Errorf("claims %v", got)
	}
}
