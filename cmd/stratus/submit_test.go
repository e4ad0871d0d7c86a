package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pendingFiles lists the task files of a work dir's pending/.
func pendingFiles(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "tasks", "pending"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".md") {
			out = append(out, de.Name())
		}
	}
	return out
}

// README.md § Task pool: submit checks every file before it queues any; a
// batch that names one file twice, two files of one name or two tasks of
// one id queues none (exit 2, naming both); a good batch is queued whole,
// and watch then runs each task once; a refused task's status says so.
func TestSubmit_ABatchIsCheckedWholeBeforeAnyIsQueued(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	in := t.TempDir()
	write := func(rel, id, extra string) string {
		p := filepath.Join(in, rel)
		writeTestFile(t, p, "---\nid: "+id+"\ntitle: "+id+"\ntask_type: tiny\n"+extra+"---\nDo "+id+".\n")
		return p
	}
	a, a2, b, other := write("a.md", "a", ""), write("sub/a.md", "a2", ""), write("b.md", "b", ""), write("b-again.md", "b", "")
	nosuch := filepath.Join(in, "nosuch.md")
	writeTestFile(t, nosuch, "---\nid: n\ntitle: n\ntask_type: nosuch\n---\nbody\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{a, a}, "would both be queued as a.md"},
		{[]string{a, a2}, "would both be queued as a.md"},
		{[]string{b, other}, "are both task b"},
		{[]string{a, nosuch}, "nosuch.yaml"},
	} {
		r := runCLI(t, append(append([]string{"submit"}, c.args...), "--dir", dir)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("submit %v: exit %d\n%s\nwant exit %d and %q", c.args, r.code, r.stderr, ExitUsage, c.want)
		}
		if got := pendingFiles(t, dir); len(got) != 0 {
			t.Fatalf("submit %v, refused, queued %v", c.args, got)
		}
	}
	if r := runCLI(t, "submit", a, b, "--dir", dir); r.code != ExitOK || !strings.Contains(r.stdout, "task a queued") || !strings.Contains(r.stdout, "task b queued") {
		t.Fatalf("submit a b: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := pendingFiles(t, dir); !slices.Equal(got, []string{"a.md", "b.md"}) {
		t.Fatalf("pending/ = %v; want a.md b.md", got)
	}
	// Again: both are queued already.
	if r := runCLI(t, "submit", a, "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "queued already") {
		t.Errorf("submit a again: exit %d\n%s", r.code, r.stderr)
	}
	// A second file of id b, written into pending/ by hand: refused by the
	// pool (never run twice), its reason beside it, not over b's summary.
	writeTestFile(t, filepath.Join(dir, "tasks", "pending", "zz-b.md"), "---\nid: b\ntitle: b again\ntask_type: tiny\n---\nDo b.\n")
	if r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0"); r.code != ExitOK {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	sum := readFile(t, filepath.Join(dir, "tasks", "failed", "zz-b.summary.md"))
	if !strings.Contains(sum, "task id b is b.md's too") {
		t.Errorf("zz-b's summary: %q", sum)
	}
	if s := readFile(t, filepath.Join(dir, "tasks", "done", "b.summary.md")); strings.Contains(s, "Refused") {
		t.Errorf("b's summary is the refusal's: %q", s)
	}
	r := runCLI(t, "runs", "--dir", dir, "--json")
	if n := strings.Count(r.stdout, `"task_id": "b"`); n != 1 {
		t.Errorf("task b ran %d times; want once\n%s", n, r.stdout)
	}
	// A file named as done/b.md, of another task: it would replace b's file.
	clash := write("x/b.md", "c", "")
	if r := runCLI(t, "submit", clash, "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "is task b's") {
		t.Errorf("submit of a file named as done/b.md: exit %d\n%s", r.code, r.stderr)
	}
}

// status of a task the pool refused before it ever ran says so (exit 0),
// not "no such run"; tasks --queue "" is refused as watch refuses it.
func TestStatus_ARefusedTaskSaysWhereItsReasonIs(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "cyc", "depends_on: [cyc]\n")
	if r := runCLI(t, "watch", "--dir", dir, "--poll-seconds", "0"); r.code != ExitOK {
		t.Fatalf("watch: exit %d\n%s", r.code, r.stderr)
	}
	r := runCLI(t, "status", "cyc", "--dir", dir)
	if r.code != ExitOK || !strings.Contains(r.stdout, "task cyc: failed, refused by the task pool before it ran") || !strings.Contains(r.stdout, "cyc.summary.md") {
		t.Errorf("status of a refused task: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := runCLI(t, "tasks", "--dir", dir, "--queue", ""); r.code != ExitUsage || !strings.Contains(r.stderr, "want a queue name") {
		t.Errorf("tasks --queue \"\": exit %d\n%s", r.code, r.stderr)
	}
}

// dev aws --max-concurrent-tasks takes 1 to 100, as the template's
// MaxConcurrentTasks: 0 is refused, not taken for the default.
func TestDevAWS_MaxConcurrentTasksOutOfRangeRefused(t *testing.T) {
	t.Parallel()
	for _, n := range []string{"0", "-1", "101"} {
		r := runCLI(t, "dev", "aws", "--max-concurrent-tasks", n)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "valid: 1 to 100") {
			t.Errorf("dev aws --max-concurrent-tasks %s: exit %d\n%s", n, r.code, r.stderr)
		}
	}
}
