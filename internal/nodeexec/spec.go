package nodeexec

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Node kinds this package runs.
const (
	KindChecks = "checks"
	KindTool   = "tool"
)

// Checkers of a checks node (reference.md § checks node). CommandProfile
// and Citation run; DependencyScan is accepted by the flow format but not
// run by this build (Supported says so).
const (
	CommandProfile = "command_profile"
	Citation       = "citation"
	DependencyScan = "dependency_scan"
)

// Supported reports whether this build runs a checks node's checker.
func Supported(checker string) bool { return checker == CommandProfile || checker == Citation }

// Bounds of what a result carries.
const (
	// OutputTailBytes is how much of a check command's combined output is
	// kept: the last 64 KiB (the end of a test run is where its failures are).
	OutputTailBytes = 64 << 10
	// StdoutBytes is how much of a tool's stdout is kept: the first 1 MiB.
	StdoutBytes = 1 << 20
	// StdoutTailBytes is how much of the end of a longer stdout is kept
	// too: the last 64 KiB, where a tool prints its JSON outcome.
	StdoutTailBytes = 64 << 10
	// StderrTailBytes is how much of a tool's stderr is kept: the last 64 KiB.
	StderrTailBytes = 64 << 10
	// DiagnosticBytes bounds the stderr excerpt in a crashed tool's reason.
	DiagnosticBytes = 1 << 10
	// maxChangedListed bounds the changed paths a checks result lists.
	maxChangedListed = 200
)

// Spec is what the runner runs instead of an engine for a checks or tool
// node: the `exec` field of the prompt payload (GET /v1/worker/prompt).
type Spec struct {
	Kind string `json:"kind"` // checks | tool | publish
	// Dir is the work dir (absolute): the repository the checks and the
	// tool run in, and the root a command's cwd is relative to.
	Dir string `json:"dir"`
	// AllowedEnvironment names the variables a command or a tool inherits
	// from the runner's environment (config security.allowed_environment);
	// nothing else reaches it.
	AllowedEnvironment []string `json:"allowed_environment"`
	// Env is config checks.env (a checks node's commands only): variables
	// set to these values on top of the allowlisted ones. HOME, TMPDIR and
	// XDG_CACHE_HOME are then filled in when still missing (CommandEnv).
	Env     map[string]string `json:"env,omitempty"`
	Checks  *ChecksSpec       `json:"checks,omitempty"`
	Tool    *ToolSpec         `json:"tool,omitempty"`
	Publish *PublishSpec      `json:"publish,omitempty"`
}

// ChecksSpec is a checks node's checker and its inputs.
type ChecksSpec struct {
	Checker string `json:"checker"` // command_profile | citation
	// CommandSets are config checks.command_sets in name order, each
	// command's timeout resolved (command_profile).
	CommandSets []CommandSet `json:"command_sets,omitempty"`
	// Exclude lists work-dir-relative directories whose changes are
	// Stratus's own (its state dir, the run's ctx dir): they never select a
	// command set.
	Exclude []string `json:"exclude,omitempty"`
	// Base, when set, is the commit the change is measured from (a run
	// whose repository travels: base..HEAD of the runner's checkout plus
	// anything uncommitted); "" = the work tree's status.
	Base string `json:"base,omitempty"`
	// Manifest is the absolute path of the citation manifest (citation).
	Manifest string `json:"manifest,omitempty"`
}

// CommandSet is one configured set (worc configuration.md § checks).
type CommandSet struct {
	Name              string    `json:"name"`
	Paths             []string  `json:"paths,omitempty"` // repo-relative doublestar globs; none = any non-empty diff
	TimeoutSeconds    int       `json:"timeout_seconds"` // per command, resolved
	SkipIfUnavailable bool      `json:"skip_if_unavailable,omitempty"`
	Commands          []Command `json:"commands"`
}

// Command is one check: an argv (no shell) run in Cwd.
type Command struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Cwd  string   `json:"cwd,omitempty"` // relative to the work dir
}

// ToolSpec is a tool node's executable and its stdin.
type ToolSpec struct {
	Name           string          `json:"name"`            // the registered name, one path element
	Dir            string          `json:"dir"`             // the tools directory, absolute: <work dir>/.stratus/tools
	TimeoutSeconds int             `json:"timeout_seconds"` // resolved: node → tools.default_timeout_seconds → 3600
	Input          json.RawMessage `json:"input"`           // the JSON context written to stdin
}

// Result is what the runner submits for a checks or tool node (the body of
// POST /v1/worker/submit).
type Result struct {
	Kind    string         `json:"kind"`
	Checks  *ChecksResult  `json:"checks,omitempty"`
	Tool    *ToolResult    `json:"tool,omitempty"`
	Publish *PublishResult `json:"publish,omitempty"`
}

// Selection says how a checks run chose its command sets.
const (
	SelectedByDiff = "diff" // the work dir is a git work tree: sets matched against its changes
	SelectedAll    = "all"  // not a git work tree: every set ran
)

// ChecksResult is what a checks node ran and saw.
type ChecksResult struct {
	Checker   string `json:"checker"`
	Selection string `json:"selection,omitempty"` // diff | all (command_profile)
	// Changed lists the first 200 changed paths (repo-relative, excluded
	// ones dropped); ChangedTotal counts them all.
	Changed      []string   `json:"changed,omitempty"`
	ChangedTotal int        `json:"changed_total"`
	Note         string     `json:"note,omitempty"` // why the selection is what it is
	Runs         []CheckRun `json:"runs"`
	// Citation checker: the manifest (work-dir-relative when inside it) and
	// the per-entry verdicts.
	ManifestPath string          `json:"manifest_path,omitempty"`
	Citations    []CitationEntry `json:"citations,omitempty"`
}

// Status of one check command or tool run.
const (
	StatusExited      = "exited"       // ran to an exit; see ExitCode
	StatusTimedOut    = "timed_out"    // killed at its timeout
	StatusSkipped     = "skipped"      // skip_if_unavailable set, binary absent: "skipped (toolchain absent)"
	StatusLaunchError = "launch_error" // could not be started (a required binary absent, a bad cwd, a refused tool)
)

// CheckRun is one command of a selected set.
type CheckRun struct {
	Set        string   `json:"set"`
	Name       string   `json:"name"`
	Argv       []string `json:"argv"`
	Cwd        string   `json:"cwd,omitempty"`
	Status     string   `json:"status"`
	ExitCode   int      `json:"exit_code"`
	Error      string   `json:"error,omitempty"`
	DurationMS int64    `json:"duration_ms"`
	// Output is the tail of stdout and stderr combined; OutputBytes counts
	// all of it, so OutputBytes > len(Output) means it was cut.
	Output      string `json:"output"`
	OutputBytes int64  `json:"output_bytes"`
}

// Citation verdicts (reference.md § checks node).
const (
	Verified    = "verified"    // the snippet is at the cited line
	Weak        = "weak"        // the snippet is in the file, not at the cited line
	Broken      = "broken"      // the path, line or snippet does not resolve
	Uncheckable = "uncheckable" // an external url, no snippet, or a malformed entry
)

// CitationEntry is one manifest entry and its verdict.
type CitationEntry struct {
	ID      string `json:"id,omitempty"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	URL     string `json:"url,omitempty"`
	Verdict string `json:"verdict"`
	Why     string `json:"why,omitempty"`
}

// ToolResult is one tool run.
type ToolResult struct {
	Name           string `json:"name"`
	Path           string `json:"path,omitempty"`
	Status         string `json:"status"`
	ExitCode       int    `json:"exit_code"`
	Error          string `json:"error,omitempty"`
	DurationMS     int64  `json:"duration_ms"`
	TimeoutSeconds int    `json:"timeout_seconds"`
	// Stdout is its first StdoutBytes; StdoutBytes counts all of it.
	Stdout      string `json:"stdout"`
	StdoutBytes int64  `json:"stdout_bytes"`
	// StdoutTail is, when stdout was longer than Stdout, its last bytes
	// (at most StdoutTailBytes, never overlapping Stdout): ToolOutcome
	// reads a trailing JSON outcome there. "" when Stdout is all of it.
	StdoutTail string `json:"stdout_tail,omitempty"`
	// Stderr is its last StderrTailBytes; StderrBytes counts all of it.
	Stderr      string `json:"stderr"`
	StderrBytes int64  `json:"stderr_bytes"`
}

// StdoutComplete reports whether Stdout and StdoutTail together are the
// whole of the tool's stdout (nothing between them was dropped).
func (r *ToolResult) StdoutComplete() bool {
	return r.StdoutBytes <= int64(len(r.Stdout)+len(r.StdoutTail))
}

// KeptStdout is the stdout the tool's artifact saves: Stdout, and when its
// middle was dropped, a line saying how much, then StdoutTail.
func (r *ToolResult) KeptStdout() string {
	if r.StdoutComplete() {
		return r.Stdout + r.StdoutTail
	}
	sep := "\n"
	if strings.HasSuffix(r.Stdout, "\n") {
		sep = ""
	}
	dropped := r.StdoutBytes - int64(len(r.Stdout)+len(r.StdoutTail))
	return r.Stdout + sep + fmt.Sprintf("[stratus: %d bytes of stdout not kept; the first %d and the last %d are]\n", dropped, len(r.Stdout), len(r.StdoutTail)) + r.StdoutTail
}
