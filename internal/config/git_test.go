package config

import (
	"strings"
	"testing"
)

// worc's configuration reference, § git: the block is read as worc writes
// it, and an unset key takes worc's default.
func TestParse_GitBlockAsWorcWritesIt(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	c, err := Parse("config.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	g := c.Git
	if !g.PullRequests() || g.Base() != "main" || g.AutoMerge || g.Strategy() != "squash" || g.AutoMergeWaitForChecks ||
		g.MergeFlowName() != "merge" || g.RemoteName() != "origin" || g.AuditBranch() != "task" ||
		g.AuditMessage("t-1") != "chore(orchestrator): audit trail for t-1" {
		t.Errorf("defaults of an unset git block: %+v", g)
	}
	c, err = Parse("config.yaml", []byte(base+`git:
  create_pull_request: false
  pr_base: "develop"
  auto_merge: true
  auto_merge_strategy: rebase
  auto_merge_wait_for_checks: true
  merge_flow: resolve
  remote: upstream
  footprint:
    audit_commit_message: "audit {task_id} ({task_id})"
    audit_on_branch: sibling
`))
	if err != nil {
		t.Fatal(err)
	}
	g = c.Git
	if g.PullRequests() || g.Base() != "develop" || !g.AutoMerge || g.Strategy() != "rebase" || !g.AutoMergeWaitForChecks ||
		g.MergeFlowName() != "resolve" || g.RemoteName() != "upstream" || g.AuditBranch() != "sibling" ||
		g.AuditMessage("t-1") != "audit t-1 (t-1)" {
		t.Errorf("a written git block: %+v", g)
	}
}

// Each bad value of the git block is refused naming its key, the value and
// what is valid, all in one error.
func TestParse_GitBlockErrorsNameKeyValueAndValid(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	_, err := Parse("config.yaml", []byte(base+`git:
  pr_base: "main branch"
  auto_merge_strategy: fast-forward
  merge_flow: ../escape
  remote: -x
  api_url: "http://"
  repository: noslash
  footprint:
    audit_on_branch: elsewhere
  push_everything: true
`))
	if err == nil {
		t.Fatal("a bad git block was accepted")
	}
	for _, want := range []string{
		`git.pr_base: "main branch" is not a branch name; valid:`,
		`git.auto_merge_strategy: "fast-forward" is not a merge strategy; valid: merge, squash or rebase`,
		`git.merge_flow: "../escape" is not a flow name`,
		`git.remote: "-x" is not a remote name`,
		`git.footprint.audit_on_branch: "elsewhere" is not a place for the audit commit; valid: task or sibling`,
		`git.api_url: "http://" is not an http(s) URL`,
		`git.repository: "noslash" is not a GitHub repository name; valid: owner/name`,
		`push_everything`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
}
