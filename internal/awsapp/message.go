package awsapp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/stratusflow/stratus"
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

// HandleMessage runs one dispatch-queue message body through
// svc.Dispatch (DESIGN.md § The path of one step, 2). It returns an error
// only for an infrastructure failure, so the queue delivers that message
// again (the dispatch function reports it as a batch item failure; after
// the queue's maxReceiveCount it goes to the dead-letter queue). Such a
// failure is never charged to the run: its Task state is left waiting, not
// failed, so no rework budget is spent on it.
//
// Any other error belongs to the message and would recur: the message is
// dropped, and its Task state, when it names one, is failed with
// worker.ErrDispatch so the run routes now instead of at the state's
// timeout. A body that is not a dispatch message is dropped with a log
// line (it has no task token to fail).
func HandleMessage(ctx context.Context, svc *worker.Service, body string, log *slog.Logger) error {
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
