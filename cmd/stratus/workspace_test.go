package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// wsEngine implements, in sh, the nodes of the built-in implementation
// flow on a real file: implementation writes hello.txt, review reads the
// change where its prompt's {diff_path} points and sends it back until it
// says "hello world", fixing says it. Each step leaves, in $SPY/<step
// ref>/, what it was given: its envelope, environment, arguments and
// working directory, and the prompt payload its runner fetched (read again
// from the worker API with the step's handle).
const wsEngine = `read line
node=$(printf '%s' "$line" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p')
ref=$(printf '%s' "$line" | sed -n 's/.*"step_ref":"\([^"]*\)".*/\1/p')
d="$SPY/$ref"
mkdir -p "$d"
printf '%s\n' "$line" > "$d/envelope.json"
env > "$d/env.txt"
printf '%s\n' "$0" "$@" > "$d/args.txt"
pwd > "$d/pwd.txt"
python3 - "$d/payload.json" <<'PY'
import os, sys, urllib.request
req = urllib.request.Request(os.environ["STRATUS_API_URL"] + "/v1/worker/prompt",
                             headers={"Authorization": "Bearer " + os.environ["STRATUS_HANDLE"]})
open(sys.argv[1], "wb").write(urllib.request.urlopen(req).read())
PY
case "$node" in
implementation) printf 'hello\n' > hello.txt; echo '{"subrun_report": "wrote hello.txt"}' ;;
fixing) printf 'hello world\n' > hello.txt; echo '{"subrun_report": "fixed hello.txt"}' ;;
review)
  diff=$(printf '%s' "$line" | grep -o '[^" ]*/current\.diff' | head -n 1)
  cp "$diff" "$d/diff.txt"
  if grep -q 'hello world' hello.txt; then echo '{"subrun_report": {"findings": []}}'
  else echo '{"subrun_report": {"findings": [{"severity": "high", "path": "hello.txt", "what": "it says only hello", "fix": "say hello world"}]}}'; fi ;;
*) echo '{"subrun_report": "ok"}' ;;
esac
`

// wsProject makes a git work dir with Stratus installed and committed,
// the engine configured, and an uncommitted change (an untracked file),
// an ignored file and a task file outside it.
func wsProject(t *testing.T, spy string) (dir, taskPath string) {
	t.Helper()
	testenv.MustHaveCommand(t, "git", "the workspace travels as git bundles")
	testenv.MustHaveCommand(t, "python3", "the test engine reads its payload back with it")
	dir = t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), wsEngine)
	usePrimaryShellEngineEnv(t, dir, "shx", "{SPY: "+spy+"}")
	writeTestFile(t, filepath.Join(dir, "README.md"), "readme\n")
	writeTestFile(t, filepath.Join(dir, ".gitignore"), "build/\n.stratus/stratus.db*\n")
	writeTestFile(t, filepath.Join(dir, "build/out.bin"), "ignored\n")
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "origin")
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "notes\n") // uncommitted at run start
	taskPath = filepath.Join(t.TempDir(), "t-ws.md")
	writeTestFile(t, taskPath, "---\nid: t-ws\ntitle: Say hello\ntask_type: implementation\nworkspace: worktree\n---\n## Description\n\nWrite hello.txt.\n\n## Acceptance criteria\n\n- hello.txt says hello world\n")
	return dir, taskPath
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=op", "GIT_AUTHOR_EMAIL=op@example.com", "GIT_COMMITTER_NAME=op", "GIT_COMMITTER_EMAIL=op@example.com",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2026-01-01T00:00:00Z")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// wsResult is what a run left: the branch's commits (oldest first), each
// one's subject and change, and the branch tip's tree.
type wsResult struct {
	subjects []string
	diffs    []string
	tree     string
}

// checkWorkspaceRun checks one run of the project (issue 12 Done when):
// the steps, that no step's runner was given the operator's path, that
// review read the implementation's change at {diff_path}, that the
// branch holds the steps' commits on the operator's HEAD, and that the
// operator's checkout was not touched.
func checkWorkspaceRun(t *testing.T, mode, dir, taskDir, spy string, r result, head, status string) wsResult {
	t.Helper()
	if r.code != ExitOK || join(steps(r.stderr)) != exampleSteps {
		t.Fatalf("%s: exit %d, steps %s; want %s\n%s", mode, r.code, join(steps(r.stderr)), exampleSteps, r.stderr)
	}
	refs, _ := filepath.Glob(filepath.Join(spy, "*#*"))
	if len(refs) < 5 {
		t.Fatalf("%s: the engine left %d step records, want one per agent step: %v", mode, len(refs), refs)
	}
	for _, d := range refs {
		for _, f := range []string{"payload.json", "env.txt", "args.txt", "envelope.json", "pwd.txt"} {
			if body := readFile(t, filepath.Join(d, f)); strings.Contains(body, dir) || strings.Contains(body, taskDir) {
				t.Errorf("%s: %s/%s carries the operator's work dir %s or task dir %s:\n%s", mode, filepath.Base(d), f, dir, taskDir, body)
			}
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(spy, "implementation#1", "payload.json")), `"write":true`) ||
		strings.Contains(readFile(t, filepath.Join(spy, "review#1", "payload.json")), `"write":true`) {
		t.Errorf("%s: implementation must be told to commit its change, review (read-only) not", mode)
	}
	if d := readFile(t, filepath.Join(spy, "review#1", "diff.txt")); !strings.Contains(d, "+hello") || !strings.Contains(d, "hello.txt") ||
		strings.Contains(d, "notes.txt") || strings.Contains(d, "ctx/") {
		t.Errorf("%s: review#1's {diff_path} does not hold exactly the implementation's change:\n%s", mode, d)
	}
	if d := readFile(t, filepath.Join(spy, "review#2", "diff.txt")); !strings.Contains(d, "+hello world") {
		t.Errorf("%s: review#2's {diff_path} does not hold the fix:\n%s", mode, d)
	}

	// The operator's checkout: HEAD, status and files as they were.
	if got := gitIn(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("%s: HEAD moved: %s, was %s", mode, got, head)
	}
	if got := gitIn(t, dir, "status", "--porcelain", "--untracked-files=no"); got != status {
		t.Errorf("%s: git status changed:\n%s\nwas:\n%s", mode, got, status)
	}
	if _, err := os.Stat(filepath.Join(dir, "hello.txt")); err == nil {
		t.Errorf("%s: an engine wrote hello.txt in the operator's checkout", mode)
	}

	// The branch: the uncommitted change, then one commit per writing step.
	var res wsResult
	for _, c := range strings.Fields(gitIn(t, dir, "rev-list", "--reverse", head+"..stratus/t-ws")) {
		res.subjects = append(res.subjects, gitIn(t, dir, "log", "-1", "--format=%s", c))
		res.diffs = append(res.diffs, gitIn(t, dir, "diff-tree", "-p", "--no-commit-id", c+"^", c))
	}
	if want := "stratus: uncommitted changes at run start|implementation#1|fixing#1"; strings.Join(res.subjects, "|") != want {
		t.Errorf("%s: branch stratus/t-ws commits %q, want %s", mode, res.subjects, want)
	}
	if got := gitIn(t, dir, "show", "stratus/t-ws:hello.txt"); got != "hello world" {
		t.Errorf("%s: hello.txt on the branch = %q", mode, got)
	}
	if got := gitIn(t, dir, "show", "stratus/t-ws:notes.txt"); got != "notes" {
		t.Errorf("%s: notes.txt on the branch = %q", mode, got)
	}
	if got := gitIn(t, dir, "ls-tree", "-r", "--name-only", "stratus/t-ws"); !strings.Contains(got, ".stratus/config.yaml") || strings.Contains(got, "build/out.bin") || strings.Contains(got, "workspace/tasks") {
		t.Errorf("%s: the branch's files are not the operator's plus the change:\n%s", mode, got)
	}
	if author := gitIn(t, dir, "log", "-1", "--format=%an <%ae>", "stratus/t-ws"); !strings.HasPrefix(author, "Stratus <") {
		t.Errorf("%s: the step commit's author is %q, want Stratus", mode, author)
	}
	if mode == "embedded" {
		if md := readFile(t, filepath.Join(dir, ".stratus/logs/t-ws/summary.md")); !strings.Contains(md, "the commits of branch `stratus/t-ws`") || strings.Contains(md, "notes.txt") {
			t.Errorf("%s: summary.md does not point at the branch as the run's change:\n%s", mode, md)
		}
	}
	res.tree = gitIn(t, dir, "rev-parse", "stratus/t-ws^{tree}")
	return res
}

// issue 12 Done when: on moto (stratus dev aws) the built-in
// implementation flow whose engines write, review and fix a file runs its
// runners in fresh directories and gives no runner the operator's path
// (payload, environment, arguments); review's {diff_path} holds the
// implementation's change; the run's commits come back as branch
// stratus/<task_id>; and the embedded run of the same flow with
// workspace: worktree gives the same tree and the same per-step diffs.
func TestWorkspace_TravelsOnAWSAndMatchesEmbedded(t *testing.T) {
	flags := devAWS(t, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	spy := t.TempDir()
	results := map[string]wsResult{}
	for _, mode := range []string{"aws", "embedded"} {
		dir, task := wsProject(t, spy)
		head, status := gitIn(t, dir, "rev-parse", "HEAD"), gitIn(t, dir, "status", "--porcelain", "--untracked-files=no")
		args := []string{"run", task, "--dir", dir}
		if mode == "aws" {
			args = append(args, flags...)
		}
		r := runCLI(t, args...)
		results[mode] = checkWorkspaceRun(t, mode, dir, filepath.Dir(task), spy, r, head, status)
		if err := os.Rename(spy, spy+"-"+mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(spy, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	aws, emb := results["aws"], results["embedded"]
	if aws.tree != emb.tree {
		t.Errorf("final tree on AWS %s, embedded %s", aws.tree, emb.tree)
	}
	if strings.Join(aws.diffs, "\n====\n") != strings.Join(emb.diffs, "\n====\n") {
		t.Errorf("per-step diffs differ:\nAWS:\n%s\nembedded:\n%s", strings.Join(aws.diffs, "\n====\n"), strings.Join(emb.diffs, "\n====\n"))
	}
}
