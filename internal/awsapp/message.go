package awsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/worker"
)

// Infrastructure reports whether err is an infrastructure failure: one a
// later try may not meet (throttling after the SDK's retries, a capacity
// error, an outage, a network error). Those are errors without a Stratus
// code or with EINTERNAL; every coded error (EINVALID, ENOTFOUND,
// ECONFLICT, ...) is an answer that another try would repeat.
func Infrastructure(err error) bool {
	return err != nil && stratus.ErrorCode(err) == stratus.EINTERNAL
}

// HandleMessage runs one dispatch-queue message body through svc.Dispatch
// (docs/architecture.md § The path of one step, 2). It returns an error only
// for an infrastructure failure, so the queue delivers that message again (the
// dispatch function reports it as a batch item failure; after the queue's
// maxReceiveCount it goes to the dead-letter queue). Such a failure is never
// charged to the run: its Task state is left waiting, not failed, so no rework
// budget is spent on it.
//
// Any other error belongs to the message and would recur: the message is
// dropped, and its Task state, when it names one, is failed with
// worker.ErrDispatch so the run routes now instead of at the state's
// timeout. A body that is not a dispatch message is dropped with a log
// line (it has no task token to fail).
//
// An "ECS Task State Change" event of a worker task that stopped, which
// the stack's WorkerTaskStopped rule sends to the queue, goes to
// svc.WorkerTaskStopped (TaskStopped).
func HandleMessage(ctx context.Context, svc *worker.Service, body string, log *slog.Logger) error {
	if handled, err := TaskStopped(ctx, svc, body, log); handled {
		return err
	}
	var m worker.Message
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		log.Warn(fmt.Sprintf("dispatch: dropped a message that is not a dispatch message (%v): %.200q", err, body))
		return nil
	}
	err := svc.Dispatch(ctx, m)
	switch {
	case err == nil:
		return nil
	case Infrastructure(err):
		return fmt.Errorf("dispatch %s of run %s: %w", m.Node, m.RunID, err)
	}
	log.Warn(fmt.Sprintf("dispatch: %s of run %s cannot be dispatched: %v", m.Node, m.RunID, err), "run_id", m.RunID, "node", m.Node)
	if m.TaskToken == "" {
		return nil
	}
	ferr := svc.Tokens.SendTaskFailure(ctx, m.TaskToken, worker.ErrDispatch, err.Error())
	if Infrastructure(ferr) {
		return fmt.Errorf("dispatch %s of run %s: report %s: %w", m.Node, m.RunID, worker.ErrDispatch, ferr)
	}
	if ferr != nil {
		log.Warn(fmt.Sprintf("dispatch: the Task state of %s could not be failed: %v", m.Node, ferr), "run_id", m.RunID, "node", m.Node)
	}
	return nil
}

// DetailTaskStateChange is the detail-type of the event ECS sends through
// EventBridge when a task changes state ("Amazon ECS task state change
// events").
const DetailTaskStateChange = "ECS Task State Change"

// taskEvent is what TaskStopped reads of an "ECS Task State Change" event.
type taskEvent struct {
	DetailType string `json:"detail-type"`
	Source     string `json:"source"`
	Detail     struct {
		TaskArn       string `json:"taskArn"`
		LastStatus    string `json:"lastStatus"`
		StoppedReason string `json:"stoppedReason"`
		Containers    []struct {
			Name     string `json:"name"`
			ExitCode *int   `json:"exitCode"`
			Reason   string `json:"reason"`
		} `json:"containers"`
		Overrides struct {
			ContainerOverrides []struct {
				Name        string `json:"name"`
				Environment []struct {
					Name  string `json:"name"`
					Value string `json:"value"`
				} `json:"environment"`
			} `json:"containerOverrides"`
		} `json:"overrides"`
	} `json:"detail"`
}

// TaskStopped handles body when it is an "ECS Task State Change" event
// (source aws.ecs) of a stopped task: the worker's bootstrap value, task id
// and attempt are read from the task's container overrides
// (launch.EnvHandle, EnvTaskID, EnvAttempt) and the stop —
// ECS's stoppedReason, the container's exit code and reason — goes to
// svc.WorkerTaskStopped. handled is false for any other body. An error is
// an infrastructure failure (the event is delivered again); an event
// without a bootstrap value, or of a task not yet stopped, is dropped.
func TaskStopped(ctx context.Context, svc *worker.Service, body string, log *slog.Logger) (handled bool, err error) {
	var ev taskEvent
	if json.Unmarshal([]byte(body), &ev) != nil || ev.DetailType != DetailTaskStateChange || ev.Source != "aws.ecs" {
		return false, nil
	}
	d := ev.Detail
	if d.LastStatus != "STOPPED" {
		return true, nil
	}
	var bootstrap, tid string
	var n int
	for _, o := range d.Overrides.ContainerOverrides {
		for _, e := range o.Environment {
			switch e.Name {
			case launch.EnvHandle:
				bootstrap = e.Value
			case launch.EnvTaskID:
				tid = e.Value
			case launch.EnvAttempt:
				n, _ = strconv.Atoi(e.Value)
			}
		}
	}
	if bootstrap == "" {
		log.Warn(fmt.Sprintf("dispatch: the stop of task %s carries no %s: not a worker's; dropped", d.TaskArn, launch.EnvHandle))
		return true, nil
	}
	why := d.StoppedReason
	if why == "" {
		why = "stopped"
	}
	for _, c := range d.Containers {
		if c.ExitCode != nil {
			why += fmt.Sprintf(" (exit code %d)", *c.ExitCode)
		}
		if c.Reason != "" {
			why += ": " + c.Reason
		}
	}
	why += " (task " + d.TaskArn + ")"
	if err := svc.WorkerTaskStopped(ctx, bootstrap, tid, n, why); err != nil {
		if Infrastructure(err) {
			return true, fmt.Errorf("the stop of task %s: %w", d.TaskArn, err)
		}
		log.Warn(fmt.Sprintf("dispatch: the stop of task %s: %v", d.TaskArn, err))
	}
	return true, nil
}
