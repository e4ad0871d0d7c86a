package awsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/sfn"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// The events function (functions/events) closes what no process follows: a
// run whose execution ended while no `stratus run --target aws` watched it
// would stay running in the store, without a summary, and expired capability
// handles would never leave the table. It serves two EventBridge sources: the
// state machines' "Step Functions Execution Status Change" events
// (ExecutionEnded) and an hourly schedule (Sweep).

// EndedWhileWaiting is the reason a step still waiting for a human gets
// when its run's execution ends: nothing will complete its task token.
const EndedWhileWaiting = "the run ended while this step waited"

// LoadEvents is what the events function's main calls: Config from the
// environment, the SDK's default configuration and NewEvents.
func LoadEvents(ctx context.Context, getenv func(string) string, o Options) (*App, error) {
	cfg, awsCfg, err := fromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	return NewEvents(cfg, awsCfg, o)
}

// NewEvents builds the part of an App the events function uses: the
// DynamoDB store, the S3 sink, the runs' environments from their bundles
// and, when the ECS cluster is configured (or o.Launcher given), what stops
// a worker (Stopper). It reads no secret and launches nothing, so the
// function needs no permission beyond the table, the bucket's prefix and
// stopping the cluster's tasks (template.yaml, least privilege); its
// Service has no Tokens, Launcher or Minter and serves only ExecutionEnded
// and Sweep. Nothing is called.
//
// Required: Table and Bucket. Errors: EINVALID naming the variable that
// is missing.
func NewEvents(cfg Config, awsCfg aws.Config, o Options) (*App, error) {
	a, err := newRecords(cfg, awsCfg, o)
	if err != nil {
		return nil, err
	}
	sk := a.Sink
	a.Service = worker.New(worker.Config{Store: a.Store, Sink: sk, Env: runenv.EnvFunc(sk)})
	if cfg.Tasks.ClaimQueueURL != "" {
		// Only to wake the task pool's claim when a run ends.
		a.claimQueue = awssqs.NewFromConfig(awsCfg)
	}
	// Only to read an ended execution's history (why the run stopped, the
	// budgets it spent): no token is completed here.
	a.Tokens = sfn.New(sfn.NewClient(awsCfg), sfn.Options{})
	switch {
	case o.Launcher != nil:
		a.Stopper, _ = o.Launcher.(launch.TaskStopper)
	case cfg.ECS.Cluster != "":
		// Only to stop the workers of an execution that ended under them.
		l, err := ecsLauncher(awsCfg, cfg.ECS)
		if err != nil {
			return nil, err
		}
		a.Stopper, _ = l.(launch.TaskStopper)
	}
	return a, nil
}

// ExecutionEnded records the end of execution x of a stack's state machine
// for the run it belongs to (the execution is named by the run id, and a
// resume's "<run_id>.resume-<n>": lifecycle.ExecutionName), as
// awsrun.Finish does for a followed run: the run's terminal is
// lifecycle.ExecutionStatus(x) (done, failed or manual_action_required by
// the execution's error name) and its summary (report.Collect,
// report.Write to the run's own files in the bucket: sink.ForRun) is
// written from its final records (docs/contracts.md § The summary artifacts:
// a failed or manual run gets a report too). A step still waiting for a human
// (worker.StepWaiting) fails first with EndedWhileWaiting: its task token
// died with the execution. Once the run is recorded ended, the task's lock it
// holds is released (dynamodb.Store.UnlockTask).
//
// An execution's end is applied only to the run that names it (Run.
// Execution, recorded before the execution starts; a run recorded without
// one names the execution of its current resume count): the end of a
// resumed run's previous execution, delivered late (EventBridge retries),
// is not the resumed run's. Such an execution, one that is still running,
// or one no run is recorded for is logged and ignored (nil: a retry would
// change nothing).
//
// A resume that makes the run running again while its end is being
// recorded wins: the run's end is written on condition that it was not
// resumed since it was read (dynamodb.Store.UpdateRunUnlessResumed), and
// otherwise logged and ignored, the task's lock left to the resumed run.
//
// Idempotent: a run already terminal — Finish came first, or this event is
// a replay — is left as it is (its lock released). The summary is written
// before the run is marked terminal, so a failure part-way (returned, and
// EventBridge's invocation is retried) redoes the whole of it.
//
// Once the end is recorded and the lock released, the task pool's claim is
// woken (a message to the claim queue, Config.Tasks.ClaimQueueURL, when the
// stack has one): the run's slot in the pool is free (README.md § Task pool).
func (a *App) ExecutionEnded(ctx context.Context, x executor.Execution) error {
	if !x.Done() {
		return nil
	}
	runID := lifecycle.RunIDOf(x.Name) // "<run_id>" or "<run_id>.resume-<n>"
	run, err := a.Store.GetRun(ctx, runID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		a.Logger.Warn(fmt.Sprintf("execution %s ended %s: no run %q is recorded; ignored", x.ARN, x.Status, runID), "run_id", runID)
		return nil
	} else if err != nil {
		return err
	}
	if !names(run, x) {
		a.Logger.Warn(fmt.Sprintf("execution %s ended %s, but run %s is execution %s; ignored", x.ARN, x.Status, run.ID,
			or(run.Execution, lifecycle.ExecutionName(run.ID, run.Resumes))), "run_id", run.ID)
		return nil
	}
	end := x.StopDate.UTC()
	if x.StopDate.IsZero() {
		end = time.Now().UTC()
	}
	if !stratus.RunTerminal(run.Status) {
		if err := a.failWaiting(ctx, run.ID, end); err != nil {
			return err
		}
		// An aborted or timed-out execution ran no Catch: a step still
		// running is canceled (docs/architecture.md § The run lifecycle;
		// Finish would too).
		hist, _ := a.Tokens.GetExecutionHistory(ctx, x.ARN) // unreadable: the reason says less
		def, _ := lifecycle.GetDefinition(ctx, a.Sink, run.ID)
		if _, err := lifecycle.CancelOpenWith(ctx, a.Store, run.ID, lifecycle.EndedUnder(x, hist, def), end, false); err != nil {
			return err
		}
	}
	// The workers of the canceled steps would run on, spending: stopped,
	// whoever canceled the step (this function, or `stratus cancel`, which
	// cannot reach ECS). Stopping a stopped worker does nothing.
	if err := a.stopCanceled(ctx, run.ID, x); err != nil {
		return err
	}
	if stratus.RunTerminal(run.Status) {
		// Recorded already (a follower's Finish, or a replay).
		if err := a.Store.UnlockTask(ctx, run.TaskID, run.ID); err != nil {
			return err
		}
		return a.wakeClaim(ctx, "run "+run.ID+" ended")
	}
	env, err := a.Service.Env(ctx, run.ID)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		// No bundle: the summary goes without the config's facts.
		a.Logger.Warn(fmt.Sprintf("run %s: no environment bundle (%v); its summary omits the config's facts", run.ID, err), "run_id", run.ID)
		env = nil
	} else if err != nil {
		return err
	}
	if run.Execution == "" {
		run.Execution = x.ARN
	}
	def, _ := lifecycle.GetDefinition(ctx, a.Sink, run.ID) // none: the stop line names the error only
	// Through EndingStore: a resume that made the run running again while
	// this end was being recorded is not undone.
	res, err := lifecycle.Finish(ctx, lifecycle.Ports{Store: dynamodb.EndingStore{Store: a.Store}, Sink: sink.ForRun(a.Sink, run.ID), Exec: a.Tokens}, run, worker.ReportEnv(env), def, x)
	if stratus.ErrorCode(err) == stratus.ECONFLICT {
		// The lock is the resumed run's now: kept.
		a.Logger.Warn(fmt.Sprintf("execution %s ended %s, but run %s was resumed while its end was recorded; ignored: %v", x.ARN, x.Status, run.ID, err), "run_id", run.ID)
		return nil
	} else if err != nil {
		return err
	}
	status := res.Status
	a.Logger.Info(fmt.Sprintf("run %s: execution %s ended %s; run %s", run.ID, x.ARN, x.Status, status), "run_id", run.ID, "status", status)
	if err := a.Store.UnlockTask(ctx, run.TaskID, run.ID); err != nil {
		return err
	}
	// The run's slot in the task pool, and its task's lock, are free: the
	// claim looks again (README.md § Task pool).
	return a.wakeClaim(ctx, "run "+run.ID+" ended")
}

// names reports whether run names execution x as its own: its recorded
// execution, or — a run recorded without one — the execution named for
// its current resume count (lifecycle.ExecutionName).
func names(run stratus.Run, x executor.Execution) bool {
	if run.Execution != "" && x.ARN != "" {
		return run.Execution == x.ARN
	}
	return x.Name == "" || x.Name == lifecycle.ExecutionName(run.ID, run.Resumes)
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// failWaiting fails each step of run runID still waiting for a human: its
// value keeps the request and gets outcome "failed" and reason
// EndedWhileWaiting (which the summary's stop line reads).
func (a *App) failWaiting(ctx context.Context, runID string, end time.Time) error {
	steps, err := a.Store.ListSteps(ctx, runID)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if st.Status != worker.StepWaiting {
			continue
		}
		v := map[string]json.RawMessage{}
		if len(st.Value) > 0 {
			if err := json.Unmarshal(st.Value, &v); err != nil {
				v = map[string]json.RawMessage{}
			}
		}
		v["step_ref"], _ = json.Marshal(st.StepRef)
		v["node"], _ = json.Marshal(st.Node)
		v["outcome"], _ = json.Marshal("failed")
		v["reason"], _ = json.Marshal(EndedWhileWaiting)
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		st.Status, st.Value, st.EndedAt = stratus.StepFailed, raw, end
		if err := a.Store.UpdateStep(ctx, st); err != nil {
			return err
		}
		a.Logger.Info(fmt.Sprintf("run %s: %s failed: %s", runID, st.StepRef, EndedWhileWaiting), "run_id", runID, "step_ref", st.StepRef)
	}
	return nil
}

// Sweep deletes the capability handles expired at now
// (store/dynamodb.Store.Sweep; DynamoDB's TTL deletes them only
// eventually) and logs how many.
func (a *App) Sweep(ctx context.Context, now time.Time) error {
	n, err := a.Store.Sweep(ctx, now)
	if err != nil {
		return err
	}
	a.Logger.Info(fmt.Sprintf("swept %d expired handle(s)", n), "swept", n)
	return nil
}

// stopCanceled stops the workers of run runID's canceled steps.
func (a *App) stopCanceled(ctx context.Context, runID string, x executor.Execution) error {
	steps, err := a.Store.ListSteps(ctx, runID)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s.Status != stratus.StepCanceled {
			continue
		}
		if a.Stopper == nil {
			a.Logger.Warn(fmt.Sprintf("run %s: %s canceled; no ECS cluster is configured to stop its worker", runID, s.StepRef), "run_id", runID, "step_ref", s.StepRef)
			continue
		}
		if err := a.Stopper.StopTask(ctx, s.TID); err != nil {
			return fmt.Errorf("stop the worker of %s: %w", s.StepRef, err)
		}
		a.Logger.Info(fmt.Sprintf("run %s: the worker of %s stopped (execution %s)", runID, s.StepRef, x.Status), "run_id", runID, "step_ref", s.StepRef)
	}
	return nil
}
