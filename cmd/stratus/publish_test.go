package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/publish/githubtest"
	"github.com/stratusflow/stratus/internal/testenv"
)

// publishToken is the GitHub token of the publish tests: distinctive, so
// that a grep for it finds every copy.
const publishToken = "ghs_StratusPublishTestToken4f1d9c"

// publishProject installs the script engine with examples/scenario.yaml
// and the built-in implementation flow (worc's, publishing a pull
// request), makes the work dir a git repository on
// main, gives it a bare "origin" beside it holding main, and serves that
// as acme/app from a GitHub API stand-in (withOrigin).
func publishProject(t *testing.T) (dir, task string) {
	t.Helper()
	root := testenv.ModuleRoot(t)
	dir, task = installScript(t, "implementation", "", readFile(t, filepath.Join(root, "examples/scenario.yaml")))
	return dir, task
}

// withOrigin makes dir a git repository on main with one commit, with a
// bare origin holding main, served as acme/app by a stand-in named in
// config.yaml's git block (plus gitExtra).
func withOrigin(t *testing.T, dir, gitExtra string) (bare string, srv *githubtest.Server) {
	t.Helper()
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", "-A")
	gitIn(t, dir, "-c", "user.name=op", "-c", "user.email=op@example.invalid", "commit", "-qm", "the project before the run")
	bare = filepath.Join(t.TempDir(), "origin.git")
	gitIn(t, dir, "init", "-q", "--bare", bare)
	gitIn(t, dir, "remote", "add", "origin", bare)
	gitIn(t, dir, "push", "-q", "origin", "main")
	srv = githubtest.New(t, publishToken)
	if err := srv.AddGitRepo("acme", "app", bare); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfg, readFile(t, cfg)+"git:\n  api_url: "+srv.URL+"\n  repository: acme/app\n"+gitExtra)
	return bare, srv
}

func tokenEnv() []string {
	return []string{"GITHUB_TOKEN=" + publishToken, "GH_TOKEN=", "STRATUS_GIT_TOKEN="}
}

// pubStatus is `stratus status RUN --json` decoded.
func pubStatus(t *testing.T, dir, run string) map[string]any {
	t.Helper()
	r := runCLI(t, "status", run, "--dir", dir, "--json")
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("status --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return out
}

// docs/architecture.md § Publishing: worc's implementation flow, run with
// the script engine, ends in the task branch pushed to origin with the
// orchestrator's audit commit, and one pull request against main whose
// body is the run's summary; the run's end, status, runs --json and
// summary.json all name it; validate no longer warns (there is a remote).
func TestPublish_ImplementationFlowEndsInOnePullRequest(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "")
	if v := runCLI(t, "validate", "implementation", "--dir", dir); strings.Contains(v.stdout, "no git remote") {
		t.Errorf("validate warns of a missing remote though origin exists:\n%s", v.stdout)
	}
	r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 {
		t.Fatalf("%d pull requests, want 1: %+v", len(pulls), pulls)
	}
	pr := pulls[0]
	if pr.State != "open" || pr.Head != "stratus/t-implementation" || pr.Base != "main" || pr.Title != "Run end" ||
		!strings.Contains(pr.Body, "## Follow-ups") || !strings.Contains(pr.Body, "Opened by Stratus for run `r-") {
		t.Errorf("pull request: %+v", pr)
	}
	if out := r.stdout + r.stderr; !strings.Contains(out, "  branch:   stratus/t-implementation pushed to origin ("+bare+")") ||
		!strings.Contains(out, "  pull request: #1 ") {
		t.Errorf("the run's end does not name the branch and the pull request:\n%s%s", r.stdout, r.stderr)
	}
	tip := gitIn(t, bare, "rev-parse", "refs/heads/stratus/t-implementation")
	if pr.HeadSHA != tip {
		t.Errorf("PR head %s, branch %s", pr.HeadSHA, tip)
	}
	if got := gitIn(t, bare, "log", "-1", "--format=%an <%ae>|%s", tip); got != "Stratus <stratus@stratus.invalid>|chore(orchestrator): audit trail for t-implementation" {
		t.Errorf("the branch's tip is not the audit commit: %s", got)
	}
	if sum := gitIn(t, bare, "show", tip+":tasks/done/t-implementation.summary.md"); !strings.Contains(sum, "## Follow-ups") {
		t.Errorf("audit file:\n%s", sum)
	}
	if got := gitIn(t, bare, "show", tip+":cmd/hello/main.go"); !strings.Contains(got, `flag.String("name"`) {
		t.Errorf("the run's change is not on the branch:\n%s", got)
	}
	// Built on the operator's main: the pull request is the run's change.
	if base := gitIn(t, bare, "merge-base", tip, "main"); base != gitIn(t, bare, "rev-parse", "main") {
		t.Errorf("branch not built on main: merge-base %s", base)
	}
	st := pubStatus(t, dir, "t-implementation")
	pub, _ := st["publication"].(map[string]any)
	prj, _ := pub["pull_request"].(map[string]any)
	if pub["branch"] != "stratus/t-implementation" || pub["head"] != tip || prj["number"] != float64(1) || prj["state"] != "open" {
		t.Errorf("status --json publication: %v", st["publication"])
	}
	runs := runCLI(t, "runs", "--dir", dir, "--json")
	if !strings.Contains(runs.stdout, `"pull_request":"`+strings.TrimSuffix(srv.URL, "api/v3/")) && !strings.Contains(runs.stdout, `"pull_request": "`) {
		t.Errorf("runs --json lacks the pull request:\n%s", runs.stdout)
	}
	var sum struct {
		Publication *struct {
			PullRequest *struct{ URL string } `json:"pull_request"`
		} `json:"publication"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/logs/t-implementation/summary.json"))), &sum); err != nil ||
		sum.Publication == nil || sum.Publication.PullRequest == nil || sum.Publication.PullRequest.URL != prj["url"] {
		t.Errorf("summary.json publication: %+v %v", sum.Publication, err)
	}
}

// The git token reaches the publisher alone: an engine that dumps its
// environment into the repository (so the dump is pushed and reviewed)
// holds none of it, and no file Stratus wrote — runner and engine logs,
// ctx files, the summary, the store with every state input — holds it,
// though the pull request was opened with it.
func TestPublish_TheTokenReachesNoEngineLogCtxFileOrStateInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), `read line
env > engine-env.txt
printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7}}\n'
printf '{"subrun_report": "wrote engine-env.txt"}\n'
`)
	usePrimaryShellEngine(t, dir, "dump")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/ship.yaml"), `flow:
  name: ship
  task_type: ship
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: pull_request
  nodes:
    - { id: write, kind: agent, role_file: ship/write.md, permission_profile: workspace-write }
    - { id: publish, kind: publish, policy: pull_request }
  edges:
    - { from: write, to: publish }
`)
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/ship/write.md"), "Write for {task_id}.\n")
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-ship\ntitle: Ship\ntask_type: ship\n---\nbody\n")
	bare, srv := withOrigin(t, dir, "")
	for _, isolation := range []string{"in-process", "process"} {
		if isolation == "process" {
			useIsolation(t, dir, "process")
		}
		r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
		if r.code != ExitOK {
			t.Fatalf("%s: run exit %d\n%s", isolation, r.code, r.stderr)
		}
		tip := gitIn(t, bare, "rev-parse", "refs/heads/stratus/t-ship")
		dump := gitIn(t, bare, "show", tip+":engine-env.txt")
		if !strings.Contains(dump, "PATH=") {
			t.Fatalf("%s: the engine's environment was not pushed:\n%s", isolation, dump)
		}
		if strings.Contains(dump, publishToken) {
			t.Errorf("%s: the engine's environment holds the git token", isolation)
		}
		if len(srv.Pulls("acme/app")) != 1 {
			t.Errorf("%s: %d pull requests, want 1 (the second run updates the first's)", isolation, len(srv.Pulls("acme/app")))
		}
		if strings.Contains(r.stdout+r.stderr, publishToken) {
			t.Errorf("%s: the run's output holds the token", isolation)
		}
	}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(publishToken)) {
			t.Errorf("%s holds the git token", p)
		}
		return nil
	})
}

// git.auto_merge squash-merges the pull request into the bare remote's
// pr_base: main gains one commit, the run's change, with main as its only
// parent; the run ends done with the pull request merged.
func TestPublish_AutoMergeSquashesIntoTheBase(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "  auto_merge: true\n  auto_merge_strategy: squash\n")
	before := gitIn(t, bare, "rev-parse", "main")
	r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || !pulls[0].Merged || pulls[0].MergeMethod != "squash" {
		t.Fatalf("pull requests: %+v", pulls)
	}
	after := gitIn(t, bare, "rev-parse", "main")
	if parents := gitIn(t, bare, "log", "-1", "--format=%P", after); parents != before {
		t.Errorf("main's new commit has parents %q, want only the old main %s (a squash)", parents, before)
	}
	if got := gitIn(t, bare, "show", "main:cmd/hello/main.go"); !strings.Contains(got, `flag.String("name"`) {
		t.Errorf("main lacks the run's change:\n%s", got)
	}
	st := pubStatus(t, dir, "t-implementation")
	prj, _ := st["publication"].(map[string]any)["pull_request"].(map[string]any)
	if st["status"] != "done" || prj["state"] != "merged" || prj["merge_sha"] != after {
		t.Errorf("status: %v, pull request %v (main at %s)", st["status"], prj, after)
	}
}

// worc configuration.md § `git`: a blocked merge ends the task
// manual_action_required with the pull request left open, never failed —
// here a protected main (a pre-receive hook refusing it).
func TestPublish_ProtectedBaseEndsManualActionRequiredWithThePROpen(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "  auto_merge: true\n")
	writeTestFile(t, filepath.Join(bare, "hooks/pre-receive"), "#!/bin/sh\nwhile read old new ref; do\n  [ \"$ref\" = refs/heads/main ] && { echo \"main is protected: changes go through review\" >&2; exit 1; }\ndone\nexit 0\n")
	if err := os.Chmod(filepath.Join(bare, "hooks/pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("run: exit %d, want %d (manual_action_required)\n%s", r.code, ExitManual, r.stderr)
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].State != "open" || pulls[0].Merged {
		t.Fatalf("pull requests: %+v", pulls)
	}
	if out := r.stdout + r.stderr; !strings.Contains(out, "main is protected") || !strings.Contains(out, "pull request: #1 ") ||
		!strings.Contains(out, "why:      publish#1: merge blocked, the pull request stays open: ") {
		t.Errorf("the run's end does not say why the merge was blocked, or the PR:\n%s", r.stderr)
	}
	st := pubStatus(t, dir, "t-implementation")
	if st["status"] != "manual_action_required" {
		t.Errorf("status %v", st["status"])
	}
}

// docs/architecture.md § Publishing, exactly once: a run killed while its
// publish step merges, then resumed, updates the pull request it opened and
// merges it — never a second pull request, never a force-push.
func TestPublish_KilledDuringPublishThenResumedOpensNoSecondPR(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "  auto_merge: true\n")
	hold, mark := filepath.Join(t.TempDir(), "hold"), filepath.Join(t.TempDir(), "merging")
	writeTestFile(t, hold, "")
	// The merge into main waits while hold exists, then is refused; once
	// hold is gone, merges pass.
	writeTestFile(t, filepath.Join(bare, "hooks/pre-receive"), "#!/bin/sh\nwhile read old new ref; do\n  if [ \"$ref\" = refs/heads/main ] && [ -e "+hold+" ]; then\n    touch "+mark+"\n    while [ -e "+hold+" ]; do sleep 0.05; done\n    exit 1\n  fi\ndone\nexit 0\n")
	if err := os.Chmod(filepath.Join(bare, "hooks/pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(stratusBin, "run", task, "--dir", dir)
	cmd.Env = append(os.Environ(), tokenEnv()...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the publish step merges", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the run and every process it started
	cmd.Wait()
	os.Remove(hold)
	if n := len(srv.Pulls("acme/app")); n != 1 {
		t.Fatalf("%d pull requests after the kill, want 1", n)
	}
	r := runCLIEnv(t, tokenEnv(), "resume", "t-implementation", "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("resume: exit %d\n%s\nthe killed run:\n%s", r.code, r.stderr, errb.String())
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || !pulls[0].Merged {
		t.Fatalf("after the resume: %+v", pulls)
	}
	if got := gitIn(t, bare, "show", "main:cmd/hello/main.go"); !strings.Contains(got, `flag.String("name"`) {
		t.Errorf("main lacks the run's change:\n%s", got)
	}
}

// Bad input at publish: each ends the publish step with a message naming
// the remote, the branch and what to do, and the run's work stays in its
// local branch (stratus pull).
func TestPublish_BadInputNamesTheRemoteTheBranchAndWhatToDo(t *testing.T) {
	t.Parallel()
	t.Run("no remote", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		gitIn(t, dir, "init", "-q", "-b", "main")
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "-c", "user.name=op", "-c", "user.email=op@example.invalid", "commit", "-qm", "init")
		v := runCLI(t, "validate", "implementation", "--dir", dir)
		if !strings.Contains(v.stdout, `the repository has no git remote "origin" (git.remote)`) {
			t.Errorf("validate does not warn at the policy:\n%s", v.stdout)
		}
		r := runCLI(t, "run", task, "--dir", dir)
		if r.code != ExitOK || !strings.Contains(r.stderr, `not pushed: the repository had no remote "origin" when the run started`) ||
			!strings.Contains(r.stderr, "branch stratus/t-implementation") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
		if got := gitIn(t, dir, "branch", "--list", "stratus/t-implementation"); got == "" {
			t.Errorf("the run's work is not in its local branch")
		}
	})
	t.Run("the remote moved", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		bare, srv := withOrigin(t, dir, "")
		// Someone else pushed a branch of the task's name.
		other := t.TempDir()
		gitIn(t, other, "clone", "-q", "-b", "main", bare, ".")
		writeTestFile(t, filepath.Join(other, "theirs.txt"), "theirs\n")
		gitIn(t, other, "add", "-A")
		gitIn(t, other, "commit", "-qm", "theirs")
		gitIn(t, other, "push", "-q", "origin", "HEAD:refs/heads/stratus/t-implementation")
		theirs := gitIn(t, other, "rev-parse", "HEAD")
		r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "push of") || !strings.Contains(r.stderr, "to branch stratus/t-implementation of remote origin refused") ||
			!strings.Contains(r.stderr, "someone else pushed to it") || !strings.Contains(r.stderr, "resume the publish step") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
		if got := gitIn(t, bare, "rev-parse", "refs/heads/stratus/t-implementation"); got != theirs {
			t.Errorf("their branch was overwritten: %s, want %s", got, theirs)
		}
		if n := len(srv.Pulls("acme/app")); n != 0 {
			t.Errorf("%d pull requests, want none", n)
		}
		if got := gitIn(t, dir, "branch", "--list", "stratus/t-implementation"); got == "" {
			t.Errorf("the run's work is not in its local branch")
		}
	})
	t.Run("branch_name is pr_base", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		bare, _ := withOrigin(t, dir, "")
		main := gitIn(t, bare, "rev-parse", "main")
		writeTestFile(t, task, strings.Replace(readFile(t, task), "task_type:", "branch_name: main\ntask_type:", 1))
		r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
		if r.code != ExitUsage || !strings.Contains(r.stderr, `branch_name "main" is git.pr_base`) || strings.Contains(r.stderr, "stratus: start") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
		if got := gitIn(t, bare, "rev-parse", "main"); got != main {
			t.Errorf("main moved to %s", got)
		}
	})
	t.Run("a password in the remote URL", func(t *testing.T) {
		t.Parallel()
		dir, _ := publishProject(t)
		withOrigin(t, dir, "")
		gitIn(t, dir, "remote", "set-url", "origin", "https://alice:Sup3rS3cret@git.example.invalid/acme/app.git")
		v := runCLI(t, "validate", "implementation", "--dir", dir)
		if !strings.Contains(v.stdout, "remote origin's URL holds a password, which Stratus never stores or uses") || strings.Contains(v.stdout+v.stderr, "Sup3rS3cret") {
			t.Errorf("validate: exit %d\n%s%s", v.code, v.stdout, v.stderr)
		}
	})
	t.Run("no token", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		_, srv := withOrigin(t, dir, "")
		r := runCLIEnv(t, []string{"GITHUB_TOKEN=", "GH_TOKEN=", "STRATUS_GIT_TOKEN=", "PATH=" + gitOnlyPath(t)}, "run", task, "--dir", dir)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "no token to open the pull request of branch stratus/t-implementation on acme/app") ||
			!strings.Contains(r.stderr, "GITHUB_TOKEN") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
		if n := len(srv.Pulls("acme/app")); n != 0 {
			t.Errorf("%d pull requests", n)
		}
	})
	t.Run("wrong token", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		withOrigin(t, dir, "")
		r := runCLIEnv(t, []string{"GITHUB_TOKEN=ghs_wrong", "GH_TOKEN=", "STRATUS_GIT_TOKEN="}, "run", task, "--dir", dir)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "github acme/app") || !strings.Contains(r.stderr, "token refused") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("pr_base missing", func(t *testing.T) {
		t.Parallel()
		dir, task := publishProject(t)
		withOrigin(t, dir, "  pr_base: release\n")
		r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
		if r.code != ExitFailed || !strings.Contains(r.stderr, "github acme/app") || !strings.Contains(r.stderr, "release") {
			t.Errorf("run: exit %d\n%s", r.code, r.stderr)
		}
		// The branch was pushed before the refusal: the run says so.
		pub, _ := pubStatus(t, dir, "t-implementation")["publication"].(map[string]any)
		if pub["branch"] != "stratus/t-implementation" || !strings.Contains(fmt.Sprint(pub["note"]), "pushed, then the publish failed") {
			t.Errorf("status publication %v", pub)
		}
	})
}

// gitOnlyPath is a PATH directory holding git, sh and the tools a run
// needs, but no gh (whose stored login Token would read).
func gitOnlyPath(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, name := range []string{"git", "sh", "env", "sleep", "cat"} {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// git.auto_merge_wait_for_checks arms GitHub's own auto-merge: with checks
// pending the run ends done, the pull request open and armed, and it
// merges when the checks pass.
func TestPublish_WaitForChecksArmsTheHostsAutoMerge(t *testing.T) {
	t.Parallel()
	dir, task := publishProject(t)
	_, srv := withOrigin(t, dir, "  auto_merge: true\n  auto_merge_wait_for_checks: true\n")
	srv.SetChecksPending("acme/app", true)
	r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].Merged || pulls[0].State != "open" {
		t.Fatalf("pull requests: %+v", pulls)
	}
	st := pubStatus(t, dir, "t-implementation")
	prj, _ := st["publication"].(map[string]any)["pull_request"].(map[string]any)
	if st["status"] != "done" || prj["auto_merge"] != "squash" || prj["state"] != "open" {
		t.Errorf("status %v, pull request %v", st["status"], prj)
	}
	if err := srv.CompleteChecks("acme/app"); err != nil {
		t.Fatal(err)
	}
	if pulls := srv.Pulls("acme/app"); !pulls[0].Merged {
		t.Errorf("not merged once the checks passed: %+v", pulls[0])
	}
}

// worc configuration.md § `git`, the task's publish: what a publish pushes
// and opens follows the task and the config — a sibling audit branch,
// publish: push and create_pull_request: false push the branch and open no
// pull request, a remote that is no GitHub repository gets the branch
// alone — each saying so.
func TestPublish_WhatIsPushedFollowsTheTaskAndTheConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, front, git string
		noAPI            bool
		pulls            int
		note             string
		auditOnBranch    bool
	}{
		{name: "audit on a sibling branch", git: "  footprint:\n    audit_on_branch: sibling\n", pulls: 1},
		{name: "publish push", front: "publish: push\n", pulls: 0, note: "the task's publish is push, so no pull request was opened", auditOnBranch: true},
		{name: "create_pull_request false", git: "  create_pull_request: false\n", pulls: 0, note: "git.create_pull_request is false, so no pull request was opened", auditOnBranch: true},
		{name: "not GitHub", noAPI: true, pulls: 0, note: "which is not a GitHub repository, so no pull request was opened", auditOnBranch: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, task := publishProject(t)
			bare, srv := withOrigin(t, dir, tc.git)
			if tc.front != "" {
				writeTestFile(t, task, strings.Replace(readFile(t, task), "task_type:", tc.front+"task_type:", 1))
			}
			if tc.noAPI {
				cfg := filepath.Join(dir, ".stratus/config.yaml")
				c := readFile(t, cfg)
				writeTestFile(t, cfg, c[:strings.Index(c, "git:\n")])
			}
			r := runCLIEnv(t, tokenEnv(), "run", task, "--dir", dir)
			if r.code != ExitOK {
				t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
			}
			if n := len(srv.Pulls("acme/app")); n != tc.pulls {
				t.Errorf("%d pull requests, want %d", n, tc.pulls)
			}
			tip := gitIn(t, bare, "rev-parse", "stratus/t-implementation")
			subject := gitIn(t, bare, "log", "-1", "--format=%s", tip)
			if audit := strings.HasPrefix(subject, "chore(orchestrator): audit trail"); audit != tc.auditOnBranch && tc.name != "audit on a sibling branch" {
				t.Errorf("branch tip %q", subject)
			}
			if tc.name == "audit on a sibling branch" {
				if strings.HasPrefix(subject, "chore(orchestrator)") {
					t.Errorf("the task branch holds the audit commit: %s", subject)
				}
				sib := gitIn(t, bare, "log", "-1", "--format=%s %P", "stratus/t-implementation-audit")
				if !strings.HasPrefix(sib, "chore(orchestrator): audit trail for t-implementation "+tip) {
					t.Errorf("the sibling branch is not the audit commit on the task branch: %s", sib)
				}
			}
			pub, _ := pubStatus(t, dir, "t-implementation")["publication"].(map[string]any)
			if !strings.Contains(fmt.Sprint(pub["note"]), tc.note) || (tc.note == "") != (pub["note"] == nil) {
				t.Errorf("publication note %v, want %q", pub["note"], tc.note)
			}
		})
	}
}
