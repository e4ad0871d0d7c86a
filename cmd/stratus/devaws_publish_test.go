package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsddb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/devstack/moto"
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
	end := decodeRun(t, r.stdout)
	runID := end.RunID
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 {
		t.Fatalf("%d pull requests, want 1: %+v", len(pulls), pulls)
	}
	if p := end.Publication; p == nil || p.Branch != "stratus/t-implementation" || p.URL != bare || p.PullRequest == nil || p.PullRequest.Number != 1 {
		t.Errorf("the run's end (run --json) does not name the branch and the pull request: %+v", p)
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

// worc configuration.md § `git`, on AWS: a merge the remote refuses (main
// protected: a pre-receive hook) ends the run manual_action_required with
// the pull request open and the reason said, as embedded.
func TestDevAWS_ProtectedBaseEndsManualActionRequiredWithThePROpen(t *testing.T) {
	flags, workers, _ := devAWSPublish(t)
	dir, task := publishProject(t)
	bare, srv := withOrigin(t, dir, "  auto_merge: true\n")
	writeTestFile(t, filepath.Join(bare, "hooks/pre-receive"), "#!/bin/sh\nwhile read old new ref; do\n  [ \"$ref\" = refs/heads/main ] && { echo \"main is protected: changes go through review\" >&2; exit 1; }\ndone\nexit 0\n")
	if err := os.Chmod(filepath.Join(bare, "hooks/pre-receive"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := runCLIEnv(t, noHostToken(), append([]string{"run", task, "--dir", dir}, flags...)...)
	if r.code != ExitManual {
		t.Fatalf("run --target aws: exit %d, want %d (manual_action_required)\n%s\nrunner logs:\n%s", r.code, ExitManual, r.stderr, runnerLogs(t, workers))
	}
	pulls := srv.Pulls("acme/app")
	if len(pulls) != 1 || pulls[0].State != "open" || pulls[0].Merged {
		t.Fatalf("pull requests: %+v", pulls)
	}
	if out := r.stdout + r.stderr; !strings.Contains(out, "main is protected") || !strings.Contains(out, "pull request: #1 ") {
		t.Errorf("the run's end does not say why the merge was blocked, or the PR:\n%s%s", r.stdout, r.stderr)
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
	if out := r.stdout + r.stderr; !strings.Contains(out, "  branch:   stratus/t-implementation pushed to origin ("+bare+")") || !strings.Contains(out, "  pull request: #1 ") {
		t.Errorf("the resumed run's end does not name the branch and the pull request:\n%s%s", r.stdout, r.stderr)
	}
	if got := gitIn(t, bare, "show", "main:cmd/hello/main.go"); !strings.Contains(got, `flag.String("name"`) {
		t.Errorf("main lacks the run's change:\n%s", got)
	}
	pub := pubAWSStatus(t, flags, runID)["publication"].(map[string]any)
	if prj, _ := pub["pull_request"].(map[string]any); prj["number"] != float64(1) || prj["state"] != "merged" || prj["merge_sha"] != gitIn(t, bare, "rev-parse", "main") {
		t.Errorf("status --target aws --json publication: %v", pub)
	}
}

// shipProject is an installed work dir whose flow "ship" has one agent
// step, whose engine (engine.sh) writes its whole environment to
// engine-env.txt in the repository, then a publish node opening a pull
// request — the publish step pushes the dump, so the bare origin shows
// what the engine saw; the task is t-ship. (TestPublish_TheTokenReaches…
// has the same flow embedded.)
func shipProject(t *testing.T) (dir, task string) {
	t.Helper()
	dir = t.TempDir()
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
	task = filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-ship\ntitle: Ship\ntask_type: ship\n---\nbody\n")
	return dir, task
}

// The git token reaches the publisher task alone, on AWS: the pull
// request was opened with it (the stand-in refuses any other), yet the
// engine's environment (pushed to the bare origin), every runner's log
// and directory and the functions' log dev aws keeps, the operator's
// work dir, every object of the stack's bucket (ctx files, summaries,
// state inputs), every item of the stack's table, every execution's input,
// output and history on the Step Functions stand-in and every task
// definition hold none of it.
func TestDevAWS_TheTokenReachesNoEngineLogCtxFileObjectItemOrExecutionInput(t *testing.T) {
	flags, workers, devlog := devAWSPublish(t)
	dir, task := shipProject(t)
	bare, srv := withOrigin(t, dir, "")
	r := runCLIEnv(t, noHostToken(), append([]string{"run", task, "--dir", dir, "--json"}, flags...)...)
	if r.code != ExitOK {
		t.Fatalf("run --target aws: exit %d\n%s\ndev aws:\n%s\nrunner logs:\n%s", r.code, r.stderr, devlog.String(), runnerLogs(t, workers))
	}
	runID := decodeRun(t, r.stdout).RunID
	if n := len(srv.Pulls("acme/app")); n != 1 {
		t.Fatalf("%d pull requests, want 1", n)
	}
	token := []byte(publishToken)
	holds := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, token) {
			t.Errorf("%s holds the git token", what)
		}
	}
	dump := gitIn(t, bare, "show", "refs/heads/stratus/t-ship:engine-env.txt")
	if !strings.Contains(dump, "STRATUS_HANDLE=") {
		t.Fatalf("the engine's environment was not pushed:\n%s", dump)
	}
	holds("the engine's environment", []byte(dump))
	holds("the run's output", []byte(r.stdout+r.stderr))
	// What dev aws keeps as files: each task's directory (its runner.log,
	// the engine's checkout, HOME) and the functions' log. The publisher
	// ran there, so this is where a leak of its own would be.
	devDir := filepath.Dir(workers)
	if n := walkFiles(t, devDir, holds); n == 0 {
		t.Fatalf("no file under %s", devDir)
	}
	logs := runnerLogs(t, workers)
	if !strings.Contains(logs, `"msg":"publish node done","component":"runner","run_id":"`+runID+`","step_ref":"publish#1"`) {
		t.Errorf("no runner log under %s is the publisher's:\n%s", workers, logs)
	}
	// The runners' checkouts are in their TMPDIR: any one left is read too.
	for _, m := range regexp.MustCompile(`workspace at (\S+): head`).FindAllStringSubmatch(logs, -1) {
		walkFiles(t, m[1], holds)
	}
	walkFiles(t, dir, holds)

	ctx := context.Background()
	cfg := moto.Config(flagValue(t, flags, "--endpoint-url"))
	st, err := devstack.Load(ctx, cfg, flagValue(t, flags, "--stack"))
	if err != nil {
		t.Fatal(err)
	}
	// The bucket: ctx files, the summary, state inputs, bundles' sidecars.
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	var objects, ctxFiles int
	for p := awss3.NewListObjectsV2Paginator(s3c, &awss3.ListObjectsV2Input{Bucket: aws.String(st.Bucket)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			obj, err := s3c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(st.Bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(obj.Body)
			obj.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			holds("s3://"+st.Bucket+"/"+aws.ToString(o.Key), b)
			objects++
			if strings.Contains(aws.ToString(o.Key), "/ctx/") {
				ctxFiles++
			}
		}
	}
	if objects == 0 || ctxFiles == 0 {
		t.Errorf("the bucket %s holds %d objects, %d ctx files; want the run's", st.Bucket, objects, ctxFiles)
	}
	// The table: the run, its steps, handles, every state input.
	ddb := awsddb.NewFromConfig(cfg)
	var items int
	for p := awsddb.NewScanPaginator(ddb, &awsddb.ScanInput{TableName: aws.String(st.Table)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			holds(fmt.Sprintf("the item %v of table %s", itemKey(it), st.Table), attrBytes(&ddbtypes.AttributeValueMemberM{Value: it}))
			items++
		}
	}
	if items == 0 {
		t.Errorf("the table %s holds no item", st.Table)
	}
	// Every execution of every state machine: its input, output and
	// history (each state's input and output).
	sfnc := awssfn.NewFromConfig(cfg)
	var executions int
	machines, err := sfnc.ListStateMachines(ctx, &awssfn.ListStateMachinesInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range machines.StateMachines {
		xs, err := sfnc.ListExecutions(ctx, &awssfn.ListExecutionsInput{StateMachineArn: m.StateMachineArn})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range xs.Executions {
			d, err := sfnc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: x.ExecutionArn})
			if err != nil {
				t.Fatal(err)
			}
			holds("the input or output of execution "+aws.ToString(x.Name), []byte(aws.ToString(d.Input)+aws.ToString(d.Output)))
			for p := awssfn.NewGetExecutionHistoryPaginator(sfnc, &awssfn.GetExecutionHistoryInput{ExecutionArn: x.ExecutionArn}); p.HasMorePages(); {
				h, err := p.NextPage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(h.Events)
				holds("the history of execution "+aws.ToString(x.Name), b)
			}
			executions++
		}
	}
	if executions == 0 {
		t.Errorf("no execution on the Step Functions stand-in")
	}
	// The task definitions name the token's secret, never its value.
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &moto.ECSClient{}
	ecsc := awsecs.NewFromConfig(ecsCfg)
	for _, td := range []string{st.TaskDef, st.NetworkTaskDef, st.PublisherTaskDef} {
		d, err := ecsc.DescribeTaskDefinition(ctx, &awsecs.DescribeTaskDefinitionInput{TaskDefinition: aws.String(td)})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(d.TaskDefinition)
		holds("the task definition "+td, b)
	}
}

// walkFiles calls holds with every regular file under root and its
// content; it returns how many.
func walkFiles(t *testing.T, root string, holds func(string, []byte)) int {
	t.Helper()
	n := 0
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil {
			holds(p, b)
			n++
		}
		return nil
	})
	return n
}

// attrBytes is every string and binary value of v, concatenated.
func attrBytes(v ddbtypes.AttributeValue) []byte {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return []byte(v.Value + "\n")
	case *ddbtypes.AttributeValueMemberB:
		return append(slices.Clone(v.Value), '\n')
	case *ddbtypes.AttributeValueMemberSS:
		return []byte(strings.Join(v.Value, "\n") + "\n")
	case *ddbtypes.AttributeValueMemberBS:
		return append(bytes.Join(v.Value, []byte("\n")), '\n')
	case *ddbtypes.AttributeValueMemberL:
		var b []byte
		for _, e := range v.Value {
			b = append(b, attrBytes(e)...)
		}
		return b
	case *ddbtypes.AttributeValueMemberM:
		var b []byte
		for k, e := range v.Value {
			b = append(append(b, k+"\n"...), attrBytes(e)...)
		}
		return b
	}
	return nil
}

// itemKey is an item's pk and sk, to name it.
func itemKey(it map[string]ddbtypes.AttributeValue) string {
	var ks []string
	for _, k := range []string{"pk", "sk", "PK", "SK"} {
		if s, ok := it[k].(*ddbtypes.AttributeValueMemberS); ok {
			ks = append(ks, s.Value)
		}
	}
	return strings.Join(ks, " ")
}
