package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/publish"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// runExec runs a checks or tool node (the payload's exec spec) instead of
// an engine: nodeexec runs the commands or the tool here, where the
// repository is, and the result goes back through POST /v1/worker/submit
// for the server to decide. While they run, the counters —
// the number of commands finished — are re-posted every heartbeat interval,
// so the Task state's HeartbeatSeconds does not lapse on a long suite.
// A stopped runner (ctx ended) reports nothing, like a cancelled engine.
func runExec(ctx context.Context, c *workerclient.Client, p *worker.Payload, o Options) error {
	spec := *p.Exec
	o.Log.Info(fmt.Sprintf("%s attempt %d: %s node in %s", p.StepRef, p.Attempt, spec.Kind, spec.Dir))
	started := time.Now().UnixMilli()
	if err := c.Stats(ctx, worker.Stats{EngineStartedAt: &started}); err != nil {
		o.Log.Warn("stats: " + err.Error())
	}
	relay := newRelay(ctx, c, o.StatsInterval, o.HeartbeatInterval, o.Log)
	res := nodeexec.Result{Kind: spec.Kind}
	done := 0
	var err error
	switch spec.Kind {
	case nodeexec.KindChecks:
		res.Checks, err = nodeexec.RunChecks(ctx, spec, func(n int) {
			done = n
			relay.progress(contract.Progress{Steps: n})
		})
	case nodeexec.KindTool:
		res.Tool, err = nodeexec.RunTool(ctx, spec)
		if err == nil {
			done = 1
		}
	case nodeexec.KindPublish:
		res.Publish, err = runPublish(ctx, spec, o)
		if err == nil {
			done = 1
		}
	default:
		err = fmt.Errorf("exec spec of kind %q: this runner runs checks, tool and publish nodes only", spec.Kind)
	}
	relay.close()
	if ctx.Err() != nil {
		return stopped(ctx) // no result to report
	}
	if err != nil {
		reason := err.Error()
		return deliver(o, p, "failure", []byte(reason), func() error { return c.Fail(ctx, p.TaskID, ownFailure(reason)) })
	}
	if err := c.Stats(ctx, worker.Stats{Steps: &done}); err != nil {
		o.Log.Warn("stats: " + err.Error())
	}
	o.Log.Info(fmt.Sprintf("%s node done", spec.Kind), "wall_ms", time.Now().UnixMilli()-started)
	body, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return deliver(o, p, "report", body, func() error {
		_, err := c.Submit(ctx, p.TaskID, body)
		var ae *workerclient.APIError
		if errors.As(err, &ae) && ae.Status != 409 && !ae.Transient() {
			// Refused (e.g. 422): fail the attempt with the reason, keeping
			// the result, rather than leave the step to its timeout.
			o.Log.Error("submit refused: " + err.Error())
			reason := "result refused: " + ae.Message
			if path, serr := spool(o, p, "report", body); serr == nil {
				reason += " (result kept at " + path + ")"
			}
			return c.Fail(ctx, p.TaskID, reportRefused(reason))
		}
		return err
	})
}

// runPublish pushes the task branch and opens its pull request
// (publish.Publish) in a directory beside the checkout, with the bundles
// the checkout was made from. The token is the runner's own
// (publish.Token: on AWS the publisher task's secret, embedded the
// operator's environment); it never reaches an engine, the payload or a
// log.
func runPublish(ctx context.Context, spec nodeexec.Spec, o Options) (*nodeexec.PublishResult, error) {
	if spec.Publish == nil {
		return nil, fmt.Errorf("exec spec of kind publish carries no publish spec")
	}
	if o.checkout == nil {
		return nil, fmt.Errorf("publish: the payload carries no workspace to rebuild the task branch from")
	}
	token := publish.Token(ctx, os.Getenv)
	res, err := publish.Publish(ctx, filepath.Join(o.checkout.top, "publish"), o.checkout.bundles, *spec.Publish, publish.Options{Token: token})
	if err != nil && res.Head != "" && ctx.Err() == nil {
		// Pushed, then refused: the branch is on the remote, so the run
		// records it and fails the step with the reason.
		res.Failed = err.Error()
		return &res, nil
	}
	if err != nil {
		return nil, err
	}
	return &res, nil
}
