// Package orchestrator runs one task through its flow in embedded mode
// (DESIGN.md: "The same compiled state machine runs on a laptop with no AWS
// at all"): it loads config, task and flow, validates and compiles the flow
// to ASL, and executes that ASL on the embedded executor, with the SQLite
// store, the file-system sink, local `stratus runner` processes for workers
// and the worker API served in process on 127.0.0.1.
//
// The Task states' sqs:sendMessage.waitForTaskToken resource maps to an
// in-process queue feeding worker.Service.Dispatch, the same dispatch code
// the AWS dispatch Lambda runs.
package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/launch/local"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/supervisor"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// Layout of DIR/.stratus/.
const (
	StateDir   = ".stratus"
	ConfigFile = "config.yaml"
	FlowsDir   = "flows"
	DBFile     = "stratus.db"
	KeyFile    = "hmac.key"
	ToolsDir   = "tools"
)

// Options configure one embedded run.
type Options struct {
	Dir      string    // the work dir holding .stratus/ (absolute or relative)
	TaskPath string    // the task file
	Self     string    // the stratus binary workers run as; "" = os.Executable()
	Progress io.Writer // live progress lines; nil = discard
}

// Result is the outcome of a run.
type Result struct {
	Run      stratus.Run
	Status   string          // done, failed, manual_action_required
	Summary  []string        // absolute paths of summary.json and summary.md
	CtxDir   string          // absolute ctx-dir
	Overhead []time.Duration // per step transition: report -> next engine start
	Error    string          // the execution's error name, when not done
	Cause    string
	// Budgets is what the run spent of each budget, whatever its terminal:
	// per $.loops counter (loops, inline budgets, hitl rounds, the global
	// backstop), the charges read from the execution's history
	// (spentBudgets; a Fail state has no output to read them from).
	Budgets map[string]int
}

// Run executes one task file to a terminal. Errors are returned for what
// prevents the run from starting (missing config, bad task, invalid flow);
// a run that starts always ends in a Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, StateDir)
	cfg, err := config.Load(filepath.Join(state, ConfigFile))
	if err != nil {
		return nil, err
	}
	tk, err := task.Load(o.TaskPath)
	if err != nil {
		return nil, err
	}
	taskPath, _ := filepath.Abs(o.TaskPath)
	flowsDir := filepath.Join(state, FlowsDir)
	fl, err := flow.Load(flowsDir, tk.TaskType)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		var names []string
		matches, _ := filepath.Glob(filepath.Join(flowsDir, "*.yaml"))
		for _, m := range matches {
			names = append(names, strings.TrimSuffix(filepath.Base(m), ".yaml"))
		}
		return nil, stratus.Errorf(stratus.ENOTFOUND, "task %s: %v; flows in %s: %s", tk.ID, err, flowsDir, strings.Join(names, ", "))
	} else if err != nil {
		return nil, err
	}
	if err := CheckRun(fl, flowsDir, filepath.Join(state, ToolsDir), cfg, tk, progress(o.Progress)); err != nil {
		return nil, err
	}
	if probs := Preflight(fl, cfg, tk); len(probs) > 0 {
		var lines []string
		for _, p := range probs {
			lines = append(lines, p.String())
		}
		return nil, stratus.Errorf(stratus.EINVALID, "task %s cannot run through flow %s:\n  %s", tk.ID, fl.TaskType, strings.Join(lines, "\n  "))
	}
	key, err := captoken.LoadOrCreateKey(filepath.Join(state, KeyFile))
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(state, DBFile))
	if err != nil {
		return nil, err
	}
	defer st.Close()
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}

	printEvent := func(e worker.Event) { fmt.Fprintln(progress, FormatEvent(e)) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the worker API: %w", err)
	}
	launcher := &local.Launcher{Executable: o.Self}
	env := &worker.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	var exec *embedded.Executor
	sk := fs.New(dir)
	svc := &worker.Service{
		Store:    st,
		Sink:     sk,
		Launcher: launcher,
		Minter:   &captoken.Minter{Key: key, TTL: time.Duration(cfg.Worker.TokenTTLSeconds) * time.Second},
		APIURL:   "http://" + ln.Addr().String(),
		Env:      func(context.Context, string) (*worker.RunEnv, error) { return env, nil },
		OnEvent:  printEvent,
		Warnf: func(format string, args ...any) {
			fmt.Fprintf(progress, "stratus: warning: "+format+"\n", args...)
		},
		ResolveFiles: true,
		MaxBodyBytes: cfg.Worker.MaxBodyBytes,
		LocalLogs:    filepath.Join(state, "logs"),
	}
	svc.Publish = func(ctx context.Context, run stratus.Run, _ *worker.RunEnv) ([]string, error) {
		if note := publishNote(ctx, st, run.ID, env.Flow); note != "" {
			fmt.Fprintf(progress, "stratus: %s\n", note) // issue 5 § 4: said, never silently skipped
		}
		f, err := report.Collect(ctx, st, run, stratus.RunDone, worker.ReportEnv(env))
		if err != nil {
			return nil, err
		}
		return report.Write(ctx, sk, f)
	}
	srv := &http.Server{Handler: httpapi.New(svc), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	var dispatches sync.WaitGroup
	dctx, cancelDispatch := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDispatch()
	exec = embedded.New(embedded.Options{
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
				var p struct {
					MessageBody worker.Message `json:"MessageBody"`
				}
				if err := json.Unmarshal(call.Parameters, &p); err != nil {
					return nil, fmt.Errorf("dispatch message: %w", err)
				}
				// The queue: dispatch runs outside the executor's goroutine.
				dispatches.Add(1)
				go func() {
					defer dispatches.Done()
					if err := svc.Dispatch(dctx, p.MessageBody); err != nil {
						fmt.Fprintf(progress, "stratus: dispatch %s: %v\n", p.MessageBody.Node, err)
						exec.SendTaskFailure(dctx, p.MessageBody.TaskToken, worker.ErrDispatch, err.Error())
					}
				}()
				return json.RawMessage(`{"MessageId":"embedded"}`), nil
			},
		},
	})
	svc.Tokens = exec

	cd, err := projection.CtxDir(cfg.Projection.Placement, tk.ID)
	if err != nil {
		return nil, err
	}
	unlock, err := lockTask(state, tk.ID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if arch, err := prepareCtxDir(filepath.Join(dir, filepath.FromSlash(report.Dir(tk.ID))), sk.Path(cd), cfg.Projection.Placement, tk.ID); err != nil {
		return nil, err
	} else if arch != "" {
		fmt.Fprintf(progress, "stratus: the previous run's ctx dir and logs of task %s moved to %s\n", tk.ID, arch)
	}
	// From here on the run reads its flow, prompts, config and tools from a
	// snapshot taken now (worc WRI-010); the ctx dir and the work dir stay live.
	runID := newRunID()
	bundle, release, err := freezeRun(ctx, state, runID, dir, flowsDir, taskPath)
	if err != nil {
		return nil, err
	}
	defer release()
	env = bundle.Env
	// The run compiles its frozen copy once. CheckRun above already applied
	// every rule the compiler enforces (flow.StateNames mirrors its names).
	var def []byte
	if def, err = compiler.Compile(env.Flow, compiler.Options{HITLTimeoutSeconds: env.Config.HITL.TimeoutSeconds, MaxFixCycles: env.Config.Agents.MaxFixCycles}); err != nil {
		return nil, err
	}
	run := stratus.Run{ID: runID, TaskID: tk.ID, TaskTitle: tk.Title, Flow: fl.TaskType, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: taskPath, CreatedAt: time.Now().UTC()}
	if err := st.CreateRun(ctx, run); err != nil {
		return nil, err
	}
	// While the run runs, `stratus approve|reject|answer` find its API here.
	removeAddress, err := WriteRunAddress(state, run.ID, svc.APIURL)
	if err != nil {
		return nil, err
	}
	defer removeAddress()
	input, _ := json.Marshal(map[string]string{"run_id": run.ID, "task_id": tk.ID})
	x, err := exec.StartExecution(ctx, executor.StartInput{StateMachine: fl.TaskType, Definition: def, Name: run.ID, Input: input})
	if err != nil {
		return nil, fmt.Errorf("start execution: %w", err)
	}
	run.Execution = x.ARN
	fmt.Fprintf(progress, "stratus: run %s: task %s through flow %s\n", run.ID, tk.ID, fl.TaskType)
	if w := supervisor.NarrowingWarning(cfg.Supervisor, fl); w != "" {
		svc.Warnf("%s", w) // seed 004 § What observe.mode costs: said once, at the start
	}

	x, err = exec.WaitExecution(ctx, x.ARN)
	if err != nil {
		// The caller was cancelled: stop the execution and the workers, and
		// leave a summary saying where the run stopped.
		bg := context.WithoutCancel(ctx)
		exec.StopExecution(bg, run.Execution, "stratus.Cancelled", err.Error())
		svc.Drain()
		settleSupervisor(bg, st, run.ID, 0, printEvent) // interrupted: no grace
		launcher.StopAll()
		run.Status, run.EndedAt = stratus.RunFailed, time.Now().UTC()
		st.UpdateRun(bg, run)
		res := &Result{Run: run, Status: stratus.RunFailed, Error: "stratus.Cancelled", Cause: "the run was interrupted", CtxDir: sk.Path(cd),
			Budgets: spentBudgets(exec.History(run.Execution))}
		if f, ferr := report.Collect(bg, st, run, stratus.RunFailed, worker.ReportEnv(env)); ferr == nil {
			f.Stop = &report.Stop{Interrupted: true}
			res.Cause = report.Why(f)
			if keys, werr := report.Write(bg, sk, f); werr == nil {
				res.Summary = []string{sk.Path(keys[0]), sk.Path(keys[1])}
			}
		}
		return res, err
	}
	svc.Drain() // no supervisor observation starts after the workers are stopped
	// An observation launched for the failure that ended the run is let
	// finish (bounded); what is left is recorded cut short, then stopped.
	settleSupervisor(ctx, st, run.ID, ObserveGrace, printEvent)
	launcher.StopAll()
	cancelDispatch()
	dispatches.Wait()

	hist := exec.History(run.Execution)
	res := &Result{Error: x.Error, Cause: x.Cause, Budgets: spentBudgets(hist)}
	switch {
	case x.Status == "SUCCEEDED":
		res.Status = stratus.RunDone
	case x.Error == compiler.ErrManualActionRequired:
		res.Status = stratus.RunManualActionRequired
	default:
		res.Status = stratus.RunFailed
	}
	run.Status, run.EndedAt = res.Status, time.Now().UTC()
	if err := st.UpdateRun(ctx, run); err != nil {
		return nil, err
	}
	res.Run = run
	f, err := report.Collect(ctx, st, run, res.Status, worker.ReportEnv(env))
	if err != nil {
		return nil, err
	}
	res.Overhead = report.Overhead(f)
	if res.Status != stratus.RunDone {
		f.Stop = readStop(hist, def, env.Flow, x.Error, x.Cause)
		if why := report.Why(f); why != "" {
			res.Cause = why // the summary's "Why the run stopped" says the same
		}
	}
	// The summary is rewritten from the final facts, whatever the terminal:
	// a failed or manual run gets a real report too (seed 004 § The summary
	// artifacts), and so does a run whose publish node was disabled.
	if _, err := report.Write(ctx, sk, f); err != nil {
		return nil, err
	}
	rd := report.Dir(tk.ID)
	res.Summary = []string{sk.Path(rd + "/summary.json"), sk.Path(rd + "/summary.md")}
	res.CtxDir = sk.Path(cd)
	return res, nil
}

// CheckRun is the validation a run needs before it starts (seed 004 § Fatal
// validation, "at flow dispatch"): all three layers of flow.Validate with
// the operator config and the tools dir, plus, for every node the task will
// run (enabled and not gated by a `when` fact), a role file that exists. A
// missing prompt of a `when`-gated node, a resume_role_file or a supervisor
// prompt is a warning written to warn: the node fails if it runs, and the
// supervisor falls back to its built-in instruction. The fatal problems are
// one EINVALID listing each.
func CheckRun(fl *flow.Flow, flowsDir, toolsDir string, cfg *config.Config, tk *task.Task, warn io.Writer) error {
	probs := flow.Validate(fl, flow.ValidateOptions{RoleFileRoot: flowsDir, Config: cfg, ToolsDir: toolsDir})
	for _, m := range flow.MissingRoleFiles(fl, flowsDir) {
		n := fl.Node(m.Node)
		if n != nil && m.Field == "role_file" && n.When == nil && (tk == nil || worker.NodeEnabled(tk, n.ID)) {
			probs = append(probs, m.Problem)
			continue
		}
		fmt.Fprintf(warn, "stratus: warning: %s\n", m.Problem.Message)
	}
	return fatalError(fl, probs)
}

func progress(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// Check runs the fatal validation of a flow; its problems are one EINVALID.
func Check(fl *flow.Flow, flowsDir string) error {
	return fatalError(fl, flow.Validate(fl, flow.ValidateOptions{RoleFileRoot: flowsDir}))
}

// fatalError is one EINVALID listing the fatal problems, one per line; nil
// when there is none.
func fatalError(fl *flow.Flow, probs []flow.Problem) error {
	var msg string
	for _, p := range probs {
		if p.Fatal {
			msg += "\n  " + p.String()
		}
	}
	if msg != "" {
		return stratus.Errorf(stratus.EINVALID, "flow %s is invalid:%s", fl.TaskType, msg)
	}
	return nil
}

func newRunID() string {
	b := make([]byte, 3)
	rand.Read(b)
	return "r-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// FormatEvent renders one progress line.
func FormatEvent(e worker.Event) string {
	switch e.Type {
	case worker.EventSupervisorStarted:
		return fmt.Sprintf("stratus: supervisor %s %s (%s)", e.StepRef, e.Node, orDash(e.Reason))
	case worker.EventSupervisorEnded:
		line := fmt.Sprintf("stratus: supervisor %s %s ended: %s", e.StepRef, e.Node, orDash(e.Outcome))
		if e.Reason != "" && e.Outcome == "failed" {
			line += fmt.Sprintf(" reason=%q", e.Reason)
		}
		return line
	case worker.EventStepStarted:
		return fmt.Sprintf("stratus: start %-16s node=%s attempt=%d", e.StepRef, e.Node, e.Attempt)
	case worker.EventStepWaiting:
		return fmt.Sprintf("stratus: wait  %-16s node=%s %s", e.StepRef, e.Node, e.Reason)
	default:
		line := fmt.Sprintf("stratus: end   %-16s node=%s attempt=%d terminal=%s verdict=%s duration=%s tokens=%d/%d",
			e.StepRef, e.Node, e.Attempt, orDash(e.Terminal), orDash(e.Outcome), e.Duration.Round(time.Millisecond), e.PromptTokens, e.CompletionTokens)
		if e.Reason != "" && e.Outcome != "done" {
			line += fmt.Sprintf(" reason=%q", e.Reason)
		}
		return line
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
