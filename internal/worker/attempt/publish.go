package attempt

import (
	"context"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/publishing"
)

// StartPublish runs the publish step of run: it writes the run's summary
// (Service.Publish), then, when the node pushes (publishing.Plan), launches
// the publisher — a runner that pushes the task branch and opens its pull
// request, whose result submit records — or else completes the step done,
// its result naming the files written and why nothing was pushed
// (docs/architecture.md § Publishing). A summary the disk refuses stops the
// run with the step open (a resume publishes again); another write error
// fails the step.
func StartPublish(ctx context.Context, s *core.Service, run stratus.Run, env *core.RunEnv, step stratus.Step) error {
	written, err := s.Publish(ctx, run, env)
	if err != nil {
		if s.ReportDiskFull(fmt.Errorf("%s: write the summary: %w", step.StepRef, err)) {
			return nil
		}
		return s.FailStep(ctx, step, 0, core.ErrPublish, err.Error())
	}
	node := env.Flow.Node(step.Node)
	push, note := publishing.Plan(run, env, node)
	if push {
		return LaunchAttempt(ctx, s, run, env, step, 1)
	}
	result := strings.Join(written, ", ")
	if note != "" {
		result += "; " + note
		s.Warnf("%s: %s", step.StepRef, note)
	}
	if err := s.CompleteNonWorker(ctx, step, "done", result); err != nil && !s.ReportDiskFull(fmt.Errorf("%s: record it done: %w", step.StepRef, err)) {
		return err
	}
	return nil
}
