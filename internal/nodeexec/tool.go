package nodeexec

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
)

// DefaultToolTimeoutSeconds is a tool's timeout when neither the node nor
// config tools.default_timeout_seconds sets one (worc configuration.md §
// tools).
const DefaultToolTimeoutSeconds = 3600

// RunTool runs a tool node on the runner (worc flow-authoring.md § Custom
// tool nodes): the executable flow.ResolveTool finds in the tools dir (the
// registry rule validation applies: one file name, a contained, regular,
// executable file — checked again here, on the machine that runs it), argv [path] only, cwd the
// work dir, the JSON context on stdin, the allowlisted environment only
// (plus a HOME, TMPDIR and cache dir: CommandEnv),
// killed (with its process group) at its timeout, and its process group
// killed when it exits (run). It keeps the first 1 MiB of stdout and, when
// stdout is longer, its last 64 KiB too (StdoutTail: where a trailing JSON
// outcome is), and the last 64 KiB of stderr. A tool that cannot be
// resolved or started is a launch_error result, not an error.
//
// The error is non-nil only when ctx ends (the runner is stopping) or the
// spec is not a tool spec.
func RunTool(ctx context.Context, s Spec) (*ToolResult, error) {
	if s.Kind != KindTool || s.Tool == nil {
		return nil, fmt.Errorf("exec spec of kind %q carries no tool", s.Kind)
	}
	t := s.Tool
	timeout := t.TimeoutSeconds
	if timeout <= 0 {
		timeout = DefaultToolTimeoutSeconds
	}
	res := &ToolResult{Name: t.Name, TimeoutSeconds: timeout}
	p, err := flow.ResolveTool(t.Dir, t.Name)
	if err != nil {
		res.Status, res.ExitCode, res.Error = StatusLaunchError, -1, stratus.ErrorMessage(err)
		return res, nil
	}
	res.Path = p
	head, last := &headBuffer{max: StdoutBytes}, &tailBuffer{max: StdoutTailBytes}
	stderr := &tailBuffer{max: StderrTailBytes}
	input := t.Input
	if input == nil {
		input = []byte{}
	}
	env, err := CommandEnv(s.AllowedEnvironment, s.Env)
	if err != nil {
		res.Status, res.ExitCode, res.Error = StatusLaunchError, -1, err.Error()
		return res, nil
	}
	pr, err := run(ctx, proc{path: p, argv: []string{p}, dir: s.Dir, env: env,
		stdin: input, timeout: time.Duration(timeout) * time.Second, stdout: io.MultiWriter(head, last), stderr: stderr})
	if err != nil {
		return nil, err
	}
	res.Status, res.ExitCode, res.Error, res.DurationMS = pr.status, pr.exitCode, pr.err, pr.duration.Milliseconds()
	res.Stdout, res.StdoutBytes = head.String(), head.total
	if kept := int64(len(res.Stdout)); res.StdoutBytes > kept {
		// The tail, minus what the head already holds.
		tail := last.String()
		res.StdoutTail = tail[max(0, int64(len(tail))-(res.StdoutBytes-kept)):]
	}
	res.Stderr, res.StderrBytes = stderr.String(), stderr.total
	return res, nil
}
