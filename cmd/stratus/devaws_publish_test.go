package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// noHostToken is an environment with none of the git token variables
// (publish.Token's): on dev aws the token reaches the publisher only
// through the stack's secret (--git-token-file).
func noHostToken() []string {
	return []string{"GITHUB_TOKEN=", "GH_TOKEN=", "STRATUS_GIT_TOKEN="}
}

// devAWSPublish starts `stratus dev aws --runners process
// --git-token-file F` (F holding publishToken) with no git token in its
// environment; it returns the flags line and the directory of the
// workers (each task's runner.log is in workers/<task>/).
func devAWSPublish(t *testing.T) (flags []string, workers string, log *syncBuffer) {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "git-token")
	if err := os.WriteFile(tokenFile, []byte(publishToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags, log, _ = devAWSLog(t, []string{"--git-token-file", tokenFile}, noHostToken()...)
	var m []string
	eventually(t, 30*time.Second, "dev aws names its workers' directory", func() bool {
		m = regexp.MustCompile(`workers in (\S+)\n`).FindStringSubmatch(log.String())
		return m != nil
	})
	return flags, m[1], log
}

// pubAWSStatus is `stratus status RUN --json` on the stack of flags, decoded.
func pubAWSStatus(t *testing.T, flags []string, run string) map[string]any {
	t.Helper()
	r := runCLIEnv(t, noHostToken(), append([]string{"status", run, "--json"}, flags...)...)
	var out map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("status --target aws --json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	return out
}

// docs/architecture.md § Publishing, on AWS: worc's implementation flow,
// run with the script engine on `dev aws` whose token is the stand-in
// Secrets Manager's (--git-token-file), ends in the task branch pushed to
// origin by the publisher task with the orchestrator's audit commit, and
// one pull request against main whose body is the run's summary; status
// and runs name it. The operator's environment has no token.
func TestDevAWS_ImplementationFlowEndsInOnePullRequest(t *testing.T) {
	flags, workers, devlog := devAWSPublish(t)
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "")
	r := runCLIEnv(t, noHostToken(), append([]string{"run", task, "--dir", dir, "--json"}, flags...)...)
	if r.code != ExitOK {
		t.Fatalf("run --target aws: exit %d\n%s\ndev aws:\n%s\nrunner logs:\n%s", r.code, r.stderr, devlog.String(), runnerLogs(t, workers))
	}
	runID := decodeRun(t, r.stdout).RunID
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 {
		t.Fatalf("%d pull requests, want 1: %+v", len(pulls), pulls)
	}
	pr := pulls[0]
	if pr.State != "open" || pr.Head != "stratus/t-implementation" || pr.Base != "main" || pr.Title != "Run end" ||
		!strings.Contains(pr.Body, "## Follow-ups") || !strings.Contains(pr.Body, "Opened by Stratus for run `"+runID+"`") {
		t.Errorf("pull request: %+v", pr)
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
	if base := gitIn(t, bare, "merge-base", tip, "main"); base != gitIn(t, bare, "rev-parse", "main") {
		t.Errorf("branch not built on main: merge-base %s", base)
	}
	st := pubAWSStatus(t, flags, runID)
	pub, _ := st["publication"].(map[string]any)
	prj, _ := pub["pull_request"].(map[string]any)
	if st["status"] != "done" || pub["branch"] != "stratus/t-implementation" || pub["head"] != tip || prj["number"] != float64(1) || prj["state"] != "open" || prj["url"] == nil {
		t.Errorf("status --target aws --json: %v, publication %v", st["status"], st["publication"])
	}
	runs := runCLIEnv(t, noHostToken(), append([]string{"runs", "--json"}, flags...)...)
	var lines []map[string]any
	if err := json.Unmarshal([]byte(runs.stdout), &lines); err != nil || len(lines) != 1 || lines[0]["pull_request"] != prj["url"] {
		t.Errorf("runs --target aws --json: %v\n%s", err, runs.stdout)
	}
}

// runnerLogs is every runner.log under the dev aws workers' directory.
func runnerLogs(t *testing.T, workers string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(workers, "*", "runner.log"))
	var b strings.Builder
	for _, l := range logs {
		body, _ := os.ReadFile(l)
		b.WriteString("== " + l + "\n" + string(body))
	}
	return b.String()
}

// docs/architecture.md § Publishing, exactly once, on AWS: the publisher
// task of a run is killed (SIGKILL, as an OOM kill ends it) while the
// stand-in merges its pull request into main (a pre-receive hook on the
// bare origin holds the merge); the publish step fails with ECS's stop
// reason, and `resume --target aws` runs the publish step again, which
// finds the branch and the pull request it made and merges that one:
// never a second pull request.
func TestDevAWS_KilledDuringPublishThenResumedOpensNoSecondPR(t *testing.T) {
	flags, workers, devlog := devAWSPublish(t)
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
	runID := detachRun(t, task, dir, flags)
	eventually(t, 5*time.Minute, "the publish step merges", func() bool {
		_, err := os.Stat(mark)
		return err == nil
	})
	started := regexp.MustCompile(`task \S+ of step ` + regexp.QuoteMeta(runID+".publish.1") + ` runs in process ([0-9]+) `).FindStringSubmatch(devlog.String())
	if started == nil {
		t.Fatalf("dev aws does not say where the publisher runs:\n%s", devlog.String())
	}
	pid, _ := strconv.Atoi(started[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -KILL %d (the publisher): %v", pid, err)
	}
	var st StatusResult
	eventually(t, 5*time.Minute, "the run ends after its publisher was killed", func() bool {
		st = statusJSON(t, runID, flags)
		s := stepOf(st, "publish#1")
		return st.Status != "running" && s != nil && s.Status != "running"
	})
	os.Remove(hold)
	if s := stepOf(st, "publish#1"); st.Status == "done" || s.Status != "failed" || !strings.Contains(s.Reason, "(exit code 137)") {
		t.Fatalf("after the kill: run %s, publish#1 %+v; want the step failed with ECS's stop reason", st.Status, s)
	}
	if n := len(srv.Pulls("acme/app")); n != 1 {
		t.Fatalf("%d pull requests after the kill, want 1", n)
	}
	r := runCLIEnv(t, noHostToken(), append([]string{"resume", runID}, flags...)...)
	if r.code != ExitOK || !strings.Contains(join(steps(r.stderr)), "publish#2:done") {
		t.Fatalf("resume --target aws: exit %d, steps %s\n%s\nrunner logs:\n%s", r.code, join(steps(r.stderr)), r.stderr, runnerLogs(t, workers))
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || !pulls[0].Merged {
		t.Fatalf("after the resume: %+v", pulls)
	}
	if got := gitIn(t, bare, "show", "main:cmd/hello/main.go"); !strings.Contains(got, `flag.String("name"`) {
		t.Errorf("main lacks the run's change:\n%s", got)
	}
	pub := pubAWSStatus(t, flags, runID)["publication"].(map[string]any)
	if prj, _ := pub["pull_request"].(map[string]any); prj["number"] != float64(1) || prj["state"] != "merged" || prj["merge_sha"] != gitIn(t, bare, "rev-parse", "main") {
		t.Errorf("status --target aws --json publication: %v", pub)
	}
}
