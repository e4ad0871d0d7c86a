package core

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/report"
)

// The prompt audit (seed 004 § prompt_audit): when it is on, every agent
// and evaluator step records who received what prompt, under
// .stratus/logs/<task>/prompt-audit/: one Markdown file per step run,
// <ordinal:06d>-<node>.md (the step's position among the run's steps, so a
// lexical sort is chronological), and one JSON line per step run appended to
// timeline.jsonl, prompt included. Both are redacted like
// rendered-prompt.md.

// TimelineFile is the machine-readable half of the prompt audit.
const TimelineFile = "timeline.jsonl"

// auditOn reports whether the run records the prompt audit: the task's
// front matter prompt_audit when it sets one (task wins, both ways), else
// config prompt_audit.
func auditOn(env *RunEnv) bool {
	if env.Task != nil {
		if v, ok := env.Task.Front["prompt_audit"].(bool); ok {
			return v
		}
	}
	return env.Config != nil && env.Config.PromptAudit
}

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

// writeAudit writes the prompt audit of one step run that ended.
func (s *Service) writeAudit(ctx context.Context, run stratus.Run, env *RunEnv, step stratus.Step, ordinal int) error {
	var atts []stratus.Attempt
	for n := 1; ; n++ {
		a, err := s.Store.GetAttempt(ctx, step.TID, n)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			break
		} else if err != nil {
			return err
		}
		atts = append(atts, a)
	}
	if len(atts) == 0 {
		return nil // it never launched: no prompt reached an agent
	}
	settled := atts[len(atts)-1]
	res := settled.Resolved
	rec := AuditRecord{TaskID: run.TaskID, RunID: run.ID, StepRef: step.StepRef, Node: step.Node, Kind: step.Kind, Ordinal: ordinal,
		Route: "primary", Provider: res.Provider, Model: res.Model, Reasoning: res.Reasoning,
		PermissionProfile: res.PermissionProfile, NetworkAccess: res.NetworkAccess, Outcome: step.Verdict, SkillsRequired: []string{}}
	if res.Model != res.Configured.Model {
		m := res.Configured.Model
		rec.ConfiguredModel = &m
	}
	if res.Reasoning != res.Configured.Reasoning {
		r := res.Configured.Reasoning
		rec.ConfiguredReasoning = &r
	}
	if node := env.Flow.Node(step.Node); node != nil {
		if node.Provider != "" {
			rec.Route = "flow"
		}
		rec.SkillsAllowed = node.AllowSkills
		if len(node.Skills) > 0 {
			rec.SkillsRequired = node.Skills
		}
	}
	if p := taskOverrides(env.Task.Front, step.Node)["provider"]; p != "" {
		rec.Route = "task"
	}
	if rec.Outcome == "" {
		rec.Outcome = step.Status
	}
	if !step.EndedAt.IsZero() {
		rec.EndedAt = step.EndedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	for _, a := range atts {
		aa := AuditAttempt{Attempt: a.N, Provider: a.Resolved.Provider, Model: a.Resolved.Model, Reasoning: a.Resolved.Reasoning, Status: a.Status}
		if a.Status == stratus.AttemptFailed {
			class := a.Terminal
			if class == "" {
				class = "Failed"
			}
			aa.ErrorClass = &class
		}
		rec.Attempts = append(rec.Attempts, aa)
	}
	prompt := Redact(settled.Prompt)

	dir := path.Join(report.Dir(run.TaskID), "prompt-audit")
	var md bytes.Buffer
	meta, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintf(&md, "# Prompt audit: %s\n\n```json\n%s\n```\n\n## Prompt\n\n", step.StepRef, meta)
	md.WriteString(prompt) // last and unescaped: its own fences cannot break the header
	if err := s.Files(run).Put(ctx, path.Join(dir, fmt.Sprintf("%06d-%s.md", ordinal, step.Node)), md.Bytes()); err != nil {
		return err
	}

	rec.Prompt = prompt
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	s.sup.mu.Lock()
	defer s.sup.mu.Unlock()
	key := path.Join(dir, TimelineFile)
	old, err := s.Files(run).Get(ctx, key)
	if err != nil && stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return err
	}
	return s.Files(run).Put(ctx, key, append(append(old, line...), '\n'))
}
