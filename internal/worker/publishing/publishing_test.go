package publishing

import (
	"context"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker/core"
)

func env(t *testing.T, policy, front string) *core.RunEnv {
	t.Helper()
	fl, err := flow.Parse("f.yaml", []byte(`flow:
  name: f
  task_type: f
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: `+policy+`
  nodes:
    - { id: a, kind: agent, role_file: r/a.md }
    - { id: ship, kind: publish, policy: `+policy+` }
  edges:
    - { from: a, to: ship }
`))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := task.Parse("t.md", []byte("---\nid: t1\ntitle: T\n"+front+"---\nbody\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &core.RunEnv{Flow: fl, Task: tk, Config: config.Default()}
}

// docs/architecture.md § Publishing: the plan pushes only a pull-request
// policy's publish node, of a task that does not say commit, in a run whose
// workspace travels and had its remote; otherwise it says why, naming the
// branch.
func TestPlan_PushesOnlyWhatPublishes(t *testing.T) {
	t.Parallel()
	ws := &stratus.Workspace{Root: "/w", Base: strings.Repeat("b", 40), Head: strings.Repeat("b", 40),
		Remote: &stratus.GitRemote{Name: "origin", URL: "https://github.com/acme/app.git"}}
	noRemote := *ws
	noRemote.Remote = nil
	for _, tc := range []struct {
		name, policy, front string
		ws                  *stratus.Workspace
		push                bool
		note                string
	}{
		{"pull request", "pull_request", "", ws, true, ""},
		{"documentation pull request", "documentation_pull_request", "", ws, true, ""},
		{"local artifact", "local_artifact", "", ws, false, ""},
		{"none", "none", "", ws, false, ""},
		{"task commit", "pull_request", "publish: commit\n", ws, false, "the task's publish is commit; the run's commits come back as branch stratus/t1"},
		{"branch name", "pull_request", "publish: commit\nbranch_name: feat/x\n", ws, false, "as branch feat/x"},
		{"workdir", "pull_request", "", nil, false, "the run edited the work dir in place"},
		{"no remote", "pull_request", "", &noRemote, false, `had no remote "origin" when the run started`},
	} {
		e := env(t, tc.policy, tc.front)
		push, note := Plan(stratus.Run{ID: "r1", TaskID: "t1", Workspace: tc.ws}, e, e.Flow.Node("ship"))
		if push != tc.push || !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") {
			t.Errorf("%s: push %v note %q; want push %v note with %q", tc.name, push, note, tc.push, tc.note)
		}
	}
}

// A GitHub pull request for github.com remotes, or any remote with
// git.api_url (GitHub Enterprise, a stand-in); none for another host.
func TestHost_GitHubOrConfigured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		g         config.Git
		url       string
		api, repo string
	}{
		{config.Git{}, "https://github.com/acme/app.git", "https://api.github.com/", "acme/app"},
		{config.Git{}, "git@github.com:acme/app.git", "https://api.github.com/", "acme/app"},
		{config.Git{}, "https://gitlab.com/acme/app.git", "", ""},
		{config.Git{}, "/srv/git/app.git", "", ""},
		{config.Git{APIURL: "https://ghe.example.com/api/v3/"}, "https://ghe.example.com/acme/app.git", "https://ghe.example.com/api/v3/", "acme/app"},
		{config.Git{APIURL: "http://127.0.0.1:9/api/v3/", Repository: "demo/greeting"}, "/srv/git/app.git", "http://127.0.0.1:9/api/v3/", "demo/greeting"},
		{config.Git{APIURL: "http://127.0.0.1:9/api/v3/"}, "/srv/git/app.git", "", ""},
	} {
		api, repo := Host(tc.g, tc.url)
		if api != tc.api || repo != tc.repo {
			t.Errorf("Host(%+v, %s) = %q %q; want %q %q", tc.g, tc.url, api, repo, tc.api, tc.repo)
		}
	}
}

// A pull request's body is the summary and a line naming the run, cut at a
// line under GitHub's limit.
func TestBody_CutUnderGitHubsLimit(t *testing.T) {
	t.Parallel()
	run := stratus.Run{ID: "r-1", TaskID: "t1"}
	if b := Body(run, "# Done\n\nAll good.\n"); !strings.HasPrefix(b, "# Done\n\nAll good.\n\n---\nOpened by Stratus for run `r-1`") {
		t.Errorf("body %q", b)
	}
	long := strings.Repeat("a line of the summary\n", 10_000)
	b := Body(run, long)
	if len(b) > MaxBodyBytes || !strings.Contains(b, "summary cut to fit") || !strings.HasSuffix(b, "`stratus ui` its steps.\n") {
		t.Errorf("long body: %d bytes, tail %q", len(b), b[len(b)-200:])
	}
	if i := strings.Index(b, "_(summary cut"); !strings.HasSuffix(b[:i], "a line of the summary\n\n") {
		t.Errorf("not cut at a line: %q", b[i-40:i])
	}
}

// The server checks again what the task's load checks: a branch that is
// the base, or no branch name, is never handed to the runner.
func TestSpec_RefusesTheBaseAndABadBranch(t *testing.T) {
	t.Parallel()
	for _, branch := range []string{"main", "bad..name", "HEAD"} {
		e := env(t, "pull_request", "")
		e.Task.Front["branch_name"] = branch
		run := stratus.Run{ID: "r1", TaskID: "t1", Workspace: &stratus.Workspace{Remote: &stratus.GitRemote{Name: "origin", URL: "https://github.com/a/b.git"}}}
		if _, err := Spec(context.Background(), nil, run, e); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), "branch_name") {
			t.Errorf("branch %q: %v", branch, err)
		}
	}
}
