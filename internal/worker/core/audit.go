package core

// The prompt audit (docs/contracts.md § Prompt audit): when it is on, every
// agent and evaluator step records who received what prompt, under
// .stratus/logs/<task>/prompt-audit/: one Markdown file per step run,
// <ordinal:06d>-<node>.md (the step's position among the run's steps, so a
// lexical sort is chronological), and one JSON line per step run appended to
// timeline.jsonl, prompt included. Both are redacted like rendered-prompt.md.

// TimelineFile is the machine-readable half of the prompt audit.
const TimelineFile = "timeline.jsonl"

// AuditRecord is the metadata of one step run's prompt audit: the fenced
// JSON header of its Markdown file, and (with Prompt) one line of
// timeline.jsonl.
type AuditRecord struct {
	TaskID  string `json:"task_id"`
	RunID   string `json:"run_id"`
	StepRef string `json:"step_ref"`
	Node    string `json:"node"`
	Kind    string `json:"kind"`
	Ordinal int    `json:"node_run_id"`
	// Route is where the provider choice came from: primary, flow (the
	// node's provider pin) or task (the task's nodes.<id>.provider).
	Route     string `json:"route"`
	Provider  string `json:"provider"`
	Model     string `json:"model"`
	Reasoning string `json:"reasoning"`
	// ConfiguredModel and ConfiguredReasoning are what config.yaml alone
	// would have used, when the node or the task overrode it; null otherwise.
	ConfiguredModel     *string        `json:"configured_model"`
	ConfiguredReasoning *string        `json:"configured_reasoning"`
	PermissionProfile   string         `json:"permission_profile"`
	NetworkAccess       bool           `json:"network_access"`
	SkillsAllowed       *bool          `json:"skills_allowed"`
	SkillsRequired      []string       `json:"skills_required"`
	Attempts            []AuditAttempt `json:"attempts"`
	Outcome             string         `json:"outcome"`
	EndedAt             string         `json:"ended_at,omitempty"`
	Prompt              string         `json:"prompt,omitempty"` // timeline.jsonl only
}

// AuditAttempt is one agent that ran the prompt.
type AuditAttempt struct {
	Attempt    int     `json:"attempt"`
	Provider   string  `json:"provider"`
	Model      string  `json:"model"`
	Reasoning  string  `json:"reasoning"`
	Status     string  `json:"status"`
	ErrorClass *string `json:"error_class"` // the attempt's terminal when it failed; null otherwise
	Resumed    bool    `json:"resumed"`
}
