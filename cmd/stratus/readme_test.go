package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/testenv"
)

// readmeBlock returns the command lines (comments and blank lines dropped)
// of the first ```sh block after the heading of README.md.
func readmeBlock(t *testing.T, heading string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(testenv.ModuleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	seen, in := false, false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == heading:
			seen = true
		case seen && !in && line == "```sh":
			in = true
		case in && line == "```":
			return cmds
		case in:
			line, _, _ = strings.Cut(line, "#")
			if fields := strings.Fields(line); len(fields) > 0 {
				cmds = append(cmds, fields)
			}
		}
	}
	t.Fatalf("README.md has no ```sh block after %q", heading)
	return nil
}

// The README's walkthrough, typed as written from the root of a checkout,
// ends done (exit 0) with no failed step in `stratus status` (the
// supervisor's turns included), and its run does not count the
// walkthrough's own files as changes to the repository: its --dir is
// ignored by the repository's .gitignore, so the summary says the work dir
// is not a git work tree instead of listing task.md.
func TestReadme_WalkthroughRunsInADirTheRepositoryIgnores(t *testing.T) {
	t.Parallel()
	testenv.MustHaveCommand(t, "git", "the walkthrough runs inside a git checkout")
	root := testenv.ModuleRoot(t)
	// A checkout stand-in: a git repository holding what the walkthrough
	// reads from this one (.gitignore and examples/), committed.
	repo := t.TempDir()
	for _, f := range []string{".gitignore", "examples/task.md", "examples/scenario.yaml"} {
		writeTestFile(t, filepath.Join(repo, f), readFile(t, filepath.Join(root, f)))
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-q", "-m", "checkout"}} {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var dir string
	var last result
	for _, c := range readmeBlock(t, "## Using it") {
		switch c[0] {
		case "go", "make": // builds bin/stratus; the test has its own build (as make build does)
		case "bin/stratus":
			for i, a := range c {
				if a == "--dir" && i+1 < len(c) {
					dir = c[i+1]
				}
			}
			cmd := exec.Command(stratusBin, c[1:]...)
			cmd.Dir = repo
			out, err := cmd.CombinedOutput()
			last = result{code: cmd.ProcessState.ExitCode(), stderr: string(out)}
			if err != nil {
				t.Fatalf("README command %q: %v\n%s", strings.Join(c, " "), err, out)
			}
		case "cp":
			if len(c) != 3 {
				t.Fatalf("README command %q: want cp SRC DST", strings.Join(c, " "))
			}
			writeTestFile(t, filepath.Join(repo, c[2]), readFile(t, filepath.Join(repo, c[1])))
		default:
			t.Fatalf("README command %q: this test does not know how to run %q; teach it or change the README", strings.Join(c, " "), c[0])
		}
	}
	if dir == "" {
		t.Fatal("the walkthrough names no --dir")
	}
	if !strings.Contains(last.stderr, "summary:") {
		t.Fatalf("the walkthrough's run printed no summary:\n%s", last.stderr)
	}
	m := regexp.MustCompile(`(?m)^run (r-\S+): done$`).FindStringSubmatch(last.stderr)
	if m == nil {
		t.Fatalf("the walkthrough's run did not end done:\n%s", last.stderr)
	}
	status := exec.Command(stratusBin, "status", m[1], "--dir", dir)
	status.Dir = repo
	out, err := status.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "supervisor#2") {
		t.Fatalf("status %s: %v\n%s", m[1], err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 2 && strings.Contains(f[0], "#") && f[2] == "failed" {
			t.Errorf("a step of the done run failed: %s\n%s", l, out)
		}
	}
	summaries, _ := filepath.Glob(filepath.Join(repo, dir, ".stratus", "logs", "*", "summary.md"))
	if len(summaries) != 1 {
		t.Fatalf("summaries %q, want one", summaries)
	}
	// The supervisor wrote summary.md from the run's facts (the scenario's
	// finalize prose); the change the facts name is in its packet.
	var packet struct {
		Changes struct {
			PathsTotal int    `json:"paths_total"`
			Note       string `json:"note"`
		} `json:"changes"`
	}
	raw := readFile(t, filepath.Join(filepath.Dir(summaries[0]), "supervisor", "packet.json"))
	if err := json.Unmarshal([]byte(raw), &packet); err != nil {
		t.Fatal(err)
	}
	if packet.Changes.PathsTotal != 0 || !strings.Contains(packet.Changes.Note, "ignores it") {
		t.Errorf("the walkthrough's run lists its own files as changes (is %s/ in .gitignore?):\n%s", dir, raw)
	}
}

// The README's human gate, step by step (a newcomer had to copy one out of
// hitl_test.go): its flow, as written, runs detached, waits at
// the gate asking its question, takes an approval and ends done.
func TestReadme_HumanGateStepByStep(t *testing.T) {
	t.Parallel()
	readme := readFile(t, filepath.Join(testenv.ModuleRoot(t), "README.md"))
	_, after, ok := strings.Cut(readme, "#### A human gate, step by step")
	if !ok {
		t.Fatal("README.md has no human gate section")
	}
	_, block, _ := strings.Cut(after, "```yaml\n")
	flowYAML, _, _ := strings.Cut(block, "```")
	dir, task := setupHITLRun(t, "gated", flowYAML, "default:\n  report: ok\n")
	runID := detach(t, dir, task)
	eventually(t, 60*time.Second, "the run waits at its gate", func() bool {
		return strings.Contains(stepRefs(statusOf(t, dir, runID)), "gate#1:waiting")
	})
	if r := runCLI(t, "status", runID, "--dir", dir); !strings.Contains(r.stdout+r.stderr, "Ship the draft of t-gated?") {
		t.Errorf("status does not say what the gate asks:\n%s%s", r.stdout, r.stderr)
	}
	if r := runCLI(t, "approve", runID, "gate", "--dir", dir); r.code != ExitOK {
		t.Fatalf("approve: exit %d\n%s", r.code, r.stderr)
	}
	if r := runCLI(t, "status", runID, "--dir", dir, "--follow"); r.code != ExitOK || !strings.Contains(r.stdout, "run "+runID+": done") {
		t.Errorf("status --follow: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// The README documents every command and shows the
// run page's screenshot the Chromium test takes.
func TestReadme_DocumentsEveryCommand(t *testing.T) {
	t.Parallel()
	readme := readFile(t, filepath.Join(testenv.ModuleRoot(t), "README.md"))
	for _, c := range newRootCmd(IO{}).Commands() {
		if c.IsAvailableCommand() && c.Name() != "completion" && !strings.Contains(readme, "`stratus "+c.Name()) {
			t.Errorf("README.md does not document `stratus %s`", c.Name())
		}
	}
	if !strings.Contains(readme, "](docs/ui-run.png)") {
		t.Error("README.md does not show docs/ui-run.png")
	}
	if fi, err := os.Stat(filepath.Join(testenv.ModuleRoot(t), "docs/ui-run.png")); err != nil || fi.Size() < 10_000 {
		t.Errorf("docs/ui-run.png: %v", err)
	}
}

// README § Exit status lists the commands whose --json errors are JSON
// too; the list names every command with a --json flag (logs was missing
// when it gained one).
func TestReadme_JSONErrorListNamesEveryJSONCommand(t *testing.T) {
	t.Parallel()
	readme := readFile(t, filepath.Join(testenv.ModuleRoot(t), "README.md"))
	_, after, ok := strings.Cut(readme, "With `--json` (")
	list, _, ok2 := strings.Cut(after, ")")
	if !ok || !ok2 {
		t.Fatal("README.md § Exit status has no \"With `--json` (…)\" list")
	}
	list = strings.Join(strings.Fields(list), " ")
	for _, path := range jsonCommands() {
		if !strings.Contains(list, "`"+path+"`") {
			t.Errorf("README.md § Exit status's --json list (%s) does not name `%s`", list, path)
		}
	}
}
