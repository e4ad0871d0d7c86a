package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
)

// ShimOptions configures the Claude and Codex shims: conforming engines of
// the workflow child contract v1 (docs/contracts.md § Conformance checklist)
// that wrap a foreign agent CLI.
type ShimOptions struct {
	// Binary is the CLI to run: a bare name looked up on PATH, or a path.
	// Empty means "claude" (Claude) or "codex" (Codex).
	Binary string
	// ExtraArgs are appended to the CLI's argv before the shim's own
	// positional arguments: deployment settings such as --model, a
	// permission mode, --add-dir or --skip-git-repo-check. Never put a
	// prompt or a key here: argv is visible in ps
	// (docs/contracts.md § Timing, environment and argv).
	ExtraArgs []string
	// Stderr receives the CLI's stderr and the shim's one-line log; nil
	// means os.Stderr (the runner's stderr: it never reads it,
	// docs/contracts.md § Process lifecycle).
	Stderr io.Writer
	// Getenv reads the attempt's launch settings (ReadSettings); nil means
	// os.Getenv.
	Getenv func(string) string
}

// Settings are an attempt's resolved per-node overrides as the runner hands
// them to every engine, in its environment
// (docs/contracts.md § Per-node overrides): launch.EnvModel, EnvReasoning,
// EnvPermissionProfile and EnvNetworkAccess. An empty field (nil
// NetworkAccess) was not given and leaves the CLI's own default. The shims
// map them onto the CLI's flags, before the deployment ExtraArgs (so an
// explicit flag there comes later):
//
//   - model: claude --model M; codex -m M
//   - reasoning: claude --effort R; codex -c model_reasoning_effort="R"
//     (max clamps to xhigh)
//   - read-only: claude --permission-mode plan; codex --sandbox read-only
//   - workspace-write: claude --permission-mode acceptEdits --allowedTools
//     Bash (print mode refuses an unlisted shell command); codex --sandbox
//     workspace-write
//   - network true/false: claude --allowedTools (with Bash when it writes)
//     or --disallowedTools "WebFetch WebSearch"; codex -c
//     sandbox_workspace_write.network_access=true/false under
//     workspace-write
//
// Both as root and not: claude 2.1.328 refuses bypassPermissions as root,
// and codex 0.169.0 no longer accepts --full-auto, so neither is used.
//
// Codex's read-only sandbox has no network switch; the flow validator
// already refuses a Codex workspace-write node with network.
type Settings struct {
	Model             string
	Reasoning         string
	PermissionProfile string // "" | read-only | workspace-write
	NetworkAccess     *bool
}

// ReadSettings reads Settings from getenv (nil: os.Getenv). A permission
// profile or network flag outside its set, or a model or reasoning that is
// not one plain token, is an error naming the variable and what is valid.
func ReadSettings(getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	st := Settings{
		Model:             strings.TrimSpace(getenv(launch.EnvModel)),
		Reasoning:         strings.TrimSpace(getenv(launch.EnvReasoning)),
		PermissionProfile: strings.TrimSpace(getenv(launch.EnvPermissionProfile)),
	}
	for _, f := range []struct{ name, v string }{{launch.EnvModel, st.Model}, {launch.EnvReasoning, st.Reasoning}} {
		if f.v != "" && !settingToken().MatchString(f.v) {
			return Settings{}, fmt.Errorf("%s is %q; want one token of letters, digits and . _ : / @ [ ] -, not starting with '-'", f.name, clip(f.v, 80))
		}
	}
	switch st.PermissionProfile {
	case "", "read-only", "workspace-write":
	default:
		return Settings{}, fmt.Errorf("%s is %q; valid: read-only, workspace-write", launch.EnvPermissionProfile, clip(st.PermissionProfile, 80))
	}
	switch v := strings.TrimSpace(getenv(launch.EnvNetworkAccess)); v {
	case "":
	case "true", "false":
		b := v == "true"
		st.NetworkAccess = &b
	default:
		return Settings{}, fmt.Errorf("%s is %q; valid: true, false", launch.EnvNetworkAccess, clip(v, 80))
	}
	return st, nil
}

// settingToken is what a model id or reasoning level may be: it lands in
// argv (and in a Codex -c TOML value), so it is one plain token.
var settingToken = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.:/@\[\]][A-Za-z0-9_.:/@\[\]-]*$`) })

// claudeArgs maps s onto Claude Code's flags (see Settings).
func (s Settings) claudeArgs() []string {
	var a []string
	if s.Model != "" {
		a = append(a, "--model", s.Model)
	}
	if s.Reasoning != "" {
		a = append(a, "--effort", s.Reasoning)
	}
	var allowed []string
	switch s.PermissionProfile {
	case "read-only":
		a = append(a, "--permission-mode", "plan")
	case "workspace-write":
		// acceptEdits approves file edits only: in print mode a shell
		// command the model runs is otherwise refused, and the change is
		// never made (claude 2.1.328). As root, bypassPermissions is
		// refused, so Bash is granted by name.
		a = append(a, "--permission-mode", "acceptEdits")
		allowed = append(allowed, "Bash")
	}
	if s.NetworkAccess != nil {
		if *s.NetworkAccess {
			allowed = append(allowed, "WebFetch", "WebSearch")
		} else {
			a = append(a, "--disallowedTools", "WebFetch WebSearch")
		}
	}
	if len(allowed) > 0 {
		a = append(a, "--allowedTools", strings.Join(allowed, " "))
	}
	return a
}

// codexArgs maps s onto codex exec's flags (see Settings).
func (s Settings) codexArgs() []string {
	var a []string
	if s.Model != "" {
		a = append(a, "-m", s.Model)
	}
	if s.Reasoning != "" {
		r := s.Reasoning
		if r == "max" {
			r = "xhigh" // docs/contracts.md § Per-node overrides: Codex clamps max → xhigh
		}
		a = append(a, "-c", `model_reasoning_effort="`+r+`"`)
	}
	if s.PermissionProfile != "" {
		a = append(a, "--sandbox", s.PermissionProfile)
	}
	if s.PermissionProfile == "workspace-write" && s.NetworkAccess != nil {
		a = append(a, "-c", "sandbox_workspace_write.network_access="+strconv.FormatBool(*s.NetworkAccess))
	}
	return a
}

// stopGrace is how long a stopped CLI gets between SIGTERM and SIGKILL; it
// keeps a graceful cancel well inside the runner's 5 000 ms cancel grace
// (docs/contracts.md § Process lifecycle).
const stopGrace = 1500 * time.Millisecond

// tokenUsage is what a CLI reported, already mapped onto the contract's
// terms (docs/contracts.md § The event stream): prompt tokens include cached
// ones.
type tokenUsage struct {
	prompt, completion, cacheHit int64
	cost                         *float64 // nil: the CLI reported no cost (unknown, never free)
}

func (u tokenUsage) add(v tokenUsage) tokenUsage {
	return tokenUsage{prompt: u.prompt + v.prompt, completion: u.completion + v.completion, cacheHit: u.cacheHit + v.cacheHit}
}

// session is one CLI run as the shim sees it. A translator feeds it the
// CLI's events; the driver turns the end state into the terminal line. Only
// the driver's goroutine touches it.
type session struct {
	em       Emitter
	maxSteps int // 0: no ceiling
	steps    int

	exhausted   bool // the shim's own ceiling was passed
	cliMaxTurns bool // the CLI stopped at the turn limit the shim passed it
	failure     string
	finished    bool
	finalText   string
	schema      bool            // the call carried a schema (docs/contracts.md § The request line)
	structured  json.RawMessage // the CLI's own schema-shaped result, when it has one

	usageSent bool
	fallback  *tokenUsage // usage seen mid-run, emitted when the CLI never reports its total

	// say writes one line to the engine's stderr: what the CLI said on
	// its stdout that is no event of the contract but is evidence of why
	// it stopped (the runner keeps the tail: internal/failclass).
	say func(string)
}

// step records one agent step: an agent_step event while under the
// ceiling, or exhaustion past it (docs/contracts.md § The reference engine:
// the shims enforce max_steps themselves).
func (s *session) step() {
	if s.exhausted {
		return
	}
	if s.maxSteps > 0 && s.steps >= s.maxSteps {
		s.exhausted = true
		return
	}
	s.steps++
	s.em.Step(s.steps)
}

// usage emits the CLI's authoritative usage once.
func (s *session) usage(u tokenUsage) {
	s.usageSent = true
	s.em.usage(u)
}

// flush emits the mid-run usage when the authoritative one never came (a
// stopped or failed CLI still spent tokens:
// docs/contracts.md § Terminal classification charges every terminal).
func (s *session) flush() {
	if !s.usageSent && s.fallback != nil {
		s.usage(*s.fallback)
	}
}

// translator turns one CLI's stdout lines into session updates.
type translator interface {
	line(b []byte, s *session)
}

// cliRun is what a shim hands the shared driver.
type cliRun struct {
	name    string // "claude" or "codex", for messages
	binary  string
	args    []string
	prompt  string
	tr      translator
	cleanup func()
}

// usage emits a usage event carrying all five fields, integral, and
// cost_usd only when the CLI reported a real, finite, non-negative cost
// (docs/contracts.md § The event stream).
func (e Emitter) usage(u tokenUsage) {
	nonneg := func(v int64) int64 { return max(v, 0) }
	prompt, completion := nonneg(u.prompt), nonneg(u.completion)
	hit := min(nonneg(u.cacheHit), prompt)
	m := map[string]any{
		"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
		"prompt_cache_hit_tokens": hit, "prompt_cache_miss_tokens": prompt - hit,
	}
	if u.cost != nil && !math.IsNaN(*u.cost) && !math.IsInf(*u.cost, 0) && *u.cost >= 0 {
		m["cost_usd"] = *u.cost
	}
	e.line(map[string]any{"event": "usage", "usage": m})
}

// setupFailed emits agent_setup_failed.
func (e Emitter) setupFailed(msg string) {
	e.line(map[string]any{"event": "agent_setup_failed", "error": msg})
}

// maxStepsExhausted emits max_steps_exhausted; steps is informational.
func (e Emitter) maxStepsExhausted(steps int) {
	e.line(map[string]any{"event": "max_steps_exhausted", "steps": steps})
}

// shimInput is the part of the call's input the shims read. Stratus's
// runner sends {query, system, task_id, attempt, node, step_ref, visit,
// ctx_dir}; Workflow::agent sends {query, hints?}
// (docs/contracts.md § The request line).
type shimInput struct {
	Query, System, Hints, CtxDir string
}

// parseShimInput reads query (required, non-blank), system, hints and
// ctx_dir. A bare JSON string is taken as the query.
func parseShimInput(raw json.RawMessage) (shimInput, error) {
	if t := strings.TrimSpace(string(raw)); t == "" || t == "null" {
		return shimInput{}, errors.New(`input: got null; want an object with a non-blank "query" string (or the query itself as a string)`)
	}
	var q string
	if json.Unmarshal(raw, &q) == nil {
		if strings.TrimSpace(q) == "" {
			return shimInput{}, errors.New("input: got a blank string; want a non-blank query")
		}
		return shimInput{Query: q}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return shimInput{}, fmt.Errorf("input: got %s; want an object with a non-blank \"query\" string", clip(string(raw), 80))
	}
	var in shimInput
	for _, f := range []struct {
		key      string
		dst      *string
		required bool
	}{{"query", &in.Query, true}, {"system", &in.System, false}, {"hints", &in.Hints, false}, {"ctx_dir", &in.CtxDir, false}} {
		v, ok := obj[f.key]
		if !ok || string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return shimInput{}, fmt.Errorf("input.%s: got %s; want a string", f.key, clip(string(v), 80))
		}
	}
	if strings.TrimSpace(in.Query) == "" {
		got := "nothing"
		if v, ok := obj["query"]; ok {
			got = clip(string(v), 80)
		}
		return shimInput{}, fmt.Errorf("input.query: got %s; want a non-blank string", got)
	}
	return in, nil
}

// prompt is the text the CLI reads on stdin. The system text rides in the
// prompt rather than a --system-prompt flag because argv is visible in ps.
func (in shimInput) prompt() string {
	parts := []string{}
	if s := strings.TrimSpace(in.System); s != "" {
		parts = append(parts, s)
	}
	parts = append(parts, strings.TrimSpace(in.Query))
	if h := strings.TrimSpace(in.Hints); h != "" {
		parts = append(parts, "Hints:\n"+h)
	}
	if in.CtxDir != "" {
		parts = append(parts, "Files produced by earlier steps are in: "+in.CtxDir)
	}
	return strings.Join(parts, "\n\n") + "\n"
}

// runShim is the driver both shims share: read the envelope, run the CLI
// with the prompt on stdin, translate its JSON lines, enforce max_steps,
// honour stdin EOF, and end with exactly one terminal line. It returns nil
// for every handled failure (docs/contracts.md § The reference engine).
func runShim(ctx context.Context, name string, opts ShimOptions, stdin io.Reader, stdout io.Writer,
	build func(env Envelope, in shimInput, set Settings) (cliRun, error)) error {
	em := Emitter{W: stdout}
	env, err := ReadRequest(stdin)
	if err != nil {
		msg := err.Error()
		switch {
		case errors.Is(err, ErrVersion):
			msg += "; valid: 1"
		case errors.Is(err, ErrNotJSON):
			msg += `; want one line of JSON: {"workflow_contract": 1, "id": …, "kind": …, "input": {"query": …}}`
		}
		em.CommandError(msg)
		return nil
	}
	if env.MaxSteps != nil && *env.MaxSteps < 1 {
		em.CommandError(fmt.Sprintf("max_steps: got %d; want a positive integer, or no max_steps for no ceiling", *env.MaxSteps))
		return nil
	}
	if hasSchema(env) && !isObject(env.Schema) {
		em.CommandError(fmt.Sprintf("schema: got %s; want a JSON Schema object, or no schema", clip(string(env.Schema), 80)))
		return nil
	}
	in, err := parseShimInput(env.Input)
	if err != nil {
		msg := err.Error()
		if len(env.WorkflowContract) == 0 && strings.HasPrefix(msg, "input") && isObject(env.Input) {
			// ReadRequest took a line without workflow_contract as the
			// bare input (docs/contracts.md § The reference engine).
			msg += ` (a request line without "workflow_contract" is taken as the input itself; send {"workflow_contract": 1, "id": …, "kind": …, "input": {"query": …}} for an envelope)`
		}
		em.CommandError(msg)
		return nil
	}
	set, err := ReadSettings(opts.Getenv)
	if err != nil {
		em.setupFailed(err.Error())
		return nil
	}
	binary := opts.Binary
	if binary == "" {
		binary = name
	}
	path, err := exec.LookPath(binary)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
		em.setupFailed(fmt.Sprintf("%s CLI not found: %v (install it, put it on PATH, or give its path)", name, err))
		return nil
	} else if err != nil {
		em.setupFailed(fmt.Sprintf("%s CLI %q cannot be run: %v (give the path of an executable file)", name, binary, err))
		return nil
	}
	run, err := build(env, in, set)
	if err != nil {
		em.setupFailed(err.Error())
		return nil
	}
	if run.cleanup != nil {
		defer run.cleanup()
	}
	run.binary = path
	stderr := opts.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	s := &session{em: em, schema: hasSchema(env), say: func(l string) { fmt.Fprintln(stderr, oneLine(l)) }}
	if env.MaxSteps != nil {
		s.maxSteps = *env.MaxSteps
	}
	// The kind has no per-kind behaviour in a shim; it is logged so a
	// transcript names the call (docs/contracts.md § The reference engine:
	// read from the envelope).
	fmt.Fprintf(stderr, "stratus engine %s: id=%s kind=%s max_steps=%d model=%s reasoning=%s permission_profile=%s\n",
		name, env.ID, env.Kind, s.maxSteps, orDefault(set.Model), orDefault(set.Reasoning), orDefault(set.PermissionProfile))
	return drive(ctx, run, stdin, stderr, s)
}

// drive runs the CLI and classifies its end.
func drive(ctx context.Context, run cliRun, stdin io.Reader, stderr io.Writer, s *session) error {
	cmd := exec.Command(run.binary, run.args...)
	cmd.Stdin = strings.NewReader(run.prompt)
	tail := &tailWriter{w: stderr, max: 2048}
	cmd.Stderr = tail
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	// In the engine's process group: the runner's group kill reaches the CLI
	// and its tools even when the shim itself is killed first.
	cmd.SysProcAttr = cliProcAttr()
	// Bounds the wait for a tool grandchild that keeps the stdout pipe open.
	cmd.WaitDelay = 2 * stopGrace
	if err := cmd.Start(); err != nil {
		s.em.setupFailed(fmt.Sprintf("start %s: %v", run.name, err))
		return nil
	}

	var (
		mu       sync.Mutex
		exited   bool
		killer   *time.Timer
		stopOnce sync.Once
	)
	// The shim stops the CLI itself (its tools are reaped by the runner's
	// kill of the engine group when the shim has exited).
	pid := cmd.Process.Pid
	stop := func() {
		stopOnce.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if exited {
				return
			}
			_ = syscall.Kill(pid, syscall.SIGTERM)
			killer = time.AfterFunc(stopGrace, func() {
				mu.Lock()
				defer mu.Unlock()
				if !exited {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
		})
	}

	waitc := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		mu.Lock()
		exited = true
		if killer != nil {
			killer.Stop()
		}
		mu.Unlock()
		pw.Close()
		waitc <- err
	}()

	// Stdin EOF (the runner's graceful cancel) or the caller's cancellation
	// stops the CLI; the run then ends without a report
	// (docs/contracts.md § The reference engine).
	var cancelled atomic.Bool
	done := make(chan struct{})
	defer close(done)
	eof := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(eof)
	}()
	go func() {
		select {
		case <-eof:
		case <-ctx.Done():
		case <-done:
			return
		}
		cancelled.Store(true)
		fmt.Fprintf(stderr, "stratus engine %s: stdin closed: the call is cancelled (docs/child-contract.md § Ending: when to exit, and what the runner concludes); stopping the CLI. Keep stdin open while the engine works.\n", run.name)
		stop()
	}()

	r := bufio.NewReader(pr)
	for {
		line, err := r.ReadBytes('\n')
		if b := bytes.TrimSpace(line); len(b) > 0 && !s.exhausted && !cancelled.Load() {
			run.tr.line(b, s)
			if s.exhausted {
				stop()
			}
		}
		if err != nil {
			break
		}
	}
	waitErr := <-waitc

	switch {
	case cancelled.Load() && !s.exhausted:
		s.flush()
	case s.exhausted || s.cliMaxTurns:
		s.flush()
		s.em.maxStepsExhausted(s.steps)
	case s.failure != "":
		s.flush()
		s.em.TurnFailed(s.failure)
	case s.finished:
		s.flush()
		s.em.Report(s.report())
	case waitErr != nil && !errors.Is(waitErr, exec.ErrWaitDelay):
		s.flush()
		s.em.TurnFailed(withStderr(fmt.Sprintf("%s exited without a result: %v", run.name, waitErr), tail))
	default:
		s.flush()
		s.em.TurnFailed(withStderr(fmt.Sprintf("%s exited without a result", run.name), tail))
	}
	return nil
}

// report is the report value: the final message text, or — when the call
// carried a schema — the CLI's structured result, else the text parsed as
// JSON when it is JSON.
func (s *session) report() json.RawMessage {
	if s.schema {
		var buf bytes.Buffer
		if len(s.structured) > 0 && string(s.structured) != "null" && json.Compact(&buf, s.structured) == nil {
			return buf.Bytes()
		}
		buf.Reset()
		if json.Compact(&buf, []byte(strings.TrimSpace(s.finalText))) == nil {
			return buf.Bytes()
		}
	}
	b, _ := json.Marshal(s.finalText)
	return b
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

func hasSchema(env Envelope) bool {
	return len(env.Schema) > 0 && strings.TrimSpace(string(env.Schema)) != "null"
}

func withStderr(msg string, tail *tailWriter) string {
	if t := strings.TrimSpace(tail.String()); t != "" {
		return msg + ": " + t
	}
	return msg
}

// tailWriter forwards a CLI's stderr and keeps the last max bytes for
// error messages.
type tailWriter struct {
	w   io.Writer
	max int
	mu  sync.Mutex
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.w.Write(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// oneLine is s on one line, at most 1000 bytes.
func oneLine(s string) string {
	return clip(strings.Join(strings.Fields(s), " "), 1000)
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}
