//go:build !slim

// The in-process --target aws tests need the AWS code: not in the slim build.

package main

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// issue 11 §§ 2–3, the parity test of a resumed run: the same failed run,
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
