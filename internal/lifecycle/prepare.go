package lifecycle

import (
	"context"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/retry"
	"github.com/stratusflow/stratus/internal/store"
)

// CompileOptions are the compiler options config.yaml sets for every run:
// the hitl timeout, the cap on every loop budget (agents.max_fix_cycles)
// and the retry policy whose numbers every worker state's Retry carries
// (agents.retry, agents.max_stage_attempts). A run is compiled once, with
// them, when it is prepared, on either runtime.
func CompileOptions(cfg *config.Config) compiler.Options {
	p := retry.FromConfig(cfg)
	return compiler.Options{HITLTimeoutSeconds: cfg.HITL.TimeoutSeconds, MaxFixCycles: cfg.Agents.MaxFixCycles, Retry: &p}
}

// Resume is what a resume may change beside where the run goes on.
type Resume struct {
	ResumeOptions
	// MaxCostUSD and MaxTokens, when set, replace the run's caps (0: no
	// cap). A cap the run has already reached is refused.
	MaxCostUSD *float64
	MaxTokens  *int64
	// Owner is the new owner of the run (Owner() embedded, "" on AWS).
	Owner string
	// Execution, when set, is the ARN of the execution the caller will
	// start (on AWS it is known before it starts: executor.ExecutionARN of
	// ExecutionName(run.ID, run.Resumes+1)). It is recorded in the one
	// write that makes the run running again, so that the end of the
	// run's previous execution, delivered late, is never taken for the
	// resumed run's (an execution's end is applied only to the run that
	// names it).
	Execution string
}

// PrepareResume checks that run may resume and records it resumed, on
// either runtime: the run (as Reconcile left it) must be failed,
// manual_action_required or interrupted; PlanResume says where it goes on
// from its steps and def (its compiled definition); the new caps, if any,
// must be above what it has spent. The run is then recorded running again,
// its resume count one up, its owner o.Owner, its execution o.Execution
// when set — the caller starts the new execution, named
// ExecutionName(run.ID, run.Resumes), with plan.Input.
//
// Errors: EINVALID for a run that is done or still running, or a cap it
// has reached; PlanResume's (*BudgetSpentError included); the store's.
func PrepareResume(ctx context.Context, st store.Store, run stratus.Run, def []byte, o Resume) (stratus.Run, *ResumePoint, error) {
	if !stratus.RunResumable(run.Status) {
		why := "it is done"
		if !stratus.RunTerminal(run.Status) {
			why = "it is still running"
			if run.Owner != "" {
				why += " (owner " + run.Owner + ")"
			}
		}
		return run, nil, stratus.Errorf(stratus.EINVALID, "run %s cannot be resumed: %s; a failed, manual_action_required or interrupted run can", run.ID, why)
	}
	steps, err := st.ListSteps(ctx, run.ID)
	if err != nil {
		return run, nil, err
	}
	plan, err := PlanResume(def, run.ID, run.TaskID, steps, o.ResumeOptions)
	if err != nil {
		return run, nil, err
	}
	if o.MaxCostUSD != nil {
		run.MaxCostUSD = *o.MaxCostUSD
	}
	if o.MaxTokens != nil {
		run.MaxTokens = *o.MaxTokens
	}
	if run.MaxCostUSD > 0 || run.MaxTokens > 0 {
		// A run at its cap, raised or not, would park again before its
		// first step: refused, naming the flags that raise it.
		sp, err := RunSpend(ctx, st, run.ID)
		if err != nil {
			return run, nil, err
		}
		if why := CapReached(run, sp); why != "" {
			return run, nil, stratus.Errorf(stratus.EINVALID, "run %s would stop again at once: %s; give a cap above what it has spent (--max-cost-usd N, --max-tokens N; 0: no cap)", run.ID, why)
		}
	}
	run.Resumes++
	run.Resumed(time.Now().UTC()) // the idle time since its stop is not the run's
	run.Status, run.Owner = stratus.RunRunning, o.Owner
	if o.Execution != "" {
		run.Execution = o.Execution
	}
	if err := st.UpdateRun(ctx, run); err != nil {
		return run, nil, err
	}
	return run, plan, nil
}
