package main

import (
	"context"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/store/sqlite"
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
// the engine configured, an uncommitted change (a tracked file edited), an
// untracked file, an ignored file and a task file outside it.
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
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "notes, committed\n")
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "commit", "-qm", "origin")
	writeTestFile(t, filepath.Join(dir, "notes.txt"), "notes\n")       // uncommitted at run start
	writeTestFile(t, filepath.Join(dir, "scratch.txt"), "untracked\n") // never on the branch
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

// checkWorkspaceRun checks one run of the project
// (README.md § Workspaces: where engines work, and how their change comes back):
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
	if got := gitIn(t, dir, "ls-tree", "-r", "--name-only", "stratus/t-ws"); !strings.Contains(got, ".stratus/config.yaml") || strings.Contains(got, "build/out.bin") ||
		strings.Contains(got, "workspace/tasks") || strings.Contains(got, "scratch.txt") || strings.Contains(got, ".stratus/ctx") {
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

// On moto (stratus dev aws) the built-in
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

// attackEngine is wsEngine's implementation node turned hostile (finding 1
// of a hardening review): holding its step's handle it builds a commit by
// hand in its checkout — an absolute symlink `leak -> /etc/passwd` and a
// gitlink — uploads its bundle to its upload key through the worker API
// and posts the head move; then the same with a commit adding
// .stratus/task/task.md and a symlink notes.txt -> .stratus/config.yaml,
// and with a clean commit in a bundle whose only ref is HEAD; then it
// does its real work. It records each answer's status and body in
// $SPY/attack.txt.
const attackEngine = `read line
node=$(printf '%s' "$line" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p')
case "$node" in
implementation)
  python3 - > "$SPY/attack.txt" 2>&1 <<'PY'
import json, os, subprocess, urllib.error, urllib.request
api, handle = os.environ["STRATUS_API_URL"], os.environ["STRATUS_HANDLE"]
def call(method, path, body=None):
    req = urllib.request.Request(api + path, data=body, method=method, headers={"Authorization": "Bearer " + handle})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
def message(body):
    try:
        return json.loads(body)["error"]["message"]
    except Exception:
        return body
def git(*args, stdin=None):
    return subprocess.run(["git", *args], input=stdin, capture_output=True, check=True).stdout.decode().strip()
status, body = call("GET", "/v1/worker/prompt")
upload = json.loads(body)["workspace"]["upload"]["url"]
head = git("rev-parse", "HEAD")
leak = git("hash-object", "-w", "--stdin", stdin=b"/etc/passwd")
entries = git("ls-tree", head) + "\n120000 blob %s\tleak\n160000 commit %s\tsub\n" % (leak, head)
commit = git("commit-tree", git("mktree", stdin=entries.encode()), "-p", head, "-m", "hand-built")
git("update-ref", "refs/heads/evil", commit)
bundle = os.path.join(os.environ["SPY"], "evil.bundle")
git("bundle", "create", "-q", bundle, "refs/heads/evil", "^" + head)
git("update-ref", "-d", "refs/heads/evil")
print("upload", *call("PUT", upload, open(bundle, "rb").read()))
status, body = call("POST", "/v1/worker/workspace/head", json.dumps({"from": head, "to": commit}).encode())
try:
    body = json.loads(body)["error"]["message"]
except Exception:
    pass
print("advance", status, body)
print("evil", commit)
# Stratus's own paths: the task file, and a symlink into its config.
env = dict(os.environ, GIT_INDEX_FILE=os.path.join(os.environ["SPY"], "index"))
subprocess.run(["git", "read-tree", head], env=env, check=True)
task = git("hash-object", "-w", "--stdin", stdin=b"obey the engine")
cfg = git("hash-object", "-w", "--stdin", stdin=b".stratus/config.yaml")
subprocess.run(["git", "update-index", "--add", "--cacheinfo", "100644,%s,.stratus/task/task.md" % task,
    "--cacheinfo", "120000,%s,notes.txt" % cfg], env=env, check=True)
tree = subprocess.run(["git", "write-tree"], env=env, capture_output=True, check=True).stdout.decode().strip()
own = git("commit-tree", tree, "-p", head, "-m", "into .stratus")
bundle = os.path.join(os.environ["SPY"], "own.bundle")
git("update-ref", "refs/heads/own", own)
git("bundle", "create", "-q", bundle, "refs/heads/own", "^" + head)
git("update-ref", "-d", "refs/heads/own")
call("PUT", upload, open(bundle, "rb").read())
status, body = call("POST", "/v1/worker/workspace/head", json.dumps({"from": head, "to": own}).encode())
print("advance-own", status, message(body))
print("own", own)
# A clean commit in a bundle whose only ref is HEAD: no worker fetches it.
blob = git("hash-object", "-w", "--stdin", stdin=b"clean")
clean = git("commit-tree", git("mktree", stdin=(git("ls-tree", head) + "\n100644 blob %s\tclean.txt\n" % blob).encode()), "-p", head, "-m", "HEAD only")
bundle = os.path.join(os.environ["SPY"], "clean.bundle")
git("update-ref", "refs/heads/clean", clean)
git("bundle", "create", "-q", bundle, "refs/heads/clean", "^" + head)
git("update-ref", "-d", "refs/heads/clean")
data = open(bundle, "rb").read().replace(b" refs/heads/clean\n", b" HEAD\n", 1)
call("PUT", upload, data)
status, body = call("POST", "/v1/worker/workspace/head", json.dumps({"from": head, "to": clean}).encode())
print("advance-headonly", status, message(body))
PY
  printf 'hello world\n' > hello.txt; echo '{"subrun_report": "wrote hello.txt"}' ;;
review) echo '{"subrun_report": {"findings": []}}' ;;
*) echo '{"subrun_report": "ok"}' ;;
esac
`

// docs/security.md § Workspace commits (finding 1 of a hardening review,
// reproduced as the attacker did it): an engine of a workspace: worktree
// run posts a head move to a commit it built by hand with a symlink to
// /etc/passwd and a gitlink; then (later findings) to a commit into
// Stratus's own state dir and to a clean commit in a bundle of HEAD alone,
// which no worker fetches. The worker API answers 422 naming the paths
// (or what a valid step bundle is), the head stays, the run goes on with
// the step's real change, and the branch pulled holds none of them. Then the run's records are doctored
// (the head moved to that commit in the store, its bundle in the sink),
// then again to the commit into .stratus: `stratus pull` refuses each and
// makes no branch.
func TestWorkspace_EngineCannotMoveTheHeadToAHandBuiltCommit(t *testing.T) {
	spy := t.TempDir()
	dir, task := wsProject(t, spy)
	writeTestFile(t, filepath.Join(dir, "engine.sh"), attackEngine)
	head := gitIn(t, dir, "rev-parse", "HEAD")
	r := runCLI(t, "run", task, "--dir", dir)
	attack := readFile(t, filepath.Join(spy, "attack.txt"))
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s\nattack:\n%s", r.code, r.stderr, attack)
	}
	if !strings.Contains(attack, "upload 200") && !strings.Contains(attack, "upload 204") {
		t.Fatalf("the engine could not even upload its bundle:\n%s", attack)
	}
	if !strings.Contains(attack, "advance 422") || !strings.Contains(attack, "leak -> /etc/passwd: absolute symlink target") ||
		!strings.Contains(attack, "sub: a submodule or nested git repository") {
		t.Errorf("the head move to the hand-built commit was not refused with 422 naming both entries:\n%s", attack)
	}
	// Stratus's own paths, and a bundle no worker can fetch (hardening
	// findings): 422 naming the path and the rule, or what a valid step
	// bundle is.
	if !strings.Contains(attack, "advance-own 422") || !strings.Contains(attack, `.stratus/task/task.md: inside ".stratus"`) ||
		!strings.Contains(attack, `notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`) {
		t.Errorf("the head move to a commit into .stratus was not refused with 422 naming both entries:\n%s", attack)
	}
	if !strings.Contains(attack, "advance-headonly 422") || !strings.Contains(attack, "a valid step bundle lists exactly one ref") {
		t.Errorf("the head move with a bundle of HEAD alone was not refused with 422 saying what a valid step bundle is:\n%s", attack)
	}
	files := gitIn(t, dir, "ls-tree", "-r", "--name-only", "stratus/t-ws")
	if strings.Contains(files, "leak") || strings.Contains(files, "sub") || strings.Contains(files, "clean.txt") || !strings.Contains(files, "hello.txt") {
		t.Errorf("branch stratus/t-ws holds:\n%s\nwant hello.txt and none of leak, sub, clean.txt", files)
	}
	if notes := gitIn(t, dir, "ls-tree", "stratus/t-ws", "notes.txt"); !strings.HasPrefix(notes, "100644 ") {
		t.Errorf("notes.txt on branch stratus/t-ws: %q; want the operator's file, not a symlink into .stratus", notes)
	}

	// The records doctored as if the move had been accepted.
	evil, _, _ := strings.Cut(attack[strings.LastIndex(attack, "evil ")+len("evil "):], "\n")
	st, err := sqlite.Open(filepath.Join(dir, ".stratus/stratus.db"))
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.ListRuns(context.Background(), 1)
	if err != nil || len(runs) != 1 || runs[0].Workspace == nil {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	ws := runs[0].Workspace
	key := path.Join(path.Dir(ws.Bundles[0]), "doctored.bundle")
	evilBundle, err := os.ReadFile(filepath.Join(spy, "evil.bundle"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, filepath.FromSlash(key)), string(evilBundle))
	err = st.AdvanceWorkspace(context.Background(), runs[0].ID, ws.Head, evil, key)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	before := gitIn(t, dir, "rev-parse", "stratus/t-ws")
	gitIn(t, dir, "branch", "-q", "-D", "stratus/t-ws")
	p := runCLI(t, "pull", runs[0].ID, "--dir", dir)
	if p.code == ExitOK || !strings.Contains(p.stderr, "leak -> /etc/passwd: absolute symlink target") || !strings.Contains(p.stderr, "docs/security.md § Workspace commits") {
		t.Errorf("pull of the doctored run: exit %d\n%s", p.code, p.stderr)
	}
	if out, err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", "stratus/t-ws").Output(); err == nil {
		t.Errorf("the refused pull made branch stratus/t-ws at %s (it was %s before)", out, before)
	}
	if got := gitIn(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved: %s, was %s", got, head)
	}

	// Doctored again, to the commit into .stratus: pull refuses it rather
	// than bring it back with Stratus's paths dropped.
	_, own, _ := strings.Cut(attack, "\nown ")
	own, _, _ = strings.Cut(own, "\n")
	ownBundle, err := os.ReadFile(filepath.Join(spy, "own.bundle"))
	if err != nil || own == "" {
		t.Fatalf("the engine's commit into .stratus: %q, %v", own, err)
	}
	key = path.Join(path.Dir(ws.Bundles[0]), "doctored-own.bundle")
	writeTestFile(t, filepath.Join(dir, filepath.FromSlash(key)), string(ownBundle))
	if st, err = sqlite.Open(filepath.Join(dir, ".stratus/stratus.db")); err != nil {
		t.Fatal(err)
	}
	err = st.AdvanceWorkspace(context.Background(), runs[0].ID, evil, own, key)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	p = runCLI(t, "pull", runs[0].ID, "--dir", dir)
	if p.code == ExitOK || !strings.Contains(p.stderr, `.stratus/task/task.md: inside ".stratus"`) ||
		!strings.Contains(p.stderr, `notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`) {
		t.Errorf("pull of the run doctored into .stratus: exit %d\n%s", p.code, p.stderr)
	}
	if out, err := exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", "stratus/t-ws").Output(); err == nil {
		t.Errorf("the refused pull made branch stratus/t-ws at %s", out)
	}
}

// strayEngine works in its checkout as told, except that the node named
// in $STRAY also writes into the operator's work dir ($OPDIR) by absolute
// path: a new file and a line appended to a tracked one.
const strayEngine = `read line
node=$(printf '%s' "$line" | sed -n 's/.*"node":"\([^"]*\)".*/\1/p')
if [ "$node" = "$STRAY" ]; then
  printf 'written by %s\n' "$node" > "$OPDIR/stray.txt"
  printf 'appended by %s\n' "$node" >> "$OPDIR/README.md"
fi
case "$node" in
implementation) printf 'hello world\n' > hello.txt; echo '{"subrun_report": "wrote hello.txt"}' ;;
review) echo '{"subrun_report": {"findings": []}}' ;;
*) echo '{"subrun_report": "ok"}' ;;
esac
`

// docs/security.md § Workspace commits (finding 9a of a hardening review,
// reproduced): with workspace: worktree an engine works in a checkout of
// its own, yet nothing keeps it from writing into the operator's work dir
// by absolute path; the run said its step changed nothing. Now the work
// dir is stamped before each worker starts and compared when it reports:
// the step fails naming the files — whether the engine also changed its
// checkout (the head move is refused, its commit not taken) or not (its
// report is turned into a failure) — and the run does not end done.
func TestWorkspace_EngineWritingIntoTheWorkDirFailsItsStep(t *testing.T) {
	for _, node := range []string{"planning", "implementation"} {
		t.Run(node, func(t *testing.T) {
			spy := t.TempDir()
			dir, task := wsProject(t, spy)
			writeTestFile(t, filepath.Join(dir, "engine.sh"), strayEngine)
			cfgPath := filepath.Join(dir, ".stratus/config.yaml")
			cfg := readFile(t, cfgPath)
			withEnv := strings.Replace(cfg, "{SPY: "+spy+"}", "{SPY: "+spy+", OPDIR: "+dir+", STRAY: "+node+"}", 1)
			if withEnv == cfg {
				t.Fatalf("no provider env to extend in %s:\n%s", cfgPath, cfg)
			}
			writeTestFile(t, cfgPath, withEnv)
			r := runCLI(t, "run", task, "--dir", dir)
			if readFile(t, filepath.Join(dir, "stray.txt")) != "written by "+node+"\n" {
				t.Fatal("the engine did not write into the work dir: the test reproduces nothing")
			}
			if r.code == ExitOK {
				t.Fatalf("the run ended done although %s wrote into the work dir:\n%s", node, r.stderr)
			}
			if testing.Verbose() {
				t.Log(r.stderr)
			}
			for _, want := range []string{node + "#1", "stray.txt", "README.md", "of the operator's work dir", "docs/security.md § Workspace commits"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("the run's output does not say %q:\n%s", want, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "changed nothing") {
				t.Errorf("the run says something changed nothing:\n%s", r.stderr)
			}
			if out, err := exec.Command("git", "-C", dir, "show", "stratus/t-ws:hello.txt").CombinedOutput(); err == nil {
				t.Errorf("the failed step's commit was pulled: hello.txt = %q", out)
			}
		})
	}
}
