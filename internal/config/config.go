// Package config reads and writes DIR/.stratus/config.yaml: the environment
// a flow's nodes fall back to (docs/contracts.md § Flows and task types: "the
// flow owns the graph; the config owns the environment"). It owns the
// provider launch specs (which engine runs a node: command, args, env
// overlay, cwd, deadline), the worker token TTL and the projection placement.
// It does not own flows (internal/flow) and never holds a secret's value: env
// entries name the variable to read.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// MinTokenTTLSeconds is the shortest worker.token_ttl_seconds: six times
// the runner's silent-engine heartbeat (20 s), which renews a handle's
// lease.
const MinTokenTTLSeconds = 120

// DefaultMaxBodyBytes is the default bound on a worker body or part (32 MiB).
const DefaultMaxBodyBytes = 32 << 20

// SchemaVersion is the config.yaml schema this build writes and reads.
const SchemaVersion = 1

// StratusCommand is the placeholder a provider's command may use for the
// running stratus binary itself (the bundled engines are its subcommands).
const StratusCommand = "{stratus}"

// Config is the parsed config.yaml.
type Config struct {
	SchemaVersion int        `yaml:"schema_version"`
	Agents        Agents     `yaml:"agents"`
	Worker        Worker     `yaml:"worker"`
	Projection    Projection `yaml:"projection"`
	Checks        Checks     `yaml:"checks,omitempty"`
	Tools         Tools      `yaml:"tools,omitempty"`
	Security      Security   `yaml:"security,omitempty"`
	Supervisor    Supervisor `yaml:"supervisor,omitempty"`
	HITL          HITL       `yaml:"hitl,omitempty"`
	// Git is how a publish step publishes: the orchestrator's commit, the
	// push of the task branch, the pull request and its merge (worc's
	// `git` block, read as it is).
	Git Git `yaml:"git,omitempty"`
	// Limits caps what one run may spend (README.md § Cost and token caps); a
	// task's front matter max_cost_usd / max_tokens win.
	Limits Limits `yaml:"limits,omitempty"`
	// Workspace is where embedded engines work: WorkspaceWorkDir or
	// WorkspaceWorktree; a task's front matter workspace wins. "": worktree
	// when the work dir is a git work tree with a commit, else workdir
	// (lifecycle.ResolveWorkspace; README § Workspaces). On AWS the
	// repository always travels.
	Workspace string `yaml:"workspace,omitempty"`
	// PromptAudit records who received what prompt per step
	// (docs/contracts.md § Prompt audit); a task's front matter prompt_audit
	// overrides it.
	PromptAudit bool `yaml:"prompt_audit,omitempty"`
	// RetentionDays is how long an ended embedded run keeps its files
	// (run bundle, workspace bundles, archived ctx dir and logs) and its
	// step records, days after its end (docs/security.md § Retention):
	// unset (nil) = DefaultRetentionDays, 0 = for ever, 1 to
	// MaxRetentionDays otherwise. Read through Retention.
	RetentionDays *int `yaml:"retention_days,omitempty"`
	// Orchestrator and Paths are worc's task pool settings: what `stratus
	// watch` serves and where the pool lives (README.md § Task pool).
	Orchestrator Orchestrator `yaml:"orchestrator,omitempty"`
	Paths        Paths        `yaml:"paths,omitempty"`
}

// DefaultRetentionDays is retention_days when config.yaml does not set it.
const DefaultRetentionDays = 30

// MaxRetentionDays is the largest retention_days (a hundred years; 0
// keeps runs for ever).
const MaxRetentionDays = 36500

// Retention returns how many days after its end a run is kept
// (retention_days, or DefaultRetentionDays when unset); 0 means for ever.
func (c *Config) Retention() int {
	if c.RetentionDays == nil {
		return DefaultRetentionDays
	}
	return *c.RetentionDays
}

// Agents selects and describes the engines.
type Agents struct {
	Primary   string              `yaml:"primary"`   // provider a node runs on unless it pins one
	Allowed   []string            `yaml:"allowed"`   // providers a node may pin
	Providers map[string]Provider `yaml:"providers"` // launch spec per provider
	// MaxFixCycles caps every loop budget of every flow (the engine clamps
	// to min(flow, cap)); 0 = no cap.
	MaxFixCycles int `yaml:"max_fix_cycles,omitempty"`
	// MaxStageAttempts is how many providers one step may run on before
	// it parks: the node's own, then its fallbacks (worc configuration.md
	// § agents: "provider hops ... primary + cross-provider fallback");
	// nil = DefaultMaxStageAttempts. Counted apart from Retry's
	// same-provider retries. A value above the providers a step can use
	// (agents.allowed, the bundled echo and script engines left out, see
	// Provider.StandIn) is valid: the step then runs on each of them once
	// per park cycle and parks, the extra hops unused.
	MaxStageAttempts *int          `yaml:"max_stage_attempts,omitempty"`
	Decomposition    Decomposition `yaml:"decomposition,omitempty"`
	// Retry is agents.retry (worc configuration.md § agents.retry).
	Retry Retry `yaml:"retry,omitempty"`
}

// Provider is one engine's launch spec
// (docs/contracts.md § Timing, environment and argv: argv and environment are
// deployment configuration, not part of the contract).
type Provider struct {
	Command string   `yaml:"command"`        // executable; "{stratus}" = this binary
	Args    []string `yaml:"args,omitempty"` // placeholders {kind} {max_steps} {model} {reasoning} {permission_profile} {network_access}
	// Env is the overlay on the runner's environment. A value "$NAME" is read
	// from the runner's own environment at launch, so a secret is named here
	// and never written down (nor ever placed in argv).
	Env            map[string]string `yaml:"env,omitempty"`
	Dir            string            `yaml:"dir,omitempty"`             // cwd, relative to the work dir; "" = the work dir
	Kind           string            `yaml:"kind,omitempty"`            // envelope kind; default "agent"
	MaxSteps       int               `yaml:"max_steps,omitempty"`       // 0 = unset
	TimeoutSeconds int               `yaml:"timeout_seconds,omitempty"` // wall deadline; 0 = 600 s
	Model          string            `yaml:"model,omitempty"`           // default model; a node's model overrides it
	Reasoning      string            `yaml:"reasoning,omitempty"`       // default reasoning; a node's reasoning overrides it
	// ReasoningLevels is the reasoning set this provider accepts; empty =
	// its family's set (ReasoningLevels), or any value for other engines.
	ReasoningLevels []string `yaml:"reasoning_levels,omitempty"`
}

// Worker holds the worker API settings.
type Worker struct {
	TokenTTLSeconds int `yaml:"token_ttl_seconds"` // capability token and handle TTL, s (default 600)
	// MaxBodyBytes bounds a submitted body or staged part, bytes (default
	// 32 MiB); a larger one is refused with 413 before anything is stored.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Isolation is how an embedded run's workers run
	// (docs/contracts.md § The in-process twin): IsolationInProcess (the
	// default) drives each engine from inside the stratus process, through
	// the same worker API handlers without a socket; IsolationProcess starts
	// a runner process per step, as an ECS task is one. Runs on AWS always
	// have a process (a task) per step.
	Isolation string `yaml:"isolation"`
	// MaxConcurrentEngines bounds the engines (and checks and tool
	// commands) an embedded process runs at once, across every run it
	// hosts; a step over it waits its turn, first come first served. 0 means
	// DefaultMaxConcurrentEngines().
	MaxConcurrentEngines int `yaml:"max_concurrent_engines,omitempty"`
}

// DefaultMaxConcurrentEngines is worker.max_concurrent_engines when unset:
// twice the cores, at least 4 (an engine mostly waits on its model).
func DefaultMaxConcurrentEngines() int { return max(4, 2*runtime.NumCPU()) }

// The values of worker.isolation (Worker.Isolation).
const (
	IsolationInProcess = "in-process"
	IsolationProcess   = "process"
)

// Projection holds the ctx-dir placement
// (docs/contracts.md § Files are the server's job).
type Projection struct {
	Placement string `yaml:"placement"` // default "workspace/tasks/{task_id}/ctx"
}

// Default returns the configuration `stratus install` writes: the bundled
// echo engine as primary (it needs no key), plus launch specs for the script
// engine, openseek (docs/contracts.md § The reference engine: `openseek
// subrun <kind> --max-steps N`) and the Claude and Codex shims (`stratus
// engine claude|codex`).
func Default() *Config {
	return &Config{
		SchemaVersion: SchemaVersion,
		Agents: Agents{
			Primary:          "echo",
			Allowed:          []string{"echo", "script", "openseek", "claude", "codex"},
			MaxStageAttempts: new(DefaultMaxStageAttempts),
			Retry:            DefaultRetry(),
			Providers: map[string]Provider{
				"echo":   {Command: StratusCommand, Args: []string{"engine", "echo"}},
				"script": {Command: StratusCommand, Args: []string{"engine", "script", "--scenario", ".stratus/scenario.yaml"}},
				"openseek": {
					Command: "openseek", Args: []string{"subrun", "{kind}", "--max-steps", "{max_steps}"},
					Env: map[string]string{"DEEPSEEK": "$DEEPSEEK"}, Kind: "worker", MaxSteps: 300, TimeoutSeconds: 2700,
				},
				"claude": {Command: StratusCommand, Args: []string{"engine", "claude"}, Env: map[string]string{"ANTHROPIC_API_KEY": "$ANTHROPIC_API_KEY"}, MaxSteps: 100},
				"codex":  {Command: StratusCommand, Args: []string{"engine", "codex"}, Env: map[string]string{"OPENAI_API_KEY": "$OPENAI_API_KEY"}, MaxSteps: 100},
			},
		},
		Worker:     Worker{TokenTTLSeconds: 600, MaxBodyBytes: DefaultMaxBodyBytes, Isolation: IsolationInProcess},
		Projection: Projection{Placement: "workspace/tasks/{task_id}/ctx"},
		Checks:     Checks{TimeoutSeconds: DefaultChecksTimeoutSeconds},
		Tools:      Tools{DefaultTimeoutSeconds: DefaultToolTimeoutSeconds},
		Security:   Security{AllowedEnvironment: slices.Clone(DefaultAllowedEnvironment)},
		Supervisor: Supervisor{RoleFile: "roles/supervisor.md", Observe: Observe{Mode: "events", Triggers: slices.Clone(ObserveTriggers)}},
		HITL:       HITL{TimeoutSeconds: DefaultHITLTimeoutSeconds},
		// Written out, so that config.yaml shows the setting.
		RetentionDays: new(DefaultRetentionDays),
	}
}

// Parse reads config.yaml strictly and reports every problem it finds in
// one error: an unknown key, a key given twice, a value of the wrong type
// (worc: "all fatal, all collected"), and the semantic rules of each block,
// each line "file:line:col: field: message" (the position of the key at
// fault, or of its nearest written parent), sorted by position. A leading
// UTF-8 byte order mark is skipped; bytes that are not UTF-8 are refused,
// naming the byte offset. Errors are *stratus.Error EINVALID; each message
// names the field, the value and what is valid.
func Parse(file string, data []byte) (*Config, error) {
	data = yamlast.StripBOM(data)
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "%s is empty; run `stratus install --force` to write a default one", file)
	}
	if off, line, _ := yamlast.InvalidUTF8(data); off >= 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "%s:%d: the config file is not valid UTF-8: byte 0x%02x at byte offset %d; save it as UTF-8",
			file, line, data[off], off)
	}
	ps := &problems{file: file, pos: map[string]yamlast.Pos{}}
	var c Config
	if !decode(ps, data, &c) {
		return nil, ps.err()
	}
	if c.SchemaVersion != SchemaVersion {
		ps.add("schema_version", "schema_version %d is not supported; valid: %d", c.SchemaVersion, SchemaVersion)
	}
	if c.Worker.TokenTTLSeconds == 0 {
		c.Worker.TokenTTLSeconds = 600
	}
	if c.Worker.MaxBodyBytes == 0 {
		c.Worker.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Worker.Isolation == "" {
		c.Worker.Isolation = IsolationInProcess
	} else if c.Worker.Isolation != IsolationInProcess && c.Worker.Isolation != IsolationProcess {
		ps.add("worker.isolation", "%q; valid: %s (the default: each engine driven from inside stratus) or %s (a runner process per step)", c.Worker.Isolation, IsolationInProcess, IsolationProcess)
	}
	if c.Worker.MaxConcurrentEngines < 0 {
		ps.add("worker.max_concurrent_engines", "%d is negative; valid: a positive number, or 0 for the default (%d here)", c.Worker.MaxConcurrentEngines, DefaultMaxConcurrentEngines())
	}
	if c.Worker.MaxBodyBytes < 0 {
		ps.add("worker.max_body_bytes", "%d is negative; valid: a positive number of bytes", c.Worker.MaxBodyBytes)
	}
	if c.Worker.TokenTTLSeconds < 0 {
		ps.add("worker.token_ttl_seconds", "%d is negative; valid: a positive number of seconds", c.Worker.TokenTTLSeconds)
	} else if c.Worker.TokenTTLSeconds < MinTokenTTLSeconds {
		// A worker's handle lives one TTL past its last heartbeat
		// (docs/security.md § Handles): shorter than two of the runner's
		// silent-engine heartbeats, a live worker loses it.
		ps.add("worker.token_ttl_seconds", "%d is too short; valid: %d seconds or more (six times the runner's 20 s heartbeat, which renews a worker's handle)", c.Worker.TokenTTLSeconds, MinTokenTTLSeconds)
	}
	if c.Projection.Placement == "" {
		c.Projection.Placement = "workspace/tasks/{task_id}/ctx"
	}
	if err := checkPlacement(c.Projection.Placement); err != nil {
		ps.add("projection.placement", "%q %s", c.Projection.Placement, err)
	}
	c.blocks(ps)
	c.retryBlock(ps)
	c.poolBlocks(ps)
	if d := c.RetentionDays; d != nil && (*d < 0 || *d > MaxRetentionDays) {
		ps.add("retention_days", "%d is not a retention; valid: 1 to %d (days after a run ended that its files and step records are kept; default %d), or 0 to keep every run for ever",
			*d, MaxRetentionDays, DefaultRetentionDays)
	}
	if _, ok := c.Agents.Providers[c.Agents.Primary]; !ok {
		ps.add("agents.primary", "provider %q has no launch spec; valid: %s", c.Agents.Primary, strings.Join(c.ProviderNames(), ", "))
	}
	for _, name := range c.ProviderNames() {
		p := c.Agents.Providers[name]
		field := "agents.providers." + name
		if p.Command == "" {
			ps.add(field+".command", "empty; valid: an executable name or path, or %s", StratusCommand)
		}
		if p.TimeoutSeconds < 0 {
			ps.add(field+".timeout_seconds", "%d is negative; valid: seconds > 0, or 0 for 600", p.TimeoutSeconds)
		}
		if p.MaxSteps < 0 {
			ps.add(field+".max_steps", "%d is negative; valid: a step ceiling > 0, or 0 for none", p.MaxSteps)
		}
		if p.Dir != "" && (filepath.IsAbs(p.Dir) || slices.Contains(strings.Split(filepath.ToSlash(p.Dir), "/"), "..")) {
			ps.add(field+".dir", "%q must be a relative path inside the work dir, without ..", p.Dir)
		}
		keys := make([]string, 0, len(p.Env))
		for k := range p.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !envName().MatchString(k) {
				ps.add(field+".env."+k, "%q is not an environment variable name; valid: letters, digits and _, not starting with a digit", k)
			}
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Load reads the config file at path. Errors: ENOTFOUND when it is
// missing; EINVALID when it is not a regular file (inputfile.ReadFile);
// Parse's.
func Load(path string) (*Config, error) {
	data, err := inputfile.ReadFile("config", path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "no config at %s; run `stratus install` first", path)
	} else if stratus.ErrorCode(err) == stratus.EINVALID {
		return nil, err // not a regular file
	} else if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// header is the comment config.yaml opens with.
const header = `# Stratus configuration: the environment flows run in.
# agents.primary picks the engine every node runs on unless the node pins ` + "`provider:`" + `.
# agents.retry and agents.max_stage_attempts (worc's keys and defaults) bound the
# recovery from a transient provider failure (unavailable, network, rate limit;
# never a bad report or a timeout): max_attempts same-provider retries waiting
# min(base_delay_s * 2^n, max_delay_s) seconds, then the next of up to
# max_stage_attempts allowed providers, then the step parks and tries again by
# itself until it has been parked max_blocked_s seconds in all.
# workspace: where engines work. Unset, a work dir that is a git repository with
# a commit gets worktree: each engine edits a checkout of its own and the run's
# commits come back as branch stratus/<task_id>, your checkout untouched; any
# other dir is edited in place. workspace: workdir makes engines edit your
# checkout directly, in place: no branch, and no copy to fall back on.
`

// Marshal renders c as YAML with a header comment.
func Marshal(c *Config) ([]byte, error) {
	body, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), body...), nil
}

// ProviderNames returns the configured provider names, sorted.
func (c *Config) ProviderNames() []string {
	names := make([]string, 0, len(c.Agents.Providers))
	for n := range c.Agents.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Provider resolves which provider runs a node: pinned (if non-empty) else
// the primary. EINVALID when the provider is not allowed (the primary always
// is) or has no launch spec.
func (c *Config) Provider(pinned string) (string, Provider, error) {
	name := pinned
	if name == "" {
		name = c.Agents.Primary
	}
	// The primary runs every node that pins nothing, so naming it (a
	// record of an attempt resolved to it) is always allowed.
	if pinned != "" && name != c.Agents.Primary && len(c.Agents.Allowed) > 0 && !contains(c.Agents.Allowed, name) {
		return "", Provider{}, stratus.FieldErrorf(stratus.EINVALID, "provider", "provider %q is not in agents.allowed; valid: %s", name, strings.Join(c.Agents.Allowed, ", "))
	}
	p, ok := c.Agents.Providers[name]
	if !ok {
		return "", Provider{}, stratus.FieldErrorf(stratus.EINVALID, "provider", "provider %q has no launch spec in agents.providers; valid: %s", name, strings.Join(c.ProviderNames(), ", "))
	}
	return name, p, nil
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// checkPlacement enforces what a ctx-dir placement may be: a relative path
// inside the work dir, without "..", that contains {task_id} (so two tasks
// never share a ctx dir) and no other {variable}.
func checkPlacement(p string) error {
	switch {
	case filepath.IsAbs(p) || strings.HasPrefix(p, "/"):
		return fmt.Errorf("must be a relative path inside the work dir")
	case slices.Contains(strings.Split(p, "/"), ".."):
		return fmt.Errorf("must not contain a .. segment")
	case p == ".stratus" || strings.HasPrefix(p, ".stratus/"):
		return fmt.Errorf("must not be inside .stratus/, Stratus's own state")
	case !strings.Contains(p, "{task_id}"):
		return fmt.Errorf("must contain {task_id}, so that tasks do not share a ctx dir")
	}
	if rest := strings.ReplaceAll(p, "{task_id}", ""); strings.ContainsAny(rest, "{}\\") {
		return fmt.Errorf("may use only the variable {task_id}, and no backslash")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// OpenseekKindDefaults are the per-kind defaults of the reference engine
// (docs/contracts.md § The reference engine): the step ceiling (0: none) and
// the adapter deadline, s.
var OpenseekKindDefaults = map[string]struct{ MaxSteps, TimeoutSeconds int }{
	"echo":    {0, 600},
	"explore": {100, 600},
	"review":  {100, 900},
	"worker":  {300, 2700},
}

// Resolved returns p with openseek's per-kind defaults filled in where p
// leaves max_steps or timeout_seconds unset
// (docs/contracts.md § The reference engine), for a provider whose command is
// openseek. Other providers are returned as is.
func (p Provider) Resolved() Provider {
	if filepath.Base(p.Command) != "openseek" {
		return p
	}
	if d, ok := OpenseekKindDefaults[p.Kind]; ok {
		if p.MaxSteps == 0 {
			p.MaxSteps = d.MaxSteps
		}
		if p.TimeoutSeconds == 0 {
			p.TimeoutSeconds = d.TimeoutSeconds
		}
	}
	return p
}
