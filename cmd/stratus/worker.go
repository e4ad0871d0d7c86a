package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// WorkerOptions is what every `stratus worker` subcommand shares: the worker
// API and the attempt's credential, which the runner exports to its engine
// as STRATUS_API_URL and STRATUS_HANDLE
// (docs/contracts.md § Bearer authentication).
type WorkerOptions struct {
	IO     IO
	APIURL string // STRATUS_API_URL
	Handle string // STRATUS_HANDLE: a wh- handle or a capability token
}

// fromEnv fills what the flags did not from the worker environment.
func (o *WorkerOptions) fromEnv() {
	o.APIURL = os.Getenv(launch.EnvAPIURL)
	o.Handle = os.Getenv(launch.EnvHandle)
}

// client is the worker API client, or a usage error naming the unset
// variable.
func (o *WorkerOptions) client() (*workerclient.Client, error) {
	for _, env := range [][2]string{{launch.EnvAPIURL, o.APIURL}, {launch.EnvHandle, o.Handle}} {
		if env[1] == "" {
			return nil, usageError{fmt.Errorf("%s is not set; `stratus worker` runs inside a worker, whose runner exports %s and %s",
				env[0], launch.EnvAPIURL, launch.EnvHandle)}
		}
	}
	if u, err := url.Parse(o.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError{fmt.Errorf("%s=%q is not an http(s) URL", launch.EnvAPIURL, o.APIURL)}
	}
	return &workerclient.Client{BaseURL: o.APIURL, Credential: o.Handle}, nil
}

func newWorkerCmd(io IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Call the worker API from inside a worker (prompt, artifact, submit, result, degradation, stats)",
		Long: `worker calls the worker API (docs/contracts.md § Routes) with the credential
the runner exports to its engine: STRATUS_API_URL and STRATUS_HANDLE must be set.

IN is one fetch (worker prompt); OUT is tool calls, never a file the worker
writes itself (docs/contracts.md § Output is a tool call): stage each named
part with worker artifact, then end the attempt with worker submit (or
result).

A body given to submit or artifact that is exactly @file:<absolute path>
(one line) is replaced by that file's bytes before it is sent.

JSON answers are printed on stdout. Exit status: 0 done, 1 the API refused
or could not be reached (the server's message on stderr), 2 bad flags,
arguments, input files or environment.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error { return subcommandMissing(c, args) },
	}
	cmd.AddCommand(newWorkerPromptCmd(io), newWorkerArtifactCmd(io), newWorkerSubmitCmd(io),
		newWorkerResultCmd(io), newWorkerDegradationCmd(io), newWorkerStatsCmd(io))
	return cmd
}

// usageArgs makes a positional-argument error a usage error (exit 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// readSource reads FILE, or stdin for "-".
func readSource(in io.Reader, src string) ([]byte, error) {
	var b []byte
	var err error
	if src == "-" {
		b, err = io.ReadAll(in)
	} else {
		b, err = os.ReadFile(src)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("read %s: %w", src, err)}
	}
	return b, nil
}

// readBody reads a submit or artifact body from FILE or "-" and resolves the
// @file: sentinel (docs/contracts.md § Output is a tool call; resolved on the
// worker side, DESIGN.md § Limits). A bad sentinel is invalid input: exit 2.
func readBody(in io.Reader, src string) ([]byte, error) {
	b, err := readSource(in, src)
	if err != nil {
		return nil, err
	}
	return workerclient.ResolveFileSentinel(b)
}

const bodyArgHelp = `The body is FILE, or stdin when FILE is "-". It is never read from stdin
implicitly: an engine's stdin is its child-contract channel.`

// WorkerPromptOptions are the flags of `stratus worker prompt`.
type WorkerPromptOptions struct {
	WorkerOptions
	TaskID string // cross-checked against the credential; "" = the credential's task
	System bool   // print the baked system bytes instead of the payload
}

func newWorkerPromptCmd(io IO) *cobra.Command {
	o := &WorkerPromptOptions{WorkerOptions: WorkerOptions{IO: io}}
	cmd := &cobra.Command{
		Use:   "prompt [--task-id T] [--system]",
		Short: "Fetch this attempt's prompt payload (GET /v1/worker/prompt)",
		Long: `prompt prints the attempt's prompt payload as JSON
(docs/contracts.md § Request and response bodies):
{task_id, attempt, agent, system?, system_ref, prompt, context, step_ref, engine}.
context.ctx_dir and context.steps point at the files prior steps produced.

With --system it prints the exact baked system bytes instead (GET
/v1/worker/prompt/system, docs/contracts.md § Request and response bodies),
after checking them against the payload's system_ref.sha256.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			o.fromEnv()
			return runWorkerPrompt(o)
		},
	}
	cmd.Flags().StringVar(&o.TaskID, "task-id", "", "dispatch task id to cross-check (default: the credential's)")
	cmd.Flags().BoolVar(&o.System, "system", false, "print the baked system prompt bytes (text) instead of the JSON payload")
	return cmd
}

func runWorkerPrompt(o *WorkerPromptOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	p, err := c.Prompt(ctx, o.TaskID)
	if err != nil {
		return err
	}
	if !o.System {
		return printJSON(o.IO.Out, p)
	}
	b, err := c.System(ctx, p.TaskID, p.Attempt)
	if err != nil {
		return err
	}
	if ref := p.SystemRef; ref != nil {
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != ref.SHA256 || len(b) != ref.Bytes {
			return fmt.Errorf("system bytes of %s attempt %d are %d bytes with sha256 %s; system_ref says %d bytes with sha256 %s",
				p.TaskID, p.Attempt, len(b), got, ref.Bytes, ref.SHA256)
		}
	}
	_, err = o.IO.Out.Write(b)
	return err
}

// WorkerArtifactOptions are the flags of `stratus worker artifact`.
type WorkerArtifactOptions struct {
	WorkerOptions
	Name   string // the part's file name in the ctx dir
	Source string // FILE or "-"
}

func newWorkerArtifactCmd(io IO) *cobra.Command {
	o := &WorkerArtifactOptions{WorkerOptions: WorkerOptions{IO: io}}
	cmd := &cobra.Command{
		Use:   "artifact --name N FILE|-",
		Short: "Stage one named part (POST /v1/worker/artifact?name=)",
		Long: `artifact stages one named part of this attempt's output
(docs/contracts.md § Output is a tool call). The server writes it raw as
<ctx-dir>/<name>; staging the same name again overwrites it. Staging never
ends the attempt: submit does.
The name is a plain file name (plan.md), never a path, and one NFKC
normalization leaves unchanged (docs/security.md § Part names).

` + bodyArgHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			o.fromEnv()
			o.Source = args[0]
			return runWorkerArtifact(o)
		},
	}
	cmd.Flags().StringVar(&o.Name, "name", "", "the part's file name, e.g. plan.md (required)")
	return cmd
}

func runWorkerArtifact(o *WorkerArtifactOptions) error {
	if o.Name == "" {
		return usageError{fmt.Errorf("--name is required: the part's file name, e.g. --name plan.md")}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	body, err := readBody(o.IO.In, o.Source)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return c.Artifact(ctx, o.Name, body)
}

// WorkerSubmitOptions are the flags of `stratus worker submit`.
type WorkerSubmitOptions struct {
	WorkerOptions
	TaskID string // cross-checked against the credential; "" = the credential's task
	OK     bool   // false records a failed Final whose body is the reason
	Source string // FILE or "-"
}

func newWorkerSubmitCmd(io IO) *cobra.Command {
	o := &WorkerSubmitOptions{WorkerOptions: WorkerOptions{IO: io}}
	cmd := &cobra.Command{
		Use:   "submit [--ok=false] [--task-id T] FILE|-",
		Short: "Submit the final body and end the attempt (POST /v1/worker/submit)",
		Long: `submit posts this attempt's final body (docs/contracts.md § Routes) and
prints the step's value as JSON. The server folds the staged parts with it,
writes <ctx-dir>/<step>.md and completes the step. --ok=false fails the step
instead, the body being the reason.

` + bodyArgHelp,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			o.fromEnv()
			o.Source = args[0]
			return runWorkerSubmit(o)
		},
	}
	cmd.Flags().BoolVar(&o.OK, "ok", true, "whether the attempt succeeded")
	cmd.Flags().StringVar(&o.TaskID, "task-id", "", "dispatch task id to cross-check (default: the credential's)")
	return cmd
}

func runWorkerSubmit(o *WorkerSubmitOptions) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	body, err := readBody(o.IO.In, o.Source)
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	sv, err := c.SubmitOK(ctx, o.TaskID, body, o.OK)
	if err != nil {
		return err
	}
	return printJSON(o.IO.Out, sv)
}

// WorkerResultOptions are the flags of `stratus worker result`.
type WorkerResultOptions struct {
	WorkerOptions
	TaskID    string // required; default $STRATUS_TASK_ID
	OK        *bool  // required
	Value     string // JSON text; "" with ValueFile "" sends null
	ValueFile string // FILE or "-" holding the JSON value
}

func newWorkerResultCmd(io IO) *cobra.Command {
	o := &WorkerResultOptions{WorkerOptions: WorkerOptions{IO: io}}
	var ok bool
	cmd := &cobra.Command{
		Use:   "result --task-id T --ok=BOOL [--value JSON | --value-file F]",
		Short: "Post {task_id, value, ok} and end the attempt (POST /v1/worker/result)",
		Long: `result posts this attempt's result as {task_id, value, ok}
(docs/contracts.md § Request and response bodies) and prints the step's value
as JSON. The value is JSON: a JSON string is the body as is ('"done"'),
anything else is its JSON text.
With --ok=false the value may be {"terminal": "...", "reason": "..."}.
--task-id defaults to $STRATUS_TASK_ID; --value-file - reads stdin.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.fromEnv()
			if o.TaskID == "" {
				o.TaskID = os.Getenv(launch.EnvTaskID)
			}
			if cmd.Flags().Changed("ok") {
				o.OK = &ok
			}
			return runWorkerResult(o)
		},
	}
	cmd.Flags().StringVar(&o.TaskID, "task-id", "", "dispatch task id (required; default $STRATUS_TASK_ID)")
	cmd.Flags().BoolVar(&ok, "ok", false, "whether the attempt succeeded (required: --ok=true or --ok=false)")
	cmd.Flags().StringVar(&o.Value, "value", "", "the value, as JSON")
	cmd.Flags().StringVar(&o.ValueFile, "value-file", "", `file holding the value as JSON ("-" for stdin)`)
	return cmd
}

func runWorkerResult(o *WorkerResultOptions) error {
	if o.TaskID == "" {
		return usageError{fmt.Errorf("--task-id is required (or set %s)", launch.EnvTaskID)}
	}
	if o.OK == nil {
		return usageError{fmt.Errorf("--ok is required: --ok=true or --ok=false")}
	}
	if o.Value != "" && o.ValueFile != "" {
		return usageError{fmt.Errorf("--value and --value-file are exclusive; give one")}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	value, from := []byte(o.Value), "--value"
	if o.ValueFile != "" {
		if value, err = readSource(o.IO.In, o.ValueFile); err != nil {
			return err
		}
		from = "--value-file " + o.ValueFile
	}
	value = bytes.TrimSpace(value)
	if len(value) == 0 {
		value = []byte("null")
	}
	if !json.Valid(value) {
		return usageError{fmt.Errorf("%s is not valid JSON (%.40q); quote text as a JSON string, e.g. --value '\"done\"'", from, value)}
	}
	ctx, stop := signalContext()
	defer stop()
	sv, err := c.Result(ctx, worker.ResultBody{TaskID: o.TaskID, Value: value, OK: o.OK})
	if err != nil {
		return err
	}
	return printJSON(o.IO.Out, sv)
}

// WorkerDegradationOptions are the flags of `stratus worker degradation`.
type WorkerDegradationOptions struct {
	WorkerOptions
	Degradation worker.DegradationBody
}

func newWorkerDegradationCmd(io IO) *cobra.Command {
	o := &WorkerDegradationOptions{WorkerOptions: WorkerOptions{IO: io}}
	cmd := &cobra.Command{
		Use:   "degradation --tool T --error E --fallback F [--note N]",
		Short: "Record that a tool degraded to a fallback (POST /v1/worker/degradation)",
		Long: `degradation records on the run that a tool failed and what was done instead
(docs/contracts.md § Request and response bodies). It never becomes step
output; the server adds the step, attempt and time.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			o.fromEnv()
			return runWorkerDegradation(o)
		},
	}
	d := &o.Degradation
	cmd.Flags().StringVar(&d.Tool, "tool", "", "the tool that degraded (required)")
	cmd.Flags().StringVar(&d.Error, "error", "", "what went wrong (required)")
	cmd.Flags().StringVar(&d.Fallback, "fallback", "", "what was done instead (required)")
	cmd.Flags().StringVar(&d.Note, "note", "", "anything else worth knowing")
	return cmd
}

func runWorkerDegradation(o *WorkerDegradationOptions) error {
	d := o.Degradation
	for _, f := range []struct{ flag, v string }{{"--tool", d.Tool}, {"--error", d.Error}, {"--fallback", d.Fallback}} {
		if strings.TrimSpace(f.v) == "" {
			return usageError{fmt.Errorf("%s is required and must not be blank", f.flag)}
		}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return c.Degradation(ctx, d)
}

// WorkerStatsOptions are the flags of `stratus worker stats`.
type WorkerStatsOptions struct {
	WorkerOptions
	Stats worker.Stats // nil fields are not sent
}

func newWorkerStatsCmd(io IO) *cobra.Command {
	o := &WorkerStatsOptions{WorkerOptions: WorkerOptions{IO: io}}
	var steps int
	var prompt, completion int64
	var cost float64
	cmd := &cobra.Command{
		Use:   "stats [--steps N] [--prompt-tokens N] [--completion-tokens N] [--cost-usd X]",
		Short: "Report this attempt's cumulative counters (POST /v1/worker/stats)",
		Long: `stats reports this attempt's cumulative counters
(docs/contracts.md § Request and response bodies); only the flags given are
sent. Each report also heartbeats the step.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.fromEnv()
			f := cmd.Flags()
			if f.Changed("steps") {
				o.Stats.Steps = &steps
			}
			if f.Changed("prompt-tokens") {
				o.Stats.PromptTokens = &prompt
			}
			if f.Changed("completion-tokens") {
				o.Stats.CompletionTokens = &completion
			}
			if f.Changed("cost-usd") {
				o.Stats.CostUSD = &cost
			}
			return runWorkerStats(o)
		},
	}
	cmd.Flags().IntVar(&steps, "steps", 0, "agent steps so far")
	cmd.Flags().Int64Var(&prompt, "prompt-tokens", 0, "prompt tokens so far")
	cmd.Flags().Int64Var(&completion, "completion-tokens", 0, "completion tokens so far")
	cmd.Flags().Float64Var(&cost, "cost-usd", 0, "cost so far, in US dollars")
	return cmd
}

func runWorkerStats(o *WorkerStatsOptions) error {
	s := o.Stats
	if s.Steps == nil && s.PromptTokens == nil && s.CompletionTokens == nil && s.CostUSD == nil {
		return usageError{fmt.Errorf("give at least one of --steps, --prompt-tokens, --completion-tokens, --cost-usd")}
	}
	for _, f := range []struct {
		flag string
		bad  bool
	}{
		{"--steps", s.Steps != nil && *s.Steps < 0},
		{"--prompt-tokens", s.PromptTokens != nil && *s.PromptTokens < 0},
		{"--completion-tokens", s.CompletionTokens != nil && *s.CompletionTokens < 0},
		{"--cost-usd", s.CostUSD != nil && !(*s.CostUSD >= 0 && !math.IsInf(*s.CostUSD, 1))},
	} {
		if f.bad {
			return usageError{fmt.Errorf("%s is not a finite number of 0 or more", f.flag)}
		}
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	ctx, stop := signalContext()
	defer stop()
	return c.Stats(ctx, s)
}
