// Package doctor checks that this machine can run what a work dir's
// .stratus/ asks for: every provider's command resolves and
// is executable, the Claude and Codex shims find their CLI, every "$NAME"
// its env overlay reads is set here, the known CLIs print a version, the
// registered tools are executable, and the HMAC key is private.
//
// `stratus doctor` runs all of it; `stratus validate` reports the provider
// checks of the providers a flow uses as warnings; an embedded run's
// preflight refuses to start when a provider its flow uses has a command
// that does not resolve or an unset "$NAME" (LaunchProblems). It reads
// config and flows and never writes anything.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
)

// Statuses of a check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "FAIL"
)

// Check names.
const (
	CheckUse        = "use"        // which nodes use the provider (informational)
	CheckCommand    = "command"    // agents.providers.<p>.command resolves and is executable
	CheckCLI        = "cli"        // the CLI a Claude/Codex shim drives resolves
	CheckVersion    = "version"    // `<cli> --version` answers
	CheckExecutable = "executable" // a registered tool, or a check command's argv[0], is executable
	CheckMode       = "mode"       // the HMAC key's file mode
	CheckLoad       = "load"       // config.yaml or a flow loads
	checkEnvPrefix  = "env."       // env.<K>: the "$NAME" it reads is set
)

// DefaultVersionTimeout bounds one `<cli> --version`.
const DefaultVersionTimeout = 5 * time.Second

// KnownCLIs are the engine CLIs whose version doctor asks for, with how to
// install each.
var KnownCLIs = map[string]string{
	"claude":   "npm install -g @anthropic-ai/claude-code",
	"codex":    "npm install -g @openai/codex",
	"openseek": "build it from github.com/moonbitlang/openseek",
}

// Result is one check of one subject ("provider claude", "tool lint",
// "hmac key", "config", "flow merge").
type Result struct {
	Subject string `json:"subject"`
	Check   string `json:"check"`
	Status  string `json:"status"` // ok | warn | FAIL
	Detail  string `json:"detail"`
	// Field is the config field at fault ("agents.providers.x.command"),
	// "" when none.
	Field string `json:"-"`
}

// Env is where the checks look things up; a nil func means this process's
// (exec.LookPath, os.LookupEnv).
type Env struct {
	LookPath  func(file string) (string, error)
	LookupEnv func(key string) (string, bool)
}

func (e Env) lookPath(file string) (string, error) {
	if e.LookPath != nil {
		return e.LookPath(file)
	}
	path, err := exec.LookPath(file)
	if errors.Is(err, exec.ErrDot) {
		err = nil // found relative to the current directory: it resolves
	}
	return path, err
}

func (e Env) lookupEnv(key string) (string, bool) {
	if e.LookupEnv != nil {
		return e.LookupEnv(key)
	}
	return os.LookupEnv(key)
}

// Options say where the work dir's state lives.
type Options struct {
	WorkDir    string // the work dir holding .stratus/; a provider's dir is relative to it
	ConfigPath string // DIR/.stratus/config.yaml
	FlowsDir   string // DIR/.stratus/flows
	ToolsDir   string // DIR/.stratus/tools
	KeyPath    string // DIR/.stratus/hmac.key
	// VersionTimeout bounds each `<cli> --version`; 0 = DefaultVersionTimeout,
	// < 0 = do not run them.
	VersionTimeout time.Duration
	Env            Env
}

// Failed reports whether any result is a failure.
func Failed(rs []Result) bool {
	return slices.ContainsFunc(rs, func(r Result) bool { return r.Status == Fail })
}

// Run runs every check. A provider some node of an installed flow uses
// (or the supervisor) fails its checks; one no node uses only warns. A tool
// a node of an installed flow runs fails when it is missing or not
// executable; other tools, the HMAC key's mode, a flow that does not load
// and a --version that does not answer only warn. A config that does not
// load fails, and nothing that needs it is checked.
func Run(ctx context.Context, o Options) []Result {
	var out []Result
	cfg, err := config.Load(o.ConfigPath)
	if err != nil {
		out = append(out, Result{Subject: "config", Check: CheckLoad, Status: Fail, Detail: oneLine(err.Error())})
	} else {
		out = append(out, Result{Subject: "config", Check: CheckLoad, Status: OK, Detail: o.ConfigPath})
	}
	flows, probs := loadFlows(o.FlowsDir)
	out = append(out, probs...)
	if cfg != nil {
		out = append(out, providers(ctx, o, cfg, flows)...)
	}
	out = append(out, tools(o.ToolsDir, flows)...)
	if cfg != nil {
		out = append(out, CheckCommands(o.WorkDir, cfg, flows)...)
	}
	out = append(out, KeyMode(o.KeyPath))
	return out
}

// loadFlows loads every installed flow; one that does not parse is used
// for what did parse, with a warning.
func loadFlows(dir string) ([]*flow.Flow, []Result) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	sort.Strings(matches)
	var flows []*flow.Flow
	var out []Result
	for _, m := range matches {
		name := strings.TrimSuffix(filepath.Base(m), ".yaml")
		f, err := flow.Load(dir, name)
		var pe *flow.ParseError
		if errors.As(err, &pe) {
			f = pe.Flow
		}
		if err != nil {
			out = append(out, Result{Subject: "flow " + name, Check: CheckLoad, Status: Warn,
				Detail: fmt.Sprintf("does not load (see `stratus validate %s`): %s", name, oneLine(err.Error()))})
		}
		if f != nil {
			flows = append(flows, f)
		}
	}
	return flows, out
}

// providers checks every configured provider, in name order.
func providers(ctx context.Context, o Options, cfg *config.Config, flows []*flow.Flow) []Result {
	users := map[string][]string{} // provider → "flow F (N nodes)", "the supervisor"
	for _, f := range flows {
		uses := FlowProviders(cfg, f, nil)
		for _, name := range sortedKeys(uses) {
			var nodes int
			for _, u := range uses[name] {
				if u != Supervisor {
					nodes++
				}
			}
			if nodes > 0 {
				users[name] = append(users[name], fmt.Sprintf("flow %s (%s)", f.TaskType, english.Plural(nodes, "node")))
			}
		}
	}
	if cfg.Supervisor.On() && len(flows) > 0 {
		if name, _, err := cfg.Provider(cfg.Supervisor.Provider); err == nil {
			users[name] = append(users[name], Supervisor)
		}
	}
	names := cfg.ProviderNames()
	per := make([][]Result, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		p := cfg.Agents.Providers[name]
		used := users[name]
		rs := []Result{{Subject: subject(name), Check: CheckUse, Status: OK, Detail: "used by " + strings.Join(used, ", ")}}
		if len(used) == 0 {
			rs[0].Detail = "no node of an installed flow uses it: its problems are warnings"
		}
		checks := CheckProvider(o.Env, o.WorkDir, name, p)
		for _, r := range checks {
			if r.Status == Fail && len(used) == 0 {
				r.Status = Warn
			}
			rs = append(rs, r)
		}
		per[i] = rs
		if cli, ok := versionTarget(o.WorkDir, p, checks); ok && o.VersionTimeout >= 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				per[i] = append(per[i], Version(ctx, name, cli, providerDir(o.WorkDir, p), o.VersionTimeout))
			}()
		}
	}
	wg.Wait()
	var out []Result
	for _, rs := range per {
		out = append(out, rs...)
	}
	return out
}

// Supervisor is how FlowProviders names the supervisor layer's use.
const Supervisor = "the supervisor"

// FlowProviders returns the providers a run of fl uses, each with who uses
// it ("node plan", Supervisor): every agent and evaluator node the task
// enables runs on the task's nodes.<id>.provider, else the node's
// provider, else agents.primary (as worker.Resolve resolves it); the
// supervisor, when the layer is on, runs on supervisor.provider, else the
// primary. front is the task's front matter (nil: no task). A name with no
// launch spec is left out (Preflight and validate report it).
func FlowProviders(cfg *config.Config, fl *flow.Flow, front map[string]any) map[string][]string {
	uses := map[string][]string{}
	nodes, _ := front["nodes"].(map[string]any)
	for _, n := range fl.Nodes {
		if n.Kind != flow.KindAgent && n.Kind != flow.KindEvaluator {
			continue
		}
		o, _ := nodes[n.ID].(map[string]any)
		if e, ok := o["enabled"].(bool); ok && !e {
			continue
		}
		pinned := n.Provider
		if p, ok := o["provider"].(string); ok && p != "" {
			pinned = p
		}
		if pinned == "" {
			pinned = cfg.Agents.Primary
		}
		if _, ok := cfg.Agents.Providers[pinned]; ok {
			uses[pinned] = append(uses[pinned], "node "+n.ID)
		}
	}
	if cfg.Supervisor.On() {
		name := cfg.Supervisor.Provider
		if name == "" {
			name = cfg.Agents.Primary
		}
		if _, ok := cfg.Agents.Providers[name]; ok {
			uses[name] = append(uses[name], Supervisor)
		}
	}
	return uses
}

// CheckProvider checks one provider's launch spec on this machine, without
// running anything: its command (CheckCommand), the CLI of a Claude or
// Codex shim (CheckCLI), and each "$NAME" of its env overlay (env.<K>).
// A problem is Fail (an empty "$NAME" warns: the engine gets it empty);
// each detail names the provider's field and what is valid.
func CheckProvider(env Env, workDir, name string, p config.Provider) []Result {
	field := "agents.providers." + name
	var out []Result
	add := func(check, status, f, detail string) {
		out = append(out, Result{Subject: subject(name), Check: check, Status: status, Field: f, Detail: detail})
	}
	dir := providerDir(workDir, p)
	if p.Command == config.StratusCommand {
		add(CheckCommand, OK, "", config.StratusCommand+": the stratus binary itself")
	} else if path, err := resolve(env, dir, p.Command); err != nil {
		add(CheckCommand, Fail, field+".command", fmt.Sprintf("%s.command %q %s; valid: an executable on PATH, a path to one (absolute, or relative to %s), or %s (this binary)%s",
			field, p.Command, err, dir, config.StratusCommand, installHint(p.Command)))
	} else {
		add(CheckCommand, OK, "", path)
	}
	if cli, flag := shimCLI(p); cli != "" {
		shim := strings.Join(p.Args[:2], " ")
		if path, err := resolve(env, dir, cli); err != nil {
			how := "install it" + installHint(cli)
			if flag {
				how = "fix the --binary in " + field + ".args"
			} else if local := localCLI(workDir, cli); local != "" {
				// `npm install` without -g (as this repository's package.json
				// pins them) puts the CLIs here, off PATH.
				how = fmt.Sprintf("it is installed at %s (npm install without -g): add %s to PATH, or give --binary %s in %s.args", local, filepath.Dir(local), local, field)
			} else if KnownCLIs[cli] != "" {
				how = KnownCLIs[cli] + ", or give its path with --binary PATH in " + field + ".args"
			}
			add(CheckCLI, Fail, field+".args", fmt.Sprintf("`stratus %s` runs the %s CLI: %q %s; %s", shim, p.Args[1], cli, err, how))
		} else {
			add(CheckCLI, OK, "", path)
		}
	}
	for _, k := range sortedKeys(p.Env) {
		v := p.Env[k]
		if !strings.HasPrefix(v, "$") {
			continue // a literal value: nothing to look up
		}
		f := field + ".env." + k
		switch val, ok := env.lookupEnv(v[1:]); {
		case !envName().MatchString(v[1:]):
			add(checkEnvPrefix+k, Fail, f, fmt.Sprintf("%s: %q does not name an environment variable, so the engine never gets %s; valid: \"$NAME\" (letters, digits and _), or a literal value", f, v, k))
		case !ok:
			add(checkEnvPrefix+k, Fail, f, fmt.Sprintf("%s: %s is not set in this environment, so the engine would start without %s; valid: export %s before running stratus (the value is read at launch and never written in config), or drop the entry", f, v, k, v[1:]))
		case val == "":
			add(checkEnvPrefix+k, Warn, f, fmt.Sprintf("%s: %s is set but empty", f, v))
		default:
			add(checkEnvPrefix+k, OK, "", v+" is set")
		}
	}
	return out
}

// LaunchProblem is one provider problem that stops an embedded run.
type LaunchProblem struct {
	Provider string
	Users    []string // who uses it: "node plan", Supervisor
	Result
}

// LaunchProblems are the problems that stop an embedded run of fl before it
// starts: a provider the run uses (FlowProviders) whose command does not
// resolve, whose Claude/Codex shim has no CLI to run (CheckCLI), or whose
// env overlay reads an unset or malformed "$NAME". In provider name order.
func LaunchProblems(env Env, workDir string, cfg *config.Config, fl *flow.Flow, front map[string]any) []LaunchProblem {
	uses := FlowProviders(cfg, fl, front)
	var out []LaunchProblem
	for _, name := range sortedKeys(uses) {
		for _, r := range CheckProvider(env, workDir, name, cfg.Agents.Providers[name]) {
			if launchFailure(r) {
				out = append(out, LaunchProblem{Provider: name, Users: uses[name], Result: r})
			}
		}
	}
	return out
}

// CanLaunch reports whether provider p (named name) can start an engine
// here: none of the checks LaunchProblems refuses a run for fails. The
// retry policy falls back only to such a provider (internal/retry).
func CanLaunch(env Env, workDir, name string, p config.Provider) bool {
	for _, r := range CheckProvider(env, workDir, name, p) {
		if launchFailure(r) {
			return false
		}
	}
	return true
}

// launchFailure is a check that keeps a provider from starting: its
// command does not resolve, its CLI is missing, an env "$NAME" is unset.
func launchFailure(r Result) bool {
	return r.Status == Fail && (r.Check == CheckCommand || r.Check == CheckCLI || strings.HasPrefix(r.Check, checkEnvPrefix))
}

// Version runs `<path> --version` in dir, bounded by timeout (0:
// DefaultVersionTimeout), and records the first line it prints. Not
// answering is a warning, never a failure.
func Version(ctx context.Context, name, path, dir string, timeout time.Duration) Result {
	if timeout == 0 {
		timeout = DefaultVersionTimeout
	}
	r := Result{Subject: subject(name), Check: CheckVersion, Status: Warn}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		cmd.Dir = dir
	}
	cmd.WaitDelay = time.Second // a child that keeps the pipes open does not hold us
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	line := firstLine(stdout.String())
	if line == "" {
		line = firstLine(stderr.String())
	}
	switch {
	case ctx.Err() != nil:
		r.Detail = fmt.Sprintf("%s --version did not answer within %s", path, timeout)
	case err != nil:
		r.Detail = fmt.Sprintf("%s --version: %v", path, err)
		if line != "" {
			r.Detail += ": " + line
		}
	case line == "":
		r.Detail = path + " --version printed nothing"
	default:
		r.Status, r.Detail = OK, line
	}
	return r
}

// versionTarget is the known CLI a provider runs (its command, or its
// shim's CLI), resolved, when its check passed.
func versionTarget(workDir string, p config.Provider, checks []Result) (string, bool) {
	want := CheckCommand
	name := filepath.Base(p.Command)
	if cli, _ := shimCLI(p); cli != "" {
		want, name = CheckCLI, p.Args[1] // the shim's family, whatever its --binary is called
	}
	if KnownCLIs[name] == "" {
		return "", false
	}
	for _, r := range checks {
		if r.Check == want && r.Status == OK {
			return r.Detail, true
		}
	}
	return "", false
}

// shimCLI is the CLI a `{stratus} engine claude|codex` provider drives:
// its --binary, else the family's name on PATH. flag reports --binary.
func shimCLI(p config.Provider) (cli string, flag bool) {
	if p.Command != config.StratusCommand || len(p.Args) < 2 || p.Args[0] != "engine" || (p.Args[1] != "claude" && p.Args[1] != "codex") {
		return "", false
	}
	for i, a := range p.Args[2:] {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "--binary="); ok {
			return v, true
		}
		if a == "--binary" && i+3 < len(p.Args) {
			return p.Args[i+3], true
		}
	}
	return p.Args[1], false
}

// resolve finds command as the runner would start it in dir: a name
// without a path separator on PATH, a path as is (relative to dir).
func resolve(env Env, dir, command string) (string, error) {
	if !strings.ContainsRune(command, '/') && !strings.ContainsRune(command, filepath.Separator) {
		path, err := env.lookPath(command)
		if err != nil {
			return "", errors.New("is not found on PATH")
		}
		return path, nil
	}
	path := command
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("does not exist (%s)", path)
	case err != nil:
		return "", fmt.Errorf("cannot be inspected: %v", err)
	case st.IsDir():
		return "", fmt.Errorf("is a directory (%s)", path)
	case runtime.GOOS != "windows" && st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("is not executable (chmod +x %s)", path)
	}
	return path, nil
}

// tools checks the tool registry: every file in it, and every tool a node
// of an installed flow runs.
func tools(dir string, flows []*flow.Flow) []Result {
	users := map[string][]string{}
	for _, f := range flows {
		for _, n := range f.Nodes {
			if n.Kind == flow.KindTool && n.Tool != "" {
				users[n.Tool] = append(users[n.Tool], fmt.Sprintf("flow %s node %s", f.TaskType, n.ID))
			}
		}
	}
	names := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			names[e.Name()] = true
		}
	}
	for n := range users {
		names[n] = true
	}
	var out []Result
	for _, name := range sortedKeys(names) {
		r := Result{Subject: "tool " + name, Check: CheckExecutable, Status: OK}
		path, err := flow.ResolveTool(dir, name)
		switch {
		case err != nil && len(users[name]) > 0:
			r.Status, r.Detail = Fail, stratus.ErrorMessage(err)+"; used by "+strings.Join(users[name], ", ")
		case err != nil:
			r.Status, r.Detail = Warn, stratus.ErrorMessage(err)+"; no node of an installed flow runs it"
		case len(users[name]) > 0:
			r.Detail = path + "; used by " + strings.Join(users[name], ", ")
		default:
			r.Detail = path + "; no node of an installed flow runs it"
		}
		out = append(out, r)
	}
	return out
}

// CheckCommands checks that each command of config.yaml's checks:
// command_sets starts here: its argv[0] resolves as a checks node resolves
// it (nodeexec.Resolve, in the command's cwd under workDir, on this
// process's PATH). A command that does not fails when a node of flows is
// a checks node (the run would park there: docs/runner-image.md § When a
// check cannot run), and warns when no flow runs checks or
// its set has skip_if_unavailable (the set is skipped, never run). One
// result per command, subject "check SET/NAME", Field its config path.
func CheckCommands(workDir string, cfg *config.Config, flows []*flow.Flow) []Result {
	var users []string
	for _, f := range flows {
		for _, n := range f.Nodes {
			if n.Kind == flow.KindChecks {
				users = append(users, fmt.Sprintf("flow %s node %s", f.TaskType, n.ID))
			}
		}
	}
	var out []Result
	for _, set := range sortedKeys(cfg.Checks.CommandSets) {
		cs := cfg.Checks.CommandSets[set]
		for i, c := range cs.Commands {
			r := Result{Subject: "check " + set + "/" + c.Name, Check: CheckExecutable, Status: OK,
				Field: fmt.Sprintf("checks.command_sets.%s.commands[%d].argv", set, i)}
			if len(c.Argv) == 0 || c.Argv[0] == "" {
				r.Status, r.Detail = Fail, "the argv is empty; valid: a command and its arguments, e.g. [go, test, ./...]"
				out = append(out, r)
				continue
			}
			cwd := workDir
			if c.Cwd != "" && !filepath.IsAbs(c.Cwd) {
				cwd = filepath.Join(workDir, c.Cwd)
			}
			path, err := nodeexec.Resolve(c.Argv[0], cwd, nil)
			switch {
			case err == nil:
				r.Detail = path
			case cs.SkipIfUnavailable && errors.Is(err, nodeexec.ErrAbsent):
				r.Status, r.Detail = Warn, err.Error()+": the set is skipped here (skip_if_unavailable)"
			case len(users) == 0:
				r.Status, r.Detail = Warn, err.Error()+"; no node of an installed flow runs checks"
			default:
				r.Status, r.Detail = Fail, err.Error()+"; a run here parks at the checks ("+strings.Join(users, ", ")+
					"): install it, or put it on the PATH stratus runs with"
			}
			out = append(out, r)
		}
	}
	return out
}

// KeyMode checks that the HMAC key (which signs worker tokens) is readable
// by its owner only.
func KeyMode(path string) Result {
	r := Result{Subject: "hmac key", Check: CheckMode, Status: OK}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.Detail = path + " does not exist yet; the first run creates it with mode 0600"
	case err != nil:
		r.Status, r.Detail = Warn, fmt.Sprintf("%s cannot be inspected: %v", path, err)
	case !st.Mode().IsRegular():
		r.Status, r.Detail = Warn, fmt.Sprintf("%s is not a regular file (%s); remove it and the next run creates a key", path, st.Mode().Type())
	case runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0:
		r.Status, r.Detail = Warn, fmt.Sprintf("%s has mode %04o: others may read the key that signs worker tokens; fix: chmod 600 %s", path, st.Mode().Perm(), path)
	default:
		r.Detail = fmt.Sprintf("%s has mode %04o", path, st.Mode().Perm())
	}
	return r
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

func subject(provider string) string { return "provider " + provider }

// providerDir is where the provider's engine starts: its dir under the
// work dir.
func providerDir(workDir string, p config.Provider) string {
	return filepath.Join(workDir, filepath.FromSlash(p.Dir))
}

// localCLI is cli under node_modules/.bin of workDir or of the nearest
// directory above it that has one ("" = none): where `npm install`
// without -g puts it.
func localCLI(workDir, cli string) string {
	dir, err := filepath.Abs(workDir)
	if err != nil {
		return ""
	}
	for {
		if p := filepath.Join(dir, "node_modules", ".bin", cli); isExecutable(p) {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func installHint(command string) string {
	if how := KnownCLIs[filepath.Base(command)]; how != "" {
		return " (to install " + filepath.Base(command) + ": " + how + ")"
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	line = strings.TrimSpace(line)
	if len(line) > 200 {
		line = line[:200] + "…"
	}
	return line
}

// oneLine joins a multi-line error message with "; ".
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
