package core

import (
	"fmt"
	"time"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
)

// The checks and tool node kinds run in the worker process, like an agent
// (the ECS runner task is what has the repository checked out): dispatch
// launches a runner, the runner finds an `exec` spec instead of an engine
// in its payload (execSpec), runs it (internal/nodeexec) and submits a
// nodeexec.Result; submitExec decides the outcome with nodeexec's pure
// rules and writes the artifacts.

// IsExec reports whether a node kind runs through nodeexec.
func IsExec(kind string) bool {
	return kind == flow.KindChecks || kind == flow.KindTool || kind == flow.KindPublish
}

// ExecRefusal says why a checks or tool node cannot be dispatched by this
// build (errName "" when it can): a checker it does not run, or a command
// set glob doublestar cannot parse.
func ExecRefusal(env *RunEnv, node *flow.Node) (errName, why string) {
	if node.Kind != flow.KindChecks {
		return "", ""
	}
	if !nodeexec.Supported(node.Checker) {
		return ErrUnsupported, fmt.Sprintf("node %q: checker %s is not supported by this build of Stratus; supported: %s, %s",
			node.ID, node.Checker, nodeexec.CommandProfile, nodeexec.Citation)
	}
	for name, set := range env.Config.Checks.CommandSets {
		for _, g := range set.Paths {
			if !doublestar.ValidatePattern(g) {
				return ErrDispatch, fmt.Sprintf("config checks.command_sets.%s.paths: %q is not a valid glob; valid: e.g. backend/** or **/*.md", name, g)
			}
		}
	}
	return "", ""
}

// execTTL is how long the handle of a checks or tool attempt must live: its
// worst-case run plus the compiler's grace (the handle is fenced as soon as
// the attempt ends, so a long life costs nothing).
func execTTL(env *RunEnv, node *flow.Node) time.Duration {
	secs := 0
	switch node.Kind {
	case flow.KindTool:
		secs = ToolTimeout(env, node)
	case flow.KindPublish:
		secs = PublishTimeoutSeconds
	case flow.KindChecks:
		for _, set := range env.Config.Checks.CommandSets {
			secs += SetTimeout(env, set.TimeoutSeconds) * len(set.Commands)
		}
	}
	return time.Duration(secs+compiler.TimeoutGraceSeconds) * time.Second
}

// PublishTimeoutSeconds bounds a publish node's runner, s: the fetches,
// the push, the pull request and a merge, each bounded by its own
// retries (the host's rate-limit waits), of a repository of any size.
const PublishTimeoutSeconds = 1800

// Outcomes a checks or tool step records when its verdict parks the run.
const (
	OutcomeIncomplete = "incomplete"             // checks: the gate could not be completed
	OutcomeManual     = "manual_action_required" // tool: timeout, launch error, crash, invalid or repeated outcome
)

// handleTTL is how long an attempt's handle lives: the minter's TTL, or for
// a checks or tool node its worst-case run when that is longer (a check
// suite may run for hours; its submit must still be accepted).
func (s *Service) handleTTL(env *RunEnv, node *flow.Node) time.Duration {
	ttl := s.Minter.TTLOrDefault()
	if node != nil && IsExec(node.Kind) {
		ttl = max(ttl, execTTL(env, node))
	}
	return ttl
}

// HandleLifetime is the longest an attempt's credential may live, from the
// attempt's start: the engine's deadline plus the submit grace (an engine
// that reports near its deadline must still be able to submit), and at
// least handleTTL. node is nil for a supervisor turn.
func (s *Service) HandleLifetime(env *RunEnv, node *flow.Node, res stratus.Resolved) time.Duration {
	ttl := s.handleTTL(env, node)
	if res.TimeoutSeconds > 0 {
		ttl = max(ttl, time.Duration(res.TimeoutSeconds+compiler.TimeoutGraceSeconds)*time.Second)
	}
	return ttl
}

// HandleLease is how long a worker's handle lives past its last renewal
// (docs/security.md § Handles): the capability token TTL
// (worker.token_ttl_seconds, default 600 s). The runner's stats and its
// silent-engine heartbeat (every 20 s) renew it, never past handleLifetime; a
// handle whose worker died stops working within one lease, not hours later.
func (s *Service) HandleLease() time.Duration { return s.Minter.TTLOrDefault() }
