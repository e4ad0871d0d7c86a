package config

import (
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stratusflow/stratus/internal/gitwork"
)

// Defaults of the blocks below (worc configuration.md).
const (
	DefaultChecksTimeoutSeconds = 7200  // checks.timeout_seconds
	DefaultToolTimeoutSeconds   = 3600  // tools.default_timeout_seconds
	DefaultHITLTimeoutSeconds   = 86400 // hitl.timeout_seconds (worc: telegram.ask_timeout_s)
)

// DefaultAllowedEnvironment is the environment a checks command or a tool
// inherits when security.allowed_environment is unset: nothing secret, only
// what a program needs to find its binaries and write temporary files.
var DefaultAllowedEnvironment = []string{"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// Checks configures the `checks` node's command_profile checker (worc
// configuration.md § checks): operator-authored command sets selected by the
// paths of the task's diff.
type Checks struct {
	TimeoutSeconds int                   `yaml:"timeout_seconds,omitempty"` // per-command default, s (7200)
	CommandSets    map[string]CommandSet `yaml:"command_sets,omitempty"`    // empty = no gate: checks pass vacuously
	// Env (a Stratus addition to worc's keys) sets variables for every
	// check command, NAME → value, on top of what
	// security.allowed_environment passes from the runner's environment:
	// the one way to give a check a variable on AWS, where the operator's
	// environment never reaches the worker (docs/runner-image.md § The
	// environment of checks and tools). Values are written as they are, not
	// expanded; they are config, not secrets.
	Env map[string]string `yaml:"env,omitempty"`
}

// CommandSet is one named set of check commands.
type CommandSet struct {
	Paths             []string       `yaml:"paths,omitempty"`           // diff globs selecting the set; none = always (on a non-empty diff)
	TimeoutSeconds    int            `yaml:"timeout_seconds,omitempty"` // per-command timeout for this set, s; 0 = inherit
	SkipIfUnavailable bool           `yaml:"skip_if_unavailable,omitempty"`
	Commands          []CheckCommand `yaml:"commands"`
}

// CheckCommand is one check: an argv list (no shell) run in cwd.
type CheckCommand struct {
	Name string   `yaml:"name"`
	Argv []string `yaml:"argv"`
	Cwd  string   `yaml:"cwd,omitempty"` // relative to the work dir; "" = the work dir
}

// Tools configures `tool` nodes (worc configuration.md § tools).
type Tools struct {
	DefaultTimeoutSeconds int `yaml:"default_timeout_seconds,omitempty"` // s (3600)
}

// Security holds the non-weakenable caps.
type Security struct {
	// AllowedEnvironment names the variables a checks command or a tool
	// inherits from the worker's environment; nothing else reaches it.
	AllowedEnvironment []string `yaml:"allowed_environment,omitempty"`
	// StrictIsolation (default true) rejects extra_args that select a
	// provider's full-access mode (docs/contracts.md § Fatal validation).
	StrictIsolation *bool `yaml:"strict_isolation,omitempty"`
}

// Strict reports security.strict_isolation (default true).
func (s Security) Strict() bool { return s.StrictIsolation == nil || *s.StrictIsolation }

// Supervisor configures the supervisor layer
// (docs/contracts.md § The supervisor).
type Supervisor struct {
	Enabled  *bool   `yaml:"enabled,omitempty"`   // default true
	RoleFile string  `yaml:"role_file,omitempty"` // default roles/supervisor.md, inside the flows dir
	Provider string  `yaml:"provider,omitempty"`  // "" = agents.primary
	Observe  Observe `yaml:"observe,omitempty"`
	Finalize Phase   `yaml:"finalize,omitempty"`
	Handoff  Phase   `yaml:"handoff,omitempty"`
}

// On reports supervisor.enabled (default true).
func (s Supervisor) On() bool { return s.Enabled == nil || *s.Enabled }

// Observe is the observation cadence
// (docs/contracts.md § What observe.mode costs).
type Observe struct {
	Mode         string   `yaml:"mode,omitempty"`          // all | selected | events | none; default events
	Triggers     []string `yaml:"triggers,omitempty"`      // rework | failure | fallback; default all three
	IncludeNodes []string `yaml:"include_nodes,omitempty"` // nodes observed under mode selected
	Model        string   `yaml:"model,omitempty"`
	Reasoning    string   `yaml:"reasoning,omitempty"`
}

// Phase is the model and reasoning of one supervisor phase.
type Phase struct {
	Model     string `yaml:"model,omitempty"`
	Reasoning string `yaml:"reasoning,omitempty"`
}

// Limits caps one run's spend, summed over every attempt from the usage
// its runners relay (docs/contracts.md § The event stream). When a step ends
// with the run at or over a cap, no further worker step starts: the run parks
// manual_action_required, and `stratus resume RUN --max-cost-usd N` raises
// the cap and goes on. 0 = no cap.
type Limits struct {
	MaxCostUSD float64 `yaml:"max_cost_usd,omitempty"` // US dollars
	MaxTokens  int64   `yaml:"max_tokens,omitempty"`   // prompt + completion tokens
	// MaxSnapshotBytes caps a run's workspace snapshot (the sum of its
	// files' sizes) and each step's bundle, bytes; 0 = 256 MiB.
	MaxSnapshotBytes int64 `yaml:"max_snapshot_bytes,omitempty"`
}

// Workspace modes (config `workspace`, a task's `workspace`).
const (
	// WorkspaceWorkDir: embedded engines work in the work dir itself.
	WorkspaceWorkDir = "workdir"
	// WorkspaceWorktree: the run's repository travels as on AWS (a base
	// snapshot, a commit per workspace-write step); engines work in a
	// checkout of their own, never in the operator's, and the run's
	// commits come back as branch stratus/<task_id> in a git worktree.
	WorkspaceWorktree = "worktree"
)

// Git is worc's `git` block: how the publish step publishes (worc's
// configuration reference, § git). Read through its methods, which apply
// the defaults.
type Git struct {
	// CreatePullRequest: whether publishing opens a pull request (default
	// true). false still commits and pushes the task branch.
	CreatePullRequest *bool `yaml:"create_pull_request,omitempty"`
	// PRBase is the branch pull requests are opened against ("main").
	PRBase string `yaml:"pr_base,omitempty"`
	// AutoMerge merges every published pull request (default false: a
	// human reviews it); a task's auto_merge wins.
	AutoMerge bool `yaml:"auto_merge,omitempty"`
	// AutoMergeStrategy is merge, squash (default) or rebase.
	AutoMergeStrategy string `yaml:"auto_merge_strategy,omitempty"`
	// AutoMergeWaitForChecks arms the host's own auto-merge, which merges
	// once the required checks pass, instead of merging at once.
	AutoMergeWaitForChecks bool `yaml:"auto_merge_wait_for_checks,omitempty"`
	// MergeFlow is the flow that resolves a conflicting merge of the base
	// ("merge").
	MergeFlow string `yaml:"merge_flow,omitempty"`
	// Remote is the git remote the task branch is pushed to ("origin"; a
	// Stratus key: worc pushes to the repository's origin).
	Remote string `yaml:"remote,omitempty"`
	// APIURL is the GitHub REST API root pull requests are opened through
	// when the remote is not on github.com: a GitHub Enterprise Server
	// ("https://ghe.example.com/api/v3/") or a stand-in (a Stratus key).
	// Empty: github.com remotes get https://api.github.com/, any other
	// remote a pushed branch and no pull request.
	APIURL string `yaml:"api_url,omitempty"`
	// Repository is the GitHub repository ("owner/name") of the remote
	// when its URL does not say it (a Stratus key); empty: read from the
	// remote's URL.
	Repository string       `yaml:"repository,omitempty"`
	Footprint  GitFootprint `yaml:"footprint,omitempty"`
}

// GitFootprint is the audit commit's policy (worc: git.footprint).
type GitFootprint struct {
	// AuditCommitMessage is the audit commit's message; {task_id} is
	// replaced ("chore(orchestrator): audit trail for {task_id}").
	AuditCommitMessage string `yaml:"audit_commit_message,omitempty"`
	// AuditOnBranch is where the audit commit lands: task (default, the
	// task branch) or sibling (a separate <branch>-audit branch).
	AuditOnBranch string `yaml:"audit_on_branch,omitempty"`
}

// The values and defaults of the git block.
const (
	MergeStrategyMerge  = "merge"
	MergeStrategySquash = "squash"
	MergeStrategyRebase = "rebase"

	DefaultPRBase             = "main"
	DefaultMergeFlow          = "merge"
	DefaultGitRemote          = "origin"
	DefaultAuditCommitMessage = "chore(orchestrator): audit trail for {task_id}"
	AuditOnTaskBranch         = "task"
	AuditOnSiblingBranch      = "sibling"
)

// PullRequests reports whether publishing opens a pull request.
func (g Git) PullRequests() bool { return g.CreatePullRequest == nil || *g.CreatePullRequest }

// Base is the branch pull requests are opened against.
func (g Git) Base() string { return cmpOr(g.PRBase, DefaultPRBase) }

// Strategy is the merge strategy of an automatic merge.
func (g Git) Strategy() string { return cmpOr(g.AutoMergeStrategy, MergeStrategySquash) }

// MergeFlowName is the flow that resolves a conflicting base merge.
func (g Git) MergeFlowName() string { return cmpOr(g.MergeFlow, DefaultMergeFlow) }

// RemoteName is the git remote the task branch is pushed to.
func (g Git) RemoteName() string { return cmpOr(g.Remote, DefaultGitRemote) }

// AuditMessage is the audit commit's message for task taskID.
func (g Git) AuditMessage(taskID string) string {
	return strings.ReplaceAll(cmpOr(g.Footprint.AuditCommitMessage, DefaultAuditCommitMessage), "{task_id}", taskID)
}

// AuditBranch is where the audit commit lands: task or sibling.
func (g Git) AuditBranch() string { return cmpOr(g.Footprint.AuditOnBranch, AuditOnTaskBranch) }

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// HITL configures human-in-the-loop waits.
type HITL struct {
	TimeoutSeconds int `yaml:"timeout_seconds,omitempty"` // wait for a human, s, when a node sets none (86400)
}

// Decomposition is the config gate of flow decomposition (worc
// reference.md § decomposition: the flow declares the capability, the
// gate decides whether it fires).
type Decomposition struct {
	Enabled bool `yaml:"enabled,omitempty"`
}

// ObserveModes ranks the observe modes from narrowest to widest
// (docs/contracts.md § What observe.mode costs: none < events < selected <
// all).
var ObserveModes = []string{"none", "events", "selected", "all"}

// ObserveTriggers is the closed set of observe.triggers.
var ObserveTriggers = []string{"rework", "failure", "fallback"}

// ReasoningLevels are the reasoning values each provider family accepts
// (docs/contracts.md § Per-node overrides: "Claude vs Codex sets differ").
var ReasoningLevels = map[string][]string{
	"claude": {"low", "medium", "high", "xhigh", "max"},
	"codex":  {"minimal", "low", "medium", "high", "xhigh", "max"},
}

// Family names the CLI family a provider drives: "codex" or "claude" when
// its name is that or it runs `stratus engine codex|claude`, else "".
func (p Provider) Family(name string) string {
	for _, f := range []string{"codex", "claude"} {
		if name == f || filepath.Base(p.Command) == f || (p.Command == StratusCommand && len(p.Args) >= 2 && p.Args[0] == "engine" && p.Args[1] == f) {
			return f
		}
	}
	return ""
}

// SupportsReasoning reports whether the provider accepts a reasoning value:
// its reasoning_levels when set, else its family's set, else any value.
// It returns the valid set for messages.
func (p Provider) SupportsReasoning(name, reasoning string) (bool, []string) {
	levels := p.ReasoningLevels
	if len(levels) == 0 {
		levels = ReasoningLevels[p.Family(name)]
	}
	if len(levels) == 0 {
		return true, nil
	}
	return slices.Contains(levels, reasoning), levels
}

// blocks fills the defaults of the blocks above and validates them,
// recording every problem in ps.
func (c *Config) blocks(ps *problems) {
	bad := ps.add
	if c.Checks.TimeoutSeconds == 0 {
		c.Checks.TimeoutSeconds = DefaultChecksTimeoutSeconds
	}
	if c.Checks.TimeoutSeconds < 0 {
		bad("checks.timeout_seconds", "%d is negative; valid: seconds > 0", c.Checks.TimeoutSeconds)
	}
	for _, k := range sortedKeys(c.Checks.Env) {
		if !envName().MatchString(k) {
			bad("checks.env."+k, "%q is not an environment variable name; valid: letters, digits and _, not starting with a digit", k)
		}
	}
	for _, name := range sortedKeys(c.Checks.CommandSets) {
		set := c.Checks.CommandSets[name]
		field := "checks.command_sets." + name
		if set.TimeoutSeconds < 0 {
			bad(field+".timeout_seconds", "%d is negative; valid: seconds > 0, or 0 to inherit checks.timeout_seconds", set.TimeoutSeconds)
		}
		if len(set.Commands) == 0 {
			bad(field+".commands", "empty; valid: a list of {name, argv, cwd?}")
		}
		for i, cmd := range set.Commands {
			f := fmt.Sprintf("%s.commands[%d]", field, i)
			if cmd.Name == "" {
				bad(f+".name", "empty; valid: a label for logs")
			}
			if len(cmd.Argv) == 0 || cmd.Argv[0] == "" {
				bad(f+".argv", "empty; valid: an argv list such as [go, test, ./...] (no shell)")
			}
			if cmd.Cwd != "" && (filepath.IsAbs(cmd.Cwd) || slices.Contains(strings.Split(filepath.ToSlash(cmd.Cwd), "/"), "..")) {
				bad(f+".cwd", "%q must be a relative path inside the work dir, without ..", cmd.Cwd)
			}
		}
		for i, p := range set.Paths {
			if p == "" || strings.HasPrefix(p, "/") || slices.Contains(strings.Split(p, "/"), "..") {
				bad(fmt.Sprintf("%s.paths[%d]", field, i), "%q is not a repo-relative glob; valid: e.g. backend/** or **/*.md", p)
			}
		}
	}
	if c.Tools.DefaultTimeoutSeconds == 0 {
		c.Tools.DefaultTimeoutSeconds = DefaultToolTimeoutSeconds
	}
	if c.Tools.DefaultTimeoutSeconds < 0 {
		bad("tools.default_timeout_seconds", "%d is negative; valid: seconds > 0", c.Tools.DefaultTimeoutSeconds)
	}
	if c.Security.AllowedEnvironment == nil {
		c.Security.AllowedEnvironment = slices.Clone(DefaultAllowedEnvironment)
	}
	for i, k := range c.Security.AllowedEnvironment {
		if !envName().MatchString(k) {
			bad(fmt.Sprintf("security.allowed_environment[%d]", i), "%q is not an environment variable name", k)
		}
	}
	if s := c.Git.AutoMergeStrategy; s != "" && s != MergeStrategyMerge && s != MergeStrategySquash && s != MergeStrategyRebase {
		bad("git.auto_merge_strategy", "%q is not a merge strategy; valid: merge, squash or rebase", s)
	}
	if b := c.Git.PRBase; b != "" && !gitwork.ValidBranchName(b) {
		bad("git.pr_base", "%q is not a branch name; valid: a git branch name such as main", b)
	}
	if r := c.Git.Remote; r != "" && !gitwork.ValidBranchName(r) {
		bad("git.remote", "%q is not a remote name; valid: the name of a git remote such as origin", r)
	}
	if f := c.Git.MergeFlow; f != "" && (strings.ContainsAny(f, `/\`) || strings.HasPrefix(f, ".")) {
		bad("git.merge_flow", "%q is not a flow name; valid: the name of a flow under .stratus/flows, such as merge", f)
	}
	if u := c.Git.APIURL; u != "" && !validAPIURL(u) {
		bad("git.api_url", "%q is not an http(s) URL; valid: the GitHub REST API root, such as https://ghe.example.com/api/v3/", u)
	}
	if r := c.Git.Repository; r != "" {
		if o, n, ok := strings.Cut(r, "/"); !ok || o == "" || n == "" || strings.ContainsAny(n, "/ ") || strings.ContainsAny(o, " ") {
			bad("git.repository", "%q is not a GitHub repository name; valid: owner/name", r)
		}
	}
	if a := c.Git.Footprint.AuditOnBranch; a != "" && a != AuditOnTaskBranch && a != AuditOnSiblingBranch {
		bad("git.footprint.audit_on_branch", "%q is not a place for the audit commit; valid: task or sibling", a)
	}
	if c.HITL.TimeoutSeconds == 0 {
		c.HITL.TimeoutSeconds = DefaultHITLTimeoutSeconds
	}
	if c.HITL.TimeoutSeconds < 0 {
		bad("hitl.timeout_seconds", "%d is negative; valid: seconds > 0", c.HITL.TimeoutSeconds)
	}
	if c.Limits.MaxCostUSD < 0 || math.IsNaN(c.Limits.MaxCostUSD) || math.IsInf(c.Limits.MaxCostUSD, 0) {
		bad("limits.max_cost_usd", "%v is not a cap; valid: a cost in US dollars > 0, or 0 for no cap", c.Limits.MaxCostUSD)
	}
	if c.Limits.MaxTokens < 0 {
		bad("limits.max_tokens", "%d is negative; valid: a token count > 0, or 0 for no cap", c.Limits.MaxTokens)
	}
	if c.Limits.MaxSnapshotBytes < 0 {
		bad("limits.max_snapshot_bytes", "%d is negative; valid: a size in bytes > 0, or 0 for the default 256 MiB", c.Limits.MaxSnapshotBytes)
	}
	if c.Workspace != "" && c.Workspace != WorkspaceWorkDir && c.Workspace != WorkspaceWorktree {
		bad("workspace", "%q is not a workspace mode; valid: %s (engines work in the work dir) or %s (a checkout of their own; commits come back as branch stratus/<task_id>)", c.Workspace, WorkspaceWorkDir, WorkspaceWorktree)
	}
	if c.Agents.MaxFixCycles < 0 {
		bad("agents.max_fix_cycles", "%d is negative; valid: a cap > 0 on every loop budget, or 0 for none", c.Agents.MaxFixCycles)
	}
	s := &c.Supervisor
	if s.RoleFile == "" {
		s.RoleFile = "roles/supervisor.md"
	}
	if filepath.IsAbs(s.RoleFile) || slices.Contains(strings.Split(filepath.ToSlash(s.RoleFile), "/"), "..") {
		bad("supervisor.role_file", "%q must be a path inside the flows dir, without ..", s.RoleFile)
	}
	if s.Observe.Mode == "" {
		s.Observe.Mode = "events"
	}
	if !slices.Contains(ObserveModes, s.Observe.Mode) {
		bad("supervisor.observe.mode", "%q; valid: %s", s.Observe.Mode, strings.Join(ObserveModes, ", "))
	}
	if s.Observe.Triggers == nil {
		s.Observe.Triggers = slices.Clone(ObserveTriggers)
	}
	for i, t := range s.Observe.Triggers {
		if !slices.Contains(ObserveTriggers, t) {
			bad(fmt.Sprintf("supervisor.observe.triggers[%d]", i), "%q; valid: %s", t, strings.Join(ObserveTriggers, ", "))
		}
	}
	if s.On() && s.Provider != "" {
		if _, ok := c.Agents.Providers[s.Provider]; !ok {
			bad("supervisor.provider", "%q has no launch spec in agents.providers; valid: %s", s.Provider, strings.Join(c.ProviderNames(), ", "))
		}
	}
	if s.On() {
		name, p, _ := c.Provider(s.Provider)
		for _, ph := range []struct{ field, reasoning string }{
			{"observe", s.Observe.Reasoning}, {"finalize", s.Finalize.Reasoning}, {"handoff", s.Handoff.Reasoning},
		} {
			if ph.reasoning == "" {
				continue
			}
			if ok, levels := p.SupportsReasoning(name, ph.reasoning); !ok {
				bad("supervisor."+ph.field+".reasoning", "%q is not supported by provider %s; valid: %s", ph.reasoning, name, strings.Join(levels, ", "))
			}
		}
	}
	for _, name := range c.ProviderNames() {
		p := c.Agents.Providers[name]
		if p.Reasoning == "" {
			continue
		}
		if ok, levels := p.SupportsReasoning(name, p.Reasoning); !ok {
			bad("agents.providers."+name+".reasoning", "%q is not supported; valid: %s", p.Reasoning, strings.Join(levels, ", "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// validAPIURL: an absolute http(s) URL with a host.
func validAPIURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "https" || p.Scheme == "http") && p.Host != "" && p.Hostname() != ""
}
