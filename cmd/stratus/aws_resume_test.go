//go:build !slim

// The in-process --target aws tests need the AWS code: not in the slim build.

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/functions/handler"
	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// README.md § Durable runs, the parity test of a resumed run: the same failed run,
// resumed embedded and on moto, re-runs the same step and ends the same
// way, with the same progress lines and ctx files. On AWS the run executes
// a state machine of its own compiled definition (named from its hash
// under the stack's prefix, not the deployed one), and the resume is a
// second execution of that machine, "<run_id>.resume-1", entering the
// failed step's state through the resume entry. Not parallel: it sets the
// CLI's AWS hooks.
func TestAWS_ResumeParityOnMoto(t *testing.T) {
	moto := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, `
nodes:
  implementation:
    - fail: the model refused
    - report: implemented
  review:
    - report: {findings: []}
default:
  report: ok
`)
	embDir, dir := installTask(t, scenario, exampleTask(t)), installTask(t, scenario, exampleTask(t))
	emb := runCLI(t, "run", filepath.Join(embDir, "task.md"), "--dir", embDir, "--json")
	if emb.code != ExitFailed {
		t.Fatalf("embedded run: exit %d\n%s", emb.code, emb.stderr)
	}
	embResumed := runCLI(t, "resume", decodeRun(t, emb.stdout).RunID, "--dir", embDir, "--json")
	if embResumed.code != ExitOK {
		t.Fatalf("embedded resume: exit %d\n%s", embResumed.code, embResumed.stderr)
	}

	st := deployStack(t, ctx, moto, dir)
	fns := startFunctions(t, ctx, st)
	defer fns.stop()
	stackName := st.createStack(t, ctx)
	useAWSForTest(t, ctx, newOpCounter())
	target := []string{"--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--stack", stackName, "--poll-interval", "200ms"}
	r := mainOut(append([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json"}, target...)...)
	if r.code != ExitFailed {
		t.Fatalf("run --target aws: exit %d\n%s\nfunctions' log:\n%s", r.code, r.stderr, fns.log.String())
	}
	if a, b := stepLines(r.stderr), stepLines(emb.stderr); !slices.Equal(a, b) {
		t.Errorf("the failed run's progress differs\n on AWS:   %s\nembedded: %s", strings.Join(a, "\n          "), strings.Join(b, "\n          "))
	}
	runID := decodeRun(t, r.stdout).RunID
	run, err := st.store.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	sfnc := awssfn.NewFromConfig(st.cfg)
	x, err := sfnc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(run.Execution)})
	if err != nil {
		t.Fatal(err)
	}
	machine := aws.ToString(x.StateMachineArn)
	if machine == st.stateMachine || !strings.Contains(machine, ":stateMachine:"+st.name+"-implementation-") {
		t.Errorf("the run executed %s; want a machine of its own definition, %s-implementation-<hash>", machine, st.name)
	}

	r2 := mainOut(append([]string{"resume", runID, "--json"}, target...)...)
	if r2.code != ExitOK {
		t.Fatalf("resume --target aws: exit %d\n%s\nfunctions' log:\n%s\nrunner logs:\n%s", r2.code, r2.stderr, fns.log.String(), fns.launcher.logs())
	}
	if a, b := stepLines(r2.stderr), stepLines(embResumed.stderr); !slices.Equal(a, b) || len(a) == 0 {
		t.Errorf("the resumed run's progress differs\n on AWS:   %s\nembedded: %s", strings.Join(a, "\n          "), strings.Join(b, "\n          "))
	}
	if got := join(steps(r2.stderr)); got != "implementation#2:done review#1:accept publish#1:done" {
		t.Errorf("resumed steps on AWS: %s", got)
	}
	if run, err = st.store.GetRun(ctx, runID); err != nil || run.Status != stratus.RunDone || run.Resumes != 1 {
		t.Fatalf("run after the resume: %+v %v; want done, resumed once", run, err)
	}
	x2, err := sfnc.DescribeExecution(ctx, &awssfn.DescribeExecutionInput{ExecutionArn: aws.String(run.Execution)})
	if err != nil || aws.ToString(x2.Name) != runID+".resume-1" || aws.ToString(x2.StateMachineArn) != machine || x2.Status != "SUCCEEDED" {
		t.Errorf("the resumed execution: %s %s on %s (%v); want %s.resume-1 SUCCEEDED on %s", aws.ToString(x2.Name), x2.Status, aws.ToString(x2.StateMachineArn), err, runID, machine)
	}
	awsCtx := st.objects(t, ctx, runFiles(runID)+"workspace/tasks/demo-greeting/ctx/")
	embCtx := dirFiles(t, decodeRun(t, embResumed.stdout).CtxDir)
	delete(embCtx, orchestrator.CtxMarker)
	if !slices.Equal(sortedKeys(awsCtx), sortedKeys(embCtx)) {
		t.Errorf("ctx files\n on AWS %v\nembedded %v", sortedKeys(awsCtx), sortedKeys(embCtx))
	}
	for name, b := range embCtx {
		if a, ok := awsCtx[name]; ok && stripSubmittedAt(a) != stripSubmittedAt(b) {
			t.Errorf("ctx file %s differs (submitted_at aside):\n on AWS %q\nembedded %q", name, a, b)
		}
	}
}

// README § On an AWS account, a resume and the end of the execution it
// replaces: EventBridge delivers an execution's end at least once, and a
// retry may come late. The end of a failed run's first execution,
// delivered to the events function just as `resume --target aws` starts
// the new execution (the moment the run, running again, would still have
// named its old execution), is not the resumed run's: the run goes on and
// ends done, and the same late end delivered again changes nothing. Not
// parallel: it sets the CLI's AWS hooks.
func TestAWS_ResumeSurvivesTheLateEndOfItsEarlierExecutionOnMoto(t *testing.T) {
	moto := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	scenario := filepath.Join(t.TempDir(), "scenario.yaml")
	writeTestFile(t, scenario, `
nodes:
  implementation:
    - fail: the model refused
    - report: implemented
  review:
    - report: {findings: []}
default:
  report: ok
`)
	dir := installTask(t, scenario, exampleTask(t))
	st := deployStack(t, ctx, moto, dir)
	fns := startFunctions(t, ctx, st)
	defer fns.stop()
	stackName := st.createStack(t, ctx)
	target := []string{"--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--stack", stackName, "--poll-interval", "200ms"}

	// The events function, on the stack's table and bucket, reached as
	// EventBridge reaches it: a "Step Functions Execution Status Change"
	// event through its Lambda handler.
	env := map[string]string{awsapp.EnvTable: st.table, awsapp.EnvBucket: st.bucket, awsapp.EnvBucketPrefix: "stratus/"}
	cfg, err := awsapp.FromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	evApp, err := awsapp.NewEvents(cfg, st.cfg, awsapp.Options{Log: &fns.log})
	if err != nil {
		t.Fatal(err)
	}
	deliver := handler.Events(evApp.ExecutionEnded, evApp.Sweep)
	deliverEnd := func(x executor.Execution) error {
		raw, err := lambdas.ExecutionStatusChange(x, "", "")
		if err != nil {
			return err
		}
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return err
		}
		return deliver(ctx, ev)
	}

	useAWSForTest(t, ctx, newOpCounter())
	r := mainOut(append([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json"}, target...)...)
	if r.code != ExitFailed {
		t.Fatalf("run --target aws: exit %d\n%s\nfunctions' log:\n%s", r.code, r.stderr, fns.log.String())
	}
	runID := decodeRun(t, r.stdout).RunID
	run, err := st.store.GetRun(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	first, err := sfn.New(awssfn.NewFromConfig(st.cfg), sfn.Options{}).DescribeExecution(ctx, run.Execution)
	if err != nil || first.Status != executor.StatusFailed {
		t.Fatalf("the first execution: %+v %v; want FAILED", first, err)
	}

	// The late end arrives as the resume starts its execution: after the
	// run was recorded running again, before StartExecution. The run as
	// the events function left it is read then.
	var lateErr error
	var afterLate stratus.Run
	var delivered sync.Once
	hook := awsConfigHook
	awsConfigHook = func(c *aws.Config) {
		hook(c)
		c.APIOptions = append(c.APIOptions, func(s *middleware.Stack) error {
			return s.Initialize.Add(middleware.InitializeMiddlewareFunc("lateEnd", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, metadata, error) {
				if p, ok := in.Parameters.(*awssfn.StartExecutionInput); ok && strings.HasSuffix(aws.ToString(p.Name), ".resume-1") {
					delivered.Do(func() {
						if lateErr = deliverEnd(first); lateErr == nil {
							afterLate, lateErr = st.store.GetRun(ctx, runID)
						}
					})
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
		})
	}
	r2 := mainOut(append([]string{"resume", runID, "--json"}, target...)...)
	if lateErr != nil {
		t.Fatalf("the events function refused the late end: %v", lateErr)
	}
	if afterLate.Status != stratus.RunRunning || !strings.HasSuffix(afterLate.Execution, ":"+runID+".resume-1") {
		t.Errorf("the late end of the first execution made the resumed run %s, naming %s; want it running, naming its .resume-1 execution\nfunctions' log:\n%s",
			afterLate.Status, afterLate.Execution, fns.log.String())
	}
	if l, err := st.store.GetTaskLock(ctx, run.TaskID); err != nil || l.RunID != runID {
		t.Errorf("the task's lock after the resume: %+v %v; want it naming %s", l, err, runID)
	}
	if r2.code != ExitOK {
		t.Fatalf("resume --target aws: exit %d\n%s\nfunctions' log:\n%s", r2.code, r2.stderr, fns.log.String())
	}
	if !strings.Contains(fns.log.String(), "execution "+first.ARN+" ended FAILED, but run "+runID+" is execution ") {
		t.Errorf("the events function did not see the late end as another execution's:\n%s", fns.log.String())
	}
	// EventBridge retries it once more, after the run's end.
	if err := deliverEnd(first); err != nil {
		t.Fatal(err)
	}
	if run, err = st.store.GetRun(ctx, runID); err != nil || run.Status != stratus.RunDone || run.Resumes != 1 || !strings.HasSuffix(run.Execution, ":"+runID+".resume-1") {
		t.Fatalf("run after the resume and the late ends: %+v %v; want done, resumed once, naming its .resume-1 execution", run, err)
	}
	if got := join(steps(r2.stderr)); got != "implementation#2:done review#1:accept publish#1:done" {
		t.Errorf("resumed steps: %s", got)
	}
}
