package statedir

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// README § Workspaces: after install and a run, `git add -A` stages the
// operator's inputs and .stratus/.gitignore, no runtime file.
func TestWriteGitIgnore_StagesOnlyTheInputs(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	state := filepath.Join(dir, ".stratus")
	for _, rel := range []string{"config.yaml", "scenario.yaml", "flows/implementation.yaml", "flows/roles/supervisor.md", "tools/lint",
		"stratus.db", "stratus.db-wal", "stratus.db-shm", "hmac.key", "logs/t1/summary.md", "locks/t1.lock", "runs/r1/bundle/config.yaml",
		"uploads/u1", "host/stratus.sock", "host.log", "ctx/t1/plan.md", "pruned", "flows.bak-20260101T000000Z/x.yaml", "task/task.md"} {
		write(t, state, rel, 0o600)
	}
	if wrote, err := WriteGitIgnore(state); err != nil || !wrote {
		t.Fatalf("WriteGitIgnore = %v, %v", wrote, err)
	}
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	git("init", "-q")
	git("add", "-A")
	got := strings.Fields(git("diff", "--cached", "--name-only"))
	sort.Strings(got)
	want := []string{".stratus/.gitignore", ".stratus/config.yaml", ".stratus/flows/implementation.yaml", ".stratus/flows/roles/supervisor.md", ".stratus/scenario.yaml", ".stratus/tools/lint"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("git add -A staged\n %q\nwant\n %q", got, want)
	}
}

// An existing .gitignore is appended to, never overwritten, and a second
// install adds nothing.
func TestWriteGitIgnore_AppendsOnceToAnExistingFile(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), ".stratus")
	write(t, state, ".gitignore", 0o600)
	if err := os.WriteFile(filepath.Join(state, ".gitignore"), []byte("my-notes.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false} {
		if wrote, err := WriteGitIgnore(state); err != nil || wrote != want {
			t.Fatalf("install %d: WriteGitIgnore = %v, %v; want %v", i+1, wrote, err, want)
		}
	}
	b, err := os.ReadFile(filepath.Join(state, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "my-notes.txt\n\n" + string(GitIgnore()); string(b) != want {
		t.Errorf(".gitignore =\n%s\nwant\n%s", b, want)
	}
}
