package stratus

import (
	"encoding/json"
	"time"
)

// Run states. A run is one execution of one flow for one task file
// (docs/architecture.md § Vocabulary); its terminal names are worc's.
const (
	RunRunning              = "running"
	RunDone                 = "done"
	RunFailed               = "failed"
	RunManualActionRequired = "manual_action_required"
	// RunInterrupted: the run stopped before a terminal of its flow — it
	// was cancelled, its process was interrupted or killed — and may be
	// resumed from the step it was in.
	RunInterrupted = "interrupted"
)

// RunTerminal reports whether status is one of the run's terminal states.
// An interrupted run is ended too (nothing runs it), though resumable.
func RunTerminal(status string) bool {
	return status == RunDone || status == RunFailed || status == RunManualActionRequired || status == RunInterrupted
}

// RunResumable reports whether a run that ended with status may be resumed
// from the step that stopped it (README.md § Durable runs): failed,
// manual_action_required and interrupted runs may; a done one may not.
func RunResumable(status string) bool {
	return status == RunFailed || status == RunManualActionRequired || status == RunInterrupted
}

// Run is one execution of one flow for one task file.
type Run struct {
	ID        string `json:"run_id"`
	TaskID    string `json:"task_id"`    // the task file's front-matter id: {task_id}
	TaskTitle string `json:"task_title"` // the task file's title
	Flow      string `json:"flow"`       // the flow's task_type
	Status    string `json:"status"`     // RunRunning or a terminal
	WorkDir   string `json:"work_dir"`   // absolute; the root projections resolve from
	TaskPath  string `json:"task_path"`  // absolute path of the task file
	Execution string `json:"execution"`  // the state-machine execution id (ARN on AWS); the latest one of a resumed run
	// Owner names the process that runs the run in embedded mode,
	// "<host>/<pid>/<process start>" (internal/lifecycle.Owner); "" on AWS,
	// where the execution runs itself. A running run whose owner is gone
	// was interrupted.
	Owner string `json:"owner,omitempty"`
	// Resumes counts how many times the run was resumed; execution n+1 of
	// the run is named "<run_id>.resume-<n>".
	Resumes int `json:"resumes,omitempty"`
	// MaxCostUSD and MaxTokens cap the run's spend (0: no cap): the task's
	// max_cost_usd / max_tokens, else config.yaml limits; a resume may
	// raise them (README.md § Cost and token caps).
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	MaxTokens  int64   `json:"max_tokens,omitempty"`
	// Workspace is the run's repository as it travels to its workers; nil
	// when the engines work in WorkDir itself.
	Workspace *Workspace `json:"workspace,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	EndedAt   time.Time  `json:"ended_at,omitzero"`
	// ResumedAt is when the run's latest resume began; zero for a run
	// never resumed (its one span began at CreatedAt). ActiveMS is what
	// the spans before it ran, in ms: each from a start or resume to its
	// stop, the idle time between a stop and the next resume left out.
	ResumedAt time.Time `json:"resumed_at,omitzero"`
	ActiveMS  int64     `json:"active_ms,omitempty"`
	// PrunedAt is when retention removed the run's files and step records
	// (docs/security.md § Retention; zero while they are kept): the run
	// record stays, so the run is still listed and says it was pruned,
	// and nothing that needs its files (resume, pull, logs) runs on it.
	PrunedAt time.Time `json:"pruned_at,omitzero"`
	// Publication is what the run's publish step left on its git host:
	// the pushed branch and the pull request (docs/architecture.md §
	// Publishing); nil until a publish step pushed.
	Publication *Publication `json:"publication,omitempty"`
}

// Publication is a run's pushed task branch and its pull request
// (docs/architecture.md § Publishing).
type Publication struct {
	Remote string `json:"remote"` // the remote's name in the operator's repository ("origin")
	URL    string `json:"url"`    // the remote's URL, credentials left out
	Branch string `json:"branch"` // the task branch pushed ("stratus/t1")
	Head   string `json:"head"`   // the commit the branch was left at (full SHA-1 hex)
	// PullRequest is the PR opened or updated for Branch; nil when none
	// was (Note says why).
	PullRequest *PullRequest `json:"pull_request,omitempty"`
	// Note says, in one sentence, what was not done and why: no pull
	// request for a host that is not GitHub, a merge that was blocked.
	Note string `json:"note,omitempty"`
}

// PullRequest is one pull request of a Publication.
type PullRequest struct {
	Number int    `json:"number"`
	URL    string `json:"url"`   // the page a person opens
	State  string `json:"state"` // open | merged | closed
	// AutoMerge is set when the host's own auto-merge was armed
	// (git.auto_merge_wait_for_checks): the strategy it merges with.
	AutoMerge string `json:"auto_merge,omitempty"`
	MergeSHA  string `json:"merge_sha,omitempty"` // the merge commit, once merged
}

// SpanStart is when the run's latest span began: its latest resume, else
// its start.
func (r Run) SpanStart() time.Time {
	if !r.ResumedAt.IsZero() {
		return r.ResumedAt
	}
	return r.CreatedAt
}

// Duration is how long the run has run: the sum of its active spans, each
// from a start or resume to its stop (the latest to EndedAt, or to now
// while it runs), without the idle time between a stop and a resume
// (README § Durable runs).
func (r Run) Duration(now time.Time) time.Duration {
	end := r.EndedAt
	if end.IsZero() {
		end = now
	}
	d := time.Duration(r.ActiveMS) * time.Millisecond
	if span := end.Sub(r.SpanStart()); span > 0 {
		d += span
	}
	return d
}

// Resumed records a resume of the run beginning at now: the span that
// ended at EndedAt joins ActiveMS and a new one begins (ResumedAt).
func (r *Run) Resumed(now time.Time) {
	if !r.EndedAt.IsZero() {
		if span := r.EndedAt.Sub(r.SpanStart()); span > 0 {
			r.ActiveMS += span.Milliseconds()
		}
	}
	r.ResumedAt, r.EndedAt = now, time.Time{}
}

// PrunedError is the refusal of what needs a pruned run's files or steps:
// ENOTFOUND naming the run, when it ended and when it was pruned
// (docs/security.md § Retention). what says what was asked ("resume it").
func PrunedError(r Run, what string) error {
	return Errorf(ENOTFOUND, "run %s (task %s) ended %s and was pruned %s: its files and step records were removed after retention_days; cannot %s",
		r.ID, r.TaskID, r.EndedAt.UTC().Format(time.RFC3339), r.PrunedAt.UTC().Format(time.RFC3339), what)
}

// Workspace is a run's repository as it travels to workers that have no disk of
// the operator's (docs/architecture.md § Workspaces): the base snapshot commit
// frozen at run start and the head its workspace-write steps advance, every
// commit carried by a git bundle in the sink. Root, Base, Origin and Prefix
// never change; Head and Bundles change only through the store's fenced
// AdvanceWorkspace.
type Workspace struct {
	// Root is the path a payload names the workspace by; each worker puts
	// its own checkout in its place, so no payload carries the operator's
	// path.
	Root string `json:"root"`
	// Base is the base snapshot commit: one parentless commit of the work
	// dir's content (full SHA-1 hex).
	Base string `json:"base"`
	// Origin is the operator's HEAD commit at run start ("" when the work
	// dir is not in a git repository or it had no commit): stratus pull
	// builds the run's branch on it.
	Origin string `json:"origin,omitempty"`
	// Prefix is the work dir's path inside its repository ("sub/dir/"; ""
	// at the top level).
	Prefix string `json:"prefix,omitempty"`
	// Exclude lists the work-dir-relative paths that are Stratus's own
	// (its state dir, the run's ctx dir): never in a snapshot or a commit.
	Exclude []string `json:"exclude,omitempty"`
	// Head is the run's latest commit: Base until a step writes.
	Head string `json:"head"`
	// Bundles are the sink keys of the bundles that carry Base..Head: the
	// base bundle, then one per advancing step, in order.
	Bundles []string `json:"bundles"`
	// StateCtx: the run's ctx dir is in the state dir
	// (projection.StatePlacement), out of the repository's tree, instead
	// of at config.yaml's projection.placement: an embedded run's (README
	// § Workspaces).
	StateCtx bool `json:"state_ctx,omitempty"`
	// Remote is the operator's git remote at the start (config
	// git.remote, "origin"): where a publish step pushes the task branch;
	// nil when the repository has no such remote.
	Remote *GitRemote `json:"remote,omitempty"`
}

// GitRemote is a git remote of the operator's repository.
type GitRemote struct {
	Name string `json:"name"` // "origin"
	// URL is the remote's fetch URL, any user:password left out; a local
	// path is absolute.
	URL string `json:"url"`
}

// Step states.
const (
	StepRunning   = "running"
	StepCompleted = "completed"
	StepFailed    = "failed"
	// StepCanceled: the step was open when its run was interrupted.
	StepCanceled = "canceled"
	// StepWaiting: the step waits for a human (a hitl node, or an agent's
	// hitl request).
	StepWaiting = "waiting"
	// StepParked: every provider the step may run on was unavailable or
	// rate-limited; its state machine waits in "<node>.wait" and enters the
	// node again at the time its value names (internal/retry), when the
	// step goes on with a new attempt. A run with a parked step reads
	// waiting.
	StepParked = "parked"
)

// Step is one visit of one node inside a run, and the dispatch task
// (`tid`, the worker API's `task_id`) that carries it. StepRef is
// "<node>#<visit>", e.g. "review#2".
type Step struct {
	TID       string          `json:"task_id"`
	RunID     string          `json:"run_id"`
	Node      string          `json:"node"`
	Kind      string          `json:"kind"` // the node kind: agent, evaluator, publish, ...
	Visit     int             `json:"visit"`
	StepRef   string          `json:"step_ref"`
	DedupKey  string          `json:"-"` // idempotency key of the dispatch message (hash of the task token)
	TaskToken string          `json:"-"` // the state machine's task token: server side only, never sent to a worker
	Status    string          `json:"status"`
	Verdict   string          `json:"verdict,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"` // the small value the Task state completed with
	// Input is the input of the Task state the step was dispatched from
	// (the compiled message's "state"): what a resumed run enters that
	// state with again.
	Input     json.RawMessage `json:"-"`
	CreatedAt time.Time       `json:"created_at"`
	EndedAt   time.Time       `json:"ended_at,omitzero"`
}

// Attempt states.
const (
	AttemptRunning   = "running"
	AttemptSubmitted = "submitted"
	AttemptFailed    = "failed"
)

// Attempt is one try of a dispatch task. It owns one capability token, one
// output tail and (server side) the task token of its step. Token counts
// and cost are what the runner relayed
// (docs/contracts.md § Terminal classification: the attempt is attached on
// every terminal).
type Attempt struct {
	TID      string `json:"task_id"`
	N        int    `json:"attempt"`
	Agent    string `json:"agent"` // the node id whose role the worker plays
	Status   string `json:"status"`
	Terminal string `json:"terminal,omitempty"` // the terminal (docs/contracts.md § Terminal classification), as reported by the runner
	Reason   string `json:"reason,omitempty"`
	// Class is a failed attempt's failure class (internal/failclass:
	// provider_unavailable, rate_limited, network_unavailable, timeout,
	// quality, infrastructure); "" for an attempt that did not fail, that
	// its run's end or cancel cut short (it failed of nothing itself), or
	// that was recorded before classes were.
	Class string `json:"class,omitempty"`
	// RetryAt is when the provider takes requests again, when the failure
	// said (a rate limit's reset); zero when unknown.
	RetryAt          time.Time `json:"retry_at,omitzero"`
	System           string    `json:"-"` // baked system prompt
	Prompt           string    `json:"-"` // rendered role file
	Steps            int       `json:"steps"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	CostUSD          *float64  `json:"cost_usd"`
	StartedAt        time.Time `json:"started_at"`
	EngineStartedAt  time.Time `json:"engine_started_at,omitzero"`
	EndedAt          time.Time `json:"ended_at,omitzero"`
	// Resolved is what this attempt's engine was launched with, after the
	// per-node overrides (docs/contracts.md § Per-node overrides); zero for
	// an attempt recorded before it was kept.
	Resolved Resolved `json:"resolved,omitzero"`
}

// Resolved is the resolution of one attempt's per-node overrides against
// config.yaml (docs/contracts.md § Per-node overrides; worc reference.md §
// agent node): which provider ran it, on what model and reasoning, with
// what filesystem and network grant, under what deadline and extra flags.
type Resolved struct {
	Provider          string   `json:"provider"`
	Model             string   `json:"model,omitempty"`     // "" = the engine's own default
	Reasoning         string   `json:"reasoning,omitempty"` // "" = the engine's own default
	PermissionProfile string   `json:"permission_profile"`  // read-only | workspace-write
	NetworkAccess     bool     `json:"network_access"`
	TimeoutSeconds    int      `json:"timeout_seconds"`
	ExtraArgs         []string `json:"extra_args,omitempty"` // the node's extra_args, after the provider's args
	// Configured is what config.yaml alone would have used: the resolved
	// provider's model and reasoning. A half that differs from Model or
	// Reasoning is one the node or the task overrode
	// (docs/contracts.md § Prompt audit: the configured_* pair, null when
	// nothing was overridden).
	Configured ModelChoice `json:"configured,omitzero"`
}

// ModelChoice is a model and a reasoning level; "" means unset.
type ModelChoice struct {
	Model     string `json:"model,omitempty"`
	Reasoning string `json:"reasoning,omitempty"`
}

// Output event kinds of an attempt's output tail
// (docs/contracts.md § The shape).
const (
	OutputArtifact = "artifact" // a staged named part
	OutputFinal    = "final"    // the one final body
	OutputSidecar  = "sidecar"  // appended by another producer (audit); never folded
)

// OutputEvent is one entry of an attempt's append-only output tail.
type OutputEvent struct {
	TID     string    `json:"task_id"`
	Attempt int       `json:"attempt"`
	Seq     int       `json:"seq"`
	Kind    string    `json:"kind"`
	Name    string    `json:"name,omitempty"` // part name for artifacts and sidecars
	Body    []byte    `json:"body"`
	OK      bool      `json:"ok"` // for a Final: false when the worker posted ok=false
	At      time.Time `json:"at"`
}

// Handle is a short worker handle (`wh-` + 8 characters) mapped server
// side to one attempt of one dispatch task
// (docs/contracts.md § Bearer authentication). It names its run: a handle is
// refused by every API that does not serve that run, and once the run has
// ended (docs/security.md § Handles).
type Handle struct {
	Handle string `json:"handle"`
	// RunID is the run the handle was minted for; "" only for a handle
	// stored before handles named their run (its task's run is then its
	// run).
	RunID     string    `json:"run_id,omitempty"`
	TID       string    `json:"task_id"`
	Attempt   int       `json:"attempt"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Degradation is one entry of a run's degradation record: a worker saying
// how it degraded (docs/contracts.md § Request and response bodies). StepRef,
// Attempt and At are injected by the server, never taken from the client; a
// degradation is never step output and never reaches the fold.
type Degradation struct {
	RunID    string    `json:"run_id"`
	StepRef  string    `json:"step_ref"`
	Attempt  int       `json:"attempt"`
	Tool     string    `json:"tool"`
	Error    string    `json:"error"`
	Fallback string    `json:"fallback"`
	Note     string    `json:"note,omitempty"`
	At       time.Time `json:"at"`
}

// RenderSize is the last observed size of an agent's baked system prompt
// (docs/contracts.md § Request and response bodies).
type RenderSize struct {
	Agent string    `json:"agent"`
	Bytes int       `json:"bytes"`
	At    time.Time `json:"at"`
}
