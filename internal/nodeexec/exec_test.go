package nodeexec

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/testenv"
)

// The environment every test command gets: enough to find sh and friends.
var testEnv = []string{"PATH", "HOME"}

func writeExec(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

func checksSpec(dir string, sets ...CommandSet) Spec {
	return Spec{Kind: KindChecks, Dir: dir, AllowedEnvironment: testEnv, Checks: &ChecksSpec{Checker: CommandProfile, CommandSets: sets}}
}

func sh(name, script string) Command {
	return Command{Name: name, Argv: []string{"sh", "-c", script}}
}

// worc configuration.md § Run-all, then aggregate: every selected command
// runs, a failure does not stop the rest, and each run records its exit,
// output and cwd.
func TestRunChecks_RunsEveryCommandNoFailFast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	var progress []int
	res, err := RunChecks(context.Background(), checksSpec(dir,
		CommandSet{Name: "a", TimeoutSeconds: 60, Commands: []Command{sh("fails", "echo broken >&2; exit 3"), sh("passes", "echo fine")}},
		CommandSet{Name: "b", TimeoutSeconds: 60, Commands: []Command{{Name: "pwd", Argv: []string{"sh", "-c", "pwd"}, Cwd: "sub"}}},
	), func(n int) { progress = append(progress, n) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Selection != SelectedAll || !strings.Contains(res.Note, "not a git work tree") {
		t.Errorf("selection %q note %q", res.Selection, res.Note)
	}
	if len(res.Runs) != 3 {
		t.Fatalf("runs = %+v", res.Runs)
	}
	if r := res.Runs[0]; r.Status != StatusExited || r.ExitCode != 3 || r.Output != "broken\n" {
		t.Errorf("run 0 = %+v", r)
	}
	if r := res.Runs[1]; r.ExitCode != 0 || r.Output != "fine\n" {
		t.Errorf("run 1 = %+v", r)
	}
	real, _ := filepath.EvalSymlinks(filepath.Join(dir, "sub"))
	if r := res.Runs[2]; strings.TrimSpace(r.Output) != real && strings.TrimSpace(r.Output) != filepath.Join(dir, "sub") {
		t.Errorf("cwd run output %q, want %s", r.Output, real)
	}
	if !slices.Equal(progress, []int{1, 2, 3}) {
		t.Errorf("progress = %v", progress)
	}
	if v := ChecksVerdict(res); v.Outcome != Fail {
		t.Errorf("verdict %+v", v)
	}
}

// worc configuration.md § skip_if_unavailable: an absent binary in an
// opted-in set is a skip; in any other set a launch error (incomplete).
func TestRunChecks_AbsentBinarySkippedOnlyWhenOptedIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := Command{Name: "x", Argv: []string{"stratus-no-such-binary-x"}}
	res, err := RunChecks(context.Background(), checksSpec(dir,
		CommandSet{Name: "optional", SkipIfUnavailable: true, TimeoutSeconds: 60, Commands: []Command{missing}},
		CommandSet{Name: "required", TimeoutSeconds: 60, Commands: []Command{missing, {Name: "rel", Argv: []string{"./bin/nope"}}}},
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range res.Runs {
		got = append(got, r.Set+"/"+r.Status)
	}
	want := []string{"optional/skipped", "required/launch_error", "required/launch_error"}
	if !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if v := ChecksVerdict(res); !v.Manual || v.Error != ErrChecksIncomplete {
		t.Errorf("verdict %+v", v)
	}
	// Only the opted-in set: every check skipped is incomplete too.
	res, _ = RunChecks(context.Background(), checksSpec(dir, CommandSet{Name: "optional", SkipIfUnavailable: true, TimeoutSeconds: 60, Commands: []Command{missing}}), nil)
	if v := ChecksVerdict(res); !v.Manual || !strings.Contains(v.Reason, "skipped") {
		t.Errorf("all skipped: %+v", v)
	}
}

// A command that outlives its set's timeout is killed with everything it
// started, and recorded as timed out.
func TestRunChecks_TimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	res, err := RunChecks(context.Background(), checksSpec(dir,
		CommandSet{Name: "slow", TimeoutSeconds: 1, Commands: []Command{sh("hang", "sleep 60 & echo $! > "+pidFile+"; wait")}},
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Runs[0]; r.Status != StatusTimedOut || !strings.Contains(r.Error, "timeout of 1s") {
		t.Fatalf("run = %+v", r)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	// The grandchild was in the killed group: it is gone (or a zombie
	// about to be reaped by init), never still sleeping.
	if out, _ := exec.Command("ps", "-o", "stat=", "-p", strings.TrimSpace(string(b))).Output(); len(out) > 0 && !strings.HasPrefix(string(out), "Z") {
		t.Errorf("grandchild %s still alive: %q", strings.TrimSpace(string(b)), out)
	}
}

// gone reports whether the process whose pid the file holds has ended: no
// such process, or a zombie about to be reaped by init.
func gone(t *testing.T, pidFile string) bool {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %q", pidFile, b)
	}
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	out, _ := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	return len(out) == 0 || strings.HasPrefix(string(out), "Z")
}

// A command that exits but leaves a background child holding its output
// is judged by its exit status, with the output written until then, and
// the child is killed with its process group when the command ends (it
// neither outlives the check nor turns it into a timeout).
func TestRunChecks_ExitStatusDecidesAndLeftoverChildIsKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pid0, pid1 := filepath.Join(dir, "sleep0.pid"), filepath.Join(dir, "sleep1.pid")
	res, err := RunChecks(context.Background(), checksSpec(dir,
		CommandSet{Name: "bg", TimeoutSeconds: 300, Commands: []Command{
			sh("passes", "sleep 300 & echo $! > "+pid0+"; echo started; exit 0"),
			sh("fails", "sleep 300 & echo $! > "+pid1+"; echo started >&2; exit 4"),
		}},
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Runs[0]; r.Status != StatusExited || r.ExitCode != 0 || r.Output != "started\n" || r.Error != "" {
		t.Errorf("run 0 = %+v, want exit 0 with output \"started\"", r)
	}
	if r := res.Runs[1]; r.Status != StatusExited || r.ExitCode != 4 || r.Output != "started\n" {
		t.Errorf("run 1 = %+v, want exit 4", r)
	}
	if v := ChecksVerdict(res); v.Outcome != Fail || !strings.Contains(v.Reason, "bg/fails (exit 4)") || strings.Contains(v.Reason, "bg/passes") {
		t.Errorf("verdict %+v", v)
	}
	for _, f := range []string{pid0, pid1} {
		if !gone(t, f) {
			t.Errorf("the background sleep of %s survived its check", f)
		}
	}
}

// The output kept is the last 64 KiB, and the result says how much there was.
func TestRunChecks_OutputTailKept(t *testing.T) {
	t.Parallel()
	res, err := RunChecks(context.Background(), checksSpec(t.TempDir(),
		CommandSet{Name: "big", TimeoutSeconds: 60, Commands: []Command{sh("spam", "i=0; while [ $i -lt 2000 ]; do echo 'line of some fifty bytes of output, padded out....'; i=$((i+1)); done; echo END")}},
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	if len(r.Output) != OutputTailBytes || r.OutputBytes != 2000*51+4 || !strings.HasSuffix(r.Output, "END\n") {
		t.Errorf("output %d of %d bytes, ends %q", len(r.Output), r.OutputBytes, r.Output[len(r.Output)-10:])
	}
}

// worc configuration.md § security: only allowed_environment reaches a
// check; a secret in the runner's environment does not.
func TestRunChecks_EnvironmentIsAllowlistedOnly(t *testing.T) {
	t.Setenv("STRATUS_TEST_SECRET", "sk-not-for-checks")
	t.Setenv("STRATUS_TEST_KEEP", "kept")
	s := checksSpec(t.TempDir(), CommandSet{Name: "env", TimeoutSeconds: 60, Commands: []Command{
		sh("env", `echo "secret=${STRATUS_TEST_SECRET-unset} keep=${STRATUS_TEST_KEEP-unset}"`)}})
	s.AllowedEnvironment = []string{"PATH", "STRATUS_TEST_KEEP", "STRATUS_TEST_ABSENT"}
	res, err := RunChecks(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Runs[0].Output; got != "secret=unset keep=kept\n" {
		t.Errorf("output %q", got)
	}
}

// No command sets: the node passes vacuously, without looking at the diff.
func TestRunChecks_NoCommandSetsPassesVacuously(t *testing.T) {
	t.Parallel()
	res, err := RunChecks(context.Background(), checksSpec(t.TempDir()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := ChecksVerdict(res); v.Outcome != Pass || !strings.Contains(v.Reason, "no checks.command_sets") {
		t.Errorf("verdict %+v", v)
	}
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	testenv.MustHaveCommand(t, "git", "command sets are selected by the paths git reports changed")
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// worc configuration.md § Diff-based selection, in a real git work tree:
// the changed paths are git status's (untracked included, both sides of a
// rename), minus Stratus's own directories; a set with no paths runs on a
// non-empty diff; a glob set runs when it matches; an empty diff selects
// nothing.
func TestRunChecks_GitDiffSelectsSets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q")
	writeExec(t, filepath.Join(dir, "backend/app.go"), "package app\n")
	writeExec(t, filepath.Join(dir, "old.txt"), "x\n")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "base")

	sets := []CommandSet{
		{Name: "all", TimeoutSeconds: 60, Commands: []Command{sh("a", "true")}},
		{Name: "backend", Paths: []string{"backend/**"}, TimeoutSeconds: 60, Commands: []Command{sh("b", "true")}},
		{Name: "docs", Paths: []string{"**/*.md"}, TimeoutSeconds: 60, Commands: []Command{sh("d", "true")}},
	}
	spec := checksSpec(dir, sets...)
	spec.Checks.Exclude = []string{".stratus", "workspace/tasks/t1/ctx"}
	ran := func() ([]string, *ChecksResult) {
		t.Helper()
		res, err := RunChecks(context.Background(), spec, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range res.Runs {
			names = append(names, r.Set)
		}
		return names, res
	}

	// Stratus's own files only: an empty diff, nothing runs.
	writeExec(t, filepath.Join(dir, ".stratus/stratus.db"), "x")
	writeExec(t, filepath.Join(dir, "workspace/tasks/t1/ctx/impl.md"), "x")
	if names, res := ran(); len(names) != 0 || res.Selection != SelectedByDiff || res.ChangedTotal != 0 || ChecksVerdict(res).Outcome != Pass {
		t.Fatalf("empty diff ran %v (%+v)", names, res)
	}

	// An untracked Markdown file anywhere: the catch-all and docs.
	writeExec(t, filepath.Join(dir, "notes/readme.md"), "hi\n")
	if names, res := ran(); !slices.Equal(names, []string{"all", "docs"}) || !slices.Equal(res.Changed, []string{"notes/readme.md"}) {
		t.Fatalf("md change ran %v, changed %v", names, res.Changed)
	}

	// A modified backend file and a rename (both paths count).
	os.Remove(filepath.Join(dir, "notes/readme.md"))
	writeExec(t, filepath.Join(dir, "backend/app.go"), "package app // changed\n")
	gitRun(t, dir, "mv", "old.txt", "new.txt")
	names, res := ran()
	if !slices.Equal(names, []string{"all", "backend"}) {
		t.Errorf("backend change ran %v", names)
	}
	slices.Sort(res.Changed)
	if !slices.Equal(res.Changed, []string{"backend/app.go", "new.txt", "old.txt"}) {
		t.Errorf("changed = %v", res.Changed)
	}
}

// worc configuration.md § Diff-based selection, as a pure rule.
func TestSelectSets_UnionOfMatchingSets(t *testing.T) {
	t.Parallel()
	sets := []CommandSet{{Name: "catchall"}, {Name: "backend", Paths: []string{"backend/**"}}, {Name: "md", Paths: []string{"**/*.md"}}, {Name: "bad", Paths: []string{"[x"}}}
	for _, tc := range []struct {
		changed []string
		want    []string
	}{
		{nil, nil},
		{[]string{"README.md"}, []string{"catchall", "md"}},
		{[]string{"backend/a/b.go"}, []string{"catchall", "backend"}},
		{[]string{"frontend/x.ts"}, []string{"catchall"}},
		{[]string{"backend/doc.md"}, []string{"catchall", "backend", "md"}},
	} {
		var got []string
		for _, s := range SelectSets(sets, tc.changed) {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("changed %v: selected %v, want %v", tc.changed, got, tc.want)
		}
	}
}

// worc flow-authoring.md § Custom tool nodes: argv is the tool's path
// only, stdin is the JSON context, cwd is the work dir.
func TestRunTool_ArgvOnlyStdinContextCwd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tools := filepath.Join(dir, ".stratus/tools")
	writeExec(t, filepath.Join(tools, "probe"), `#!/bin/sh
cat > stdin.json
echo "argc=$# cwd=$(pwd)" > seen.txt
echo '{"outcome":"route:next","data":{"ok":true}}'
`)
	input := `{"task_id":"t1","node_id":"probe","subtask_order":null,"paths":{"repo":"/r"},"args":{"n":3}}`
	res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
		Tool: &ToolSpec{Name: "probe", Dir: tools, TimeoutSeconds: 30, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusExited || res.ExitCode != 0 || res.Path != filepath.Join(tools, "probe") {
		t.Fatalf("result %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "stdin.json")); string(got) != input {
		t.Errorf("stdin = %s", got)
	}
	seen, _ := os.ReadFile(filepath.Join(dir, "seen.txt"))
	if !strings.HasPrefix(string(seen), "argc=0 cwd=") {
		t.Errorf("seen %q", seen)
	}
	if v := ToolOutcome(res); v.Outcome != "route:next" {
		t.Errorf("verdict %+v", v)
	}
}

// worc flow-authoring.md § Custom tool nodes: "exactly the allowlisted
// security.allowed_environment (the parent environment is never
// inherited)".
func TestRunTool_SecretInRunnerEnvDoesNotReachTheTool(t *testing.T) {
	t.Setenv("STRATUS_TEST_TOOL_SECRET", "sk-abcdefghijklmnopqrstuvwx")
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	writeExec(t, filepath.Join(tools, "envdump"), "#!/bin/sh\nenv\n")
	res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: []string{"PATH"},
		Tool: &ToolSpec{Name: "envdump", Dir: tools, TimeoutSeconds: 30, Input: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Stdout, "STRATUS_TEST_TOOL_SECRET") || strings.Contains(res.Stdout, "sk-") || !strings.Contains(res.Stdout, "PATH=") {
		t.Errorf("the tool saw:\n%s", res.Stdout)
	}
}

// A tool past its timeout is killed: timed_out, which ToolOutcome parks.
func TestRunTool_TimeoutIsTimedOut(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeExec(t, filepath.Join(dir, "tools/slow"), "#!/bin/sh\nsleep 60\n")
	res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
		Tool: &ToolSpec{Name: "slow", Dir: filepath.Join(dir, "tools"), TimeoutSeconds: 1, Input: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusTimedOut || ToolOutcome(res).Error != ErrToolTimedOut {
		t.Errorf("result %+v", res)
	}
}

// A tool that prints its outcome and exits, leaving a background child that
// holds its stdout (and its stdin: the context is larger than a pipe's
// buffer and never read), is decided by what it printed and its exit; the
// child is killed with its process group.
func TestRunTool_ExitDecidesAndLeftoverChildIsKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeExec(t, filepath.Join(dir, "tools/bg"), "#!/bin/sh\nsleep 300 &\necho $! > sleep.pid\necho '{\"outcome\":\"pass\"}'\nexit 0\n")
	input := `{"pad":"` + strings.Repeat("x", 256<<10) + `"}`
	res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
		Tool: &ToolSpec{Name: "bg", Dir: filepath.Join(dir, "tools"), TimeoutSeconds: 300, Input: json.RawMessage(input)}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StatusExited || res.ExitCode != 0 || res.Stdout != "{\"outcome\":\"pass\"}\n" {
		t.Fatalf("result %+v", res)
	}
	if v := ToolOutcome(res); v.Outcome != Pass {
		t.Errorf("verdict %+v", v.Verdict)
	}
	if !gone(t, filepath.Join(dir, "sleep.pid")) {
		t.Error("the tool's background sleep survived it")
	}
}

// A stdout longer than the 1 MiB kept keeps its end too: a JSON outcome on
// its last line still decides (here a fail, though the tool exits 0), and
// the saved stdout says what was dropped.
func TestRunTool_TrailingOutcomePastTheKeptHeadDecides(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const filler = 2_200_000
	writeExec(t, filepath.Join(dir, "tools/big"), "#!/bin/sh\nhead -c "+strconv.Itoa(filler)+" /dev/zero | tr '\\000' x\necho\necho '{\"outcome\":\"fail\",\"findings\":[{\"what\":\"too big\"}]}'\n")
	res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
		Tool: &ToolSpec{Name: "big", Dir: filepath.Join(dir, "tools"), TimeoutSeconds: 300, Input: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	last := "{\"outcome\":\"fail\",\"findings\":[{\"what\":\"too big\"}]}\n"
	if res.ExitCode != 0 || len(res.Stdout) != StdoutBytes || len(res.StdoutTail) != StdoutTailBytes || !strings.HasSuffix(res.StdoutTail, last) ||
		res.StdoutBytes != int64(filler+1+len(last)) || res.StdoutComplete() {
		t.Fatalf("kept %d + %d of %d bytes, tail ends %q", len(res.Stdout), len(res.StdoutTail), res.StdoutBytes, res.StdoutTail[max(0, len(res.StdoutTail)-80):])
	}
	v := ToolOutcome(res)
	if v.Outcome != Fail || string(v.Findings) != `[{"what":"too big"}]` || !strings.Contains(v.Reason, "stdout cut") {
		t.Errorf("verdict %+v", v.Verdict)
	}
	dropped := res.StdoutBytes - StdoutBytes - StdoutTailBytes
	if kept := res.KeptStdout(); !strings.Contains(kept, "[stratus: "+strconv.FormatInt(dropped, 10)+" bytes of stdout not kept") || !strings.HasSuffix(kept, last) {
		t.Errorf("kept stdout ends %q", kept[len(kept)-200:])
	}
}

// The registry rule, on the runner: a missing, non-executable, directory,
// uncontained (symlink out) or path-like tool is a launch error, never run.
func TestRunTool_RefusesWhatTheRegistryRejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tools := filepath.Join(dir, "tools")
	writeExec(t, filepath.Join(dir, "outside"), "#!/bin/sh\necho ran > ran.txt\n")
	os.MkdirAll(filepath.Join(tools, "adir"), 0o755)
	os.WriteFile(filepath.Join(tools, "noexec"), []byte("#!/bin/sh\n"), 0o644)
	os.Symlink(filepath.Join(dir, "outside"), filepath.Join(tools, "escape"))
	writeExec(t, filepath.Join(tools, "badshebang"), "#!/no/such/interpreter\n")
	for name, want := range map[string]string{
		"missing":    "not installed",
		"noexec":     "not executable",
		"adir":       "directory",
		"escape":     "outside",
		"../outside": "registered tool name",
		"badshebang": "no such file",
	} {
		res, err := RunTool(context.Background(), Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
			Tool: &ToolSpec{Name: name, Dir: tools, TimeoutSeconds: 30, Input: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != StatusLaunchError || !strings.Contains(res.Error, want) || ToolOutcome(res).Error != ErrToolLaunch {
			t.Errorf("%s: %+v, want a launch error saying %q", name, res, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran.txt")); err == nil {
		t.Error("the uncontained tool ran")
	}
}

// A stopped runner gets an error, not a result.
func TestRunTool_CancelledRunnerReportsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeExec(t, filepath.Join(dir, "tools/slow"), "#!/bin/sh\ntouch started; sleep 60\n")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// Poll until the tool runs (or give up: the run then times out).
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(dir, "started")); err == nil {
				break
			}
		}
		cancel()
	}()
	res, err := RunTool(ctx, Spec{Kind: KindTool, Dir: dir, AllowedEnvironment: testEnv,
		Tool: &ToolSpec{Name: "slow", Dir: filepath.Join(dir, "tools"), TimeoutSeconds: 60, Input: json.RawMessage(`{}`)}})
	if err == nil || res != nil {
		t.Errorf("got %+v, %v; want no result and an error", res, err)
	}
}

// reference.md § checks node, checker citation: verified, weak, broken,
// uncheckable per entry; a missing manifest is uncheckable and gates nothing.
func TestRunCitation_ClassifiesEachEntry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeExec(t, filepath.Join(dir, "src/a.go"), "package a\n\nfunc Hello() string {\n\treturn \"hi\"\n}\n")
	manifest := filepath.Join(dir, "docs/research/t1/sources.json")
	writeExec(t, manifest, `{"sources": [
		{"id": "v", "claim": "c", "path": "src/a.go", "line": 3, "snippet": "func Hello() string"},
		{"id": "vn", "claim": "c", "path": "src/a.go", "snippet": "return \"hi\""},
		{"id": "w", "claim": "c", "path": "src/a.go", "line": 1, "snippet": "func Hello() string"},
		{"id": "bp", "claim": "c", "path": "src/nope.go", "line": 1, "snippet": "x"},
		{"id": "bl", "claim": "c", "path": "src/a.go", "line": 99, "snippet": "x"},
		{"id": "bs", "claim": "c", "path": "src/a.go", "line": 1, "snippet": "func Goodbye"},
		{"id": "bt", "claim": "c", "path": "../outside", "snippet": "x"},
		{"id": "u", "claim": "c", "url": "https://example.com"},
		{"id": "un", "claim": "c", "path": "src/a.go"},
		"not an object"
	]}`)
	res := RunCitation(dir, manifest)
	got := map[string]string{}
	for _, c := range res.Citations {
		got[c.ID] = c.Verdict
	}
	want := map[string]string{"v": Verified, "vn": Verified, "w": Weak, "bp": Broken, "bl": Broken, "bs": Broken, "bt": Broken, "u": Uncheckable, "un": Uncheckable, "": Uncheckable}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("entry %q: %s, want %s", id, got[id], w)
		}
	}
	if res.ManifestPath != "docs/research/t1/sources.json" || ChecksVerdict(res).Outcome != Fail {
		t.Errorf("manifest %q verdict %+v", res.ManifestPath, ChecksVerdict(res))
	}
	res = RunCitation(dir, filepath.Join(dir, "docs/none/sources.json"))
	if v := ChecksVerdict(res); v.Outcome != Pass || res.Note != "uncheckable: sources.json missing" {
		t.Errorf("missing manifest: %+v %q", v, res.Note)
	}
	if md := ChecksReport(res, ChecksVerdict(res)); !strings.Contains(md, "manifest_path: docs/none/sources.json") {
		t.Errorf("report:\n%s", md)
	}
}

// docs/runner-image.md § The environment of checks and tools: a runner
// whose environment is PATH alone (an ECS task's) still gives a check a
// writable HOME, TMPDIR and XDG_CACHE_HOME, so a toolchain finds a cache;
// checks.env adds its variables on top of the allowlisted ones.
func TestRunChecks_EnvironmentFloorOnABareRunner(t *testing.T) {
	t.Setenv("HOME", "")
	os.Unsetenv("HOME")
	t.Setenv("TMPDIR", t.TempDir())
	s := checksSpec(t.TempDir(), CommandSet{Name: "env", TimeoutSeconds: 60, Commands: []Command{
		sh("env", `touch "$HOME/w" "$TMPDIR/w" && mkdir -p "$XDG_CACHE_HOME" && echo "home=$HOME cache=$XDG_CACHE_HOME flag=$STRATUS_TEST_FLAG"`)}})
	s.AllowedEnvironment = []string{"PATH", "HOME", "TMPDIR"}
	s.Env = map[string]string{"STRATUS_TEST_FLAG": "on"}
	res, err := RunChecks(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := res.Runs[0]
	home, err := FallbackHome()
	if err != nil {
		t.Fatal(err)
	}
	want := "home=" + home + " cache=" + filepath.Join(home, ".cache") + " flag=on\n"
	if r.ExitCode != 0 || r.Output != want {
		t.Errorf("exit %d output %q, want %q", r.ExitCode, r.Output, want)
	}
}

func TestCommandEnv_KeepsAWritableHomeAndReplacesOthers(t *testing.T) {
	home, tmp := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("TMPDIR", tmp)
	get := func(env []string, k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return "<unset>"
	}
	// HOME not allowlisted: the runner's own, writable, is used.
	env, err := CommandEnv([]string{"PATH"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if get(env, "HOME") != home || get(env, "TMPDIR") != tmp || get(env, "XDG_CACHE_HOME") != filepath.Join(home, ".cache") {
		t.Errorf("env %q", env)
	}
	// checks.env wins over the allowlist; a HOME it names that is not a
	// writable directory is replaced, a cache dir it names is kept.
	env, err = CommandEnv([]string{"PATH", "HOME"}, map[string]string{"HOME": "/nonexistent/stratus", "XDG_CACHE_HOME": "/srv/cache", "GOFLAGS": "-mod=vendor"})
	if err != nil {
		t.Fatal(err)
	}
	if get(env, "HOME") != home || get(env, "XDG_CACHE_HOME") != "/srv/cache" || get(env, "GOFLAGS") != "-mod=vendor" {
		t.Errorf("env %q", env)
	}
	n := 0
	for _, kv := range env {
		if strings.HasPrefix(kv, "HOME=") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("HOME set %d times: %q", n, env)
	}
}

// The floor is what Go needs: with PATH alone passed, `go env GOCACHE`
// names a directory under the HOME the check got, not "off".
func TestRunChecks_GoFindsABuildCacheWithPathAlone(t *testing.T) {
	testenv.MustHaveCommand(t, "go", "the check runs the go command")
	t.Setenv("HOME", "")
	os.Unsetenv("HOME")
	os.Unsetenv("GOCACHE")
	os.Unsetenv("XDG_CACHE_HOME")
	s := checksSpec(t.TempDir(), CommandSet{Name: "go", TimeoutSeconds: 60, Commands: []Command{{Name: "cache", Argv: []string{"go", "env", "GOCACHE"}}}})
	s.AllowedEnvironment = []string{"PATH"}
	res, err := RunChecks(context.Background(), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	home, _ := FallbackHome()
	if r := res.Runs[0]; r.ExitCode != 0 || !strings.HasPrefix(r.Output, home+"/") {
		t.Errorf("exit %d output %q, want a cache under %s", r.ExitCode, r.Output, home)
	}
}
