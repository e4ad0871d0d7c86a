package taskpool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/task"
)

func entry(t *testing.T, state, file, front string) Entry {
	t.Helper()
	tk, err := task.Parse(file, []byte("---\n"+front+"\n---\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	return Entry{State: state, File: file, Path: "/nowhere/" + file, Task: tk}
}

func ids(l []Entry) []string {
	var out []string
	for _, e := range l {
		out = append(out, e.ID())
	}
	return out
}

// TestNaturalCompare_DigitRunsAsNumbers // README.md § Task pool: ties in
// natural file name order, t2 before t10.
func TestNaturalCompare_DigitRunsAsNumbers(t *testing.T) {
	l := []string{"t10.md", "t2.md", "t1.md", "a.md", "t02b.md"}
	slices.SortFunc(l, NaturalCompare)
	if want := []string{"a.md", "t1.md", "t2.md", "t02b.md", "t10.md"}; !slices.Equal(l, want) {
		t.Fatalf("order %v; want %v", l, want)
	}
}

// TestDecide_DependsOnBeatsPriorityThenPriorityThenName // README.md §
// Task pool.
func TestDecide_DependsOnBeatsPriorityThenPriorityThenName(t *testing.T) {
	in := Input{Queue: "default", Free: 10, Entries: map[string][]Entry{
		Pending: {
			entry(t, Pending, "t10.md", "id: t10\ntitle: x"),
			entry(t, Pending, "t2.md", "id: t2\ntitle: x"),
			entry(t, Pending, "hi.md", "id: hi\ntitle: x\npriority: high\ndepends_on: [lo]"),
			entry(t, Pending, "lo.md", "id: lo\ntitle: x\npriority: low"),
			entry(t, Pending, "top.md", "id: top\ntitle: x\npriority: high"),
			entry(t, Pending, "gpu.md", "id: gpu\ntitle: x\npriority: high\nqueue: gpu"),
			entry(t, Pending, "odd.md", "id: odd\ntitle: x\npriority: urgent"),
		},
	}}
	plan := Decide(in)
	if got, want := ids(plan.Next), []string{"top", "odd", "t2", "t10", "lo"}; !slices.Equal(got, want) {
		t.Fatalf("next %v; want %v", got, want)
	}
	waits := map[string]string{}
	for _, d := range plan.Pending {
		waits[d.Entry.ID()] = d.Waits
	}
	if waits["hi"] != "depends_on lo" || waits["gpu"] != "queue other" {
		t.Fatalf("waits %v", waits)
	}
	in.Free = 1
	plan = Decide(in)
	for _, d := range plan.Pending {
		waits[d.Entry.ID()] = d.Waits
	}
	if !slices.Equal(ids(plan.Next), []string{"top"}) || waits["t2"] != "queue full" {
		t.Fatalf("Free 1: next %v waits %v", ids(plan.Next), waits)
	}
	// Once lo is done, hi goes first; with its pull request open, not yet.
	in.Free = 10
	in.Entries[Done] = []Entry{entry(t, Done, "lo.md", "id: lo\ntitle: x")}
	in.Entries[Pending] = slices.DeleteFunc(slices.Clone(in.Entries[Pending]), func(e Entry) bool { return e.ID() == "lo" })
	if got := ids(Decide(in).Next); got[0] != "hi" {
		t.Fatalf("lo done: next %v; want hi first", got)
	}
	in.Unmerged = func(id string) string { return "pull request #3 is open" }
	for _, d := range Decide(in).Pending {
		if d.Entry.ID() == "hi" && d.Waits != "depends_on lo (pull request #3 is open)" {
			t.Fatalf("hi waits %q", d.Waits)
		}
	}
}

// TestDecide_CycleAndUnknownIDAreRefused // README.md § Task pool: bad input.
func TestDecide_CycleAndUnknownIDAreRefused(t *testing.T) {
	plan := Decide(Input{Queue: "default", Free: 10, Entries: map[string][]Entry{
		Pending: {
			entry(t, Pending, "a.md", "id: a\ntitle: x\ndepends_on: [b]"),
			entry(t, Pending, "b.md", "id: b\ntitle: x\ndepends_on: [a]"),
			entry(t, Pending, "c.md", "id: c\ntitle: x\ndepends_on: [ghost]"),
			entry(t, Pending, "d.md", "id: d\ntitle: x\ndepends_on: [a]"),
			entry(t, Pending, "s.md", "id: s\ntitle: x\ndepends_on: [s]"),
		},
		Preparing: {entry(t, Preparing, "p.md", "id: p\ntitle: x")},
	}})
	refused := map[string]string{}
	for _, d := range plan.Pending {
		refused[d.Entry.ID()] = d.Refuse + "|" + d.Waits
	}
	for id, want := range map[string]string{
		"a": "depends_on cycle: a → b → a|", "b": "depends_on cycle: b → a → b|",
		"c": "depends_on ghost: no task of the pool has that id", "d": "|depends_on a", "s": "depends_on cycle: s → s|",
	} {
		if !strings.HasPrefix(refused[id], want) {
			t.Errorf("%s: %q; want %q", id, refused[id], want)
		}
	}
	if len(plan.Next) != 0 {
		t.Fatalf("next %v", ids(plan.Next))
	}
}

// TestClaim_OneWatcherPerTaskAndAdoptionOfAGoneOne // README.md § Task
// pool: a claim is exclusive while its watcher lives; released, the task
// cannot be claimed again from a stale scan.
func TestClaim_OneWatcherPerTaskAndAdoptionOfAGoneOne(t *testing.T) {
	dir := t.TempDir()
	p := New(dir, ".stratus", "tasks")
	os.MkdirAll(p.Dir(Pending), 0o755)
	os.WriteFile(filepath.Join(p.Dir(Pending), "t1.md"), []byte("---\nid: t1\ntitle: x\n---\n"), 0o644)
	l, err := p.List(Pending)
	if err != nil || len(l) != 1 {
		t.Fatal(l, err)
	}
	c, err := p.Claim(l[0], "r-1", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Claim(l[0], "r-2", "w2"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("second claim: %v", err)
	}
	if _, err := p.Adopt("t1", "w2"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("adopt a held claim: %v", err)
	}
	cs, _ := p.Claims()
	if len(cs) != 1 || !cs[0].Held || cs[0].RunID != "r-1" {
		t.Fatalf("claims %+v", cs)
	}
	// The watcher gone (its lock let go, as a killed process's is).
	c.f.Close()
	a, err := p.Adopt("t1", "w3")
	if err != nil || a.RunID != "r-1" || a.Owner != "w3" {
		t.Fatalf("adopt: %+v %v", a, err)
	}
	if _, err := p.Move(dir, a, Done, []byte("# summary\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(a); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Claim(l[0], "r-4", "w4"); !errors.Is(err, ErrClaimed) {
		t.Fatalf("claim from a stale scan after the task ended: %v", err)
	}
	if e, ok := p.Ended("t1"); !ok || e.RunID != "r-1" {
		t.Fatalf("ended %+v %v", e, ok)
	}
}

// TestAuditCommit_OnlyTheTasksFiles // README.md § Task pool: the audit
// commit holds the task's move and summary, nothing else staged or
// changed, by Stratus's identity.
func TestAuditCommit_OnlyTheTasksFiles(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=u", "GIT_AUTHOR_EMAIL=u@x", "GIT_COMMITTER_NAME=u", "GIT_COMMITTER_EMAIL=u@x")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	p := New(dir, ".stratus", "tasks")
	os.MkdirAll(p.Dir(Pending), 0o755)
	for _, f := range []string{"t1.md", "t2.md"} {
		os.WriteFile(filepath.Join(p.Dir(Pending), f), []byte("---\nid: "+strings.TrimSuffix(f, ".md")+"\ntitle: x\n---\n"), 0o644)
	}
	git("add", ".")
	git("commit", "-qm", "tasks")
	os.WriteFile(filepath.Join(dir, "staged.txt"), []byte("x"), 0o644)
	git("add", "staged.txt")
	paths, err := p.Move(dir, &Claim{TaskID: "t1", File: "t1.md"}, Done, []byte("# t1\n"))
	if err != nil {
		t.Fatal(err)
	}
	commit, note, err := p.AuditCommit(context.Background(), dir, "chore(orchestrator): audit trail for t1", paths)
	if err != nil || commit == "" {
		t.Fatalf("commit %q note %q err %v", commit, note, err)
	}
	files := git("show", "--no-renames", "--name-status", "--format=%an <%ae>|%s", commit)
	want := "Stratus <stratus@stratus.invalid>|chore(orchestrator): audit trail for t1\n\nA\ttasks/done/t1.md\nA\ttasks/done/t1.summary.md\nD\ttasks/pending/t1.md"
	if files != want {
		t.Fatalf("commit:\n%s\nwant:\n%s", files, want)
	}
	if st := git("status", "--porcelain", "--untracked-files=no"); st != "A  staged.txt" {
		t.Fatalf("status after: %q", st)
	}
}

// One id, one task: a second pending file of an id is refused (the first
// in natural file name order runs), naming the first; a pending file named
// as another task's file in done/ or failed/ waits, so that moving it never
// replaces that file. A refused file's summary is named after it.
func TestDecide_DuplicateIDRefusedNameTakenWaits(t *testing.T) {
	in := Input{Queue: DefaultQueue, Free: 5, Entries: map[string][]Entry{
		Pending: {entry(t, Pending, "b.md", "id: b\ntitle: B"), entry(t, Pending, "zz-b.md", "id: b\ntitle: B again"),
			entry(t, Pending, "k.md", "id: other\ntitle: O")},
		Done: {entry(t, Done, "k.md", "id: k\ntitle: K")},
	}}
	plan := Decide(in)
	if got := ids(plan.Next); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("next %v; want b once", got)
	}
	why := map[string]Decision{}
	for _, d := range plan.Pending {
		why[d.Entry.File] = d
	}
	if d := why["zz-b.md"]; !strings.Contains(d.Refuse, "task id b is b.md's too") {
		t.Errorf("zz-b.md: %+v; want refused naming b.md", d)
	}
	if d := why["k.md"]; d.Refuse != "" || d.Waits != "file name taken: done/k.md is task k's; rename this file" {
		t.Errorf("k.md (id other): %+v; want it to wait, the name taken", d)
	}
	if got := RefusedSummary("zz-b.md"); got != "zz-b.summary.md" {
		t.Errorf("RefusedSummary = %q", got)
	}
}
