package supervisor

import (
	"fmt"
	"strings"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

// BuiltinRole is the layer's instruction when its role file is missing or
// unreadable (docs/contracts.md § The supervisor: "a missing/unreadable file
// falls back to a minimal built-in instruction").
const BuiltinRole = `You are the read-only supervisor of this task: an advisory layer above the flow. You never edit files, never request rework and never change the route. Note concerns, risks and follow-ups so a human can act on them.`

// BuiltinFinalize is the finalize emphasis when the flow names no
// finalize_role_file or it cannot be read.
const BuiltinFinalize = `Close out the task: write a short plain-language summary of the whole run for a reviewer who reads it as the pull-request body — what was done, how it works, how it integrates, and why. Ground every claim in the packet; if something is absent from it, say so plainly instead of inferring it.`

// RoleFiles returns the flow-dir-relative role files of the observe and
// finalize turns: the flow's supervisor.role_file, else config's
// supervisor.role_file; the finalize emphasis is the flow's
// finalize_role_file ("" when it names none).
func RoleFiles(cfg config.Supervisor, fl *flow.Flow) (role, finalize string) {
	role = cfg.RoleFile
	if fl != nil && fl.Supervisor != nil {
		if fl.Supervisor.RoleFile != "" {
			role = fl.Supervisor.RoleFile
		}
		finalize = fl.Supervisor.FinalizeRoleFile
	}
	return role, finalize
}

// FinalizeInput is what the finalize prompt names.
type FinalizeInput struct {
	Role, Emphasis    string // rendered role texts; "" = the built-in ones
	TaskID, TaskTitle string
	TaskPath, WorkDir string
	Flow, RunID       string
	PacketPath        string // absolute
	EmitFollowUps     bool
}

// FinalizePrompt composes the finalize turn's prompt: the layer's role,
// the finalize emphasis, then a context section naming the packet and what
// to return (docs/contracts.md § What the supervisor layer does).
func FinalizePrompt(in FinalizeInput) string {
	var b strings.Builder
	b.WriteString(orText(strings.TrimSpace(in.Role), BuiltinRole))
	b.WriteString("\n\n")
	b.WriteString(orText(strings.TrimSpace(in.Emphasis), BuiltinFinalize))
	b.WriteString("\n\n## Context\n\n")
	fmt.Fprintf(&b, "- Task: %s (`%s`), task file `%s`\n", in.TaskTitle, in.TaskID, in.TaskPath)
	fmt.Fprintf(&b, "- Flow `%s`, run `%s`; work dir `%s`\n", in.Flow, in.RunID, in.WorkDir)
	fmt.Fprintf(&b, "- Packet: `%s` — the run's recorded facts: every executed step in order with its outcome, each evaluator's verdict and findings, the checks, the changed paths and a digest of each step's own output. This is a fresh session: read the packet first.\n", in.PacketPath)
	b.WriteString("\n## What to return\n\n")
	fmt.Fprintf(&b, "Return the summary itself as your final report: Markdown prose only, a short lead paragraph then a few `##` sections. A summary under %d characters is discarded and replaced by a mechanical report of the run. ", report.CollapseFloor)
	b.WriteString("Do not start with a top-level `#` heading (the task title is added for you), do not wrap the text in a code fence, and never paste tags such as `<follow_ups>` or `<memory_delta>`. ")
	b.WriteString("Do not write the sections \"## Follow-ups\", \"## Pipeline nodes skipped\", \"## Provider fallbacks\" or \"## Run cost\": they are appended from the recorded facts. ")
	b.WriteString("The packet's accepted_findings are merged into the follow-ups for you: do not restate them.\n")
	if in.EmitFollowUps {
		b.WriteString("\nTo add follow-ups of your own, grounded in the packet, return instead one JSON object: {\"summary\": \"<the Markdown prose>\", \"follow_ups\": [{\"title\": \"…\", \"rationale\": \"…\", \"action_hint\": \"…\"}]}.\n")
	}
	return b.String()
}

// ObserveInput is what an observation prompt names.
type ObserveInput struct {
	Role              string // rendered role text; "" = the built-in one
	TaskID, TaskTitle string
	TaskPath, WorkDir string
	StepRef, Node     string
	Kind, Outcome     string
	Reason            string
	Why               string // why this step is observed (Decide)
	OutputPath        string // the step's projection, "" when it has none
}

// ObservePrompt composes an observation turn's prompt: the layer's role,
// the observed step and why it is observed, and what to return — a short
// advisory note (docs/contracts.md § What the supervisor layer does).
func ObservePrompt(in ObserveInput) string {
	var b strings.Builder
	b.WriteString(orText(strings.TrimSpace(in.Role), BuiltinRole))
	b.WriteString("\n\n## Context\n\n")
	fmt.Fprintf(&b, "- Task: %s (`%s`), task file `%s`; work dir `%s`\n", in.TaskTitle, in.TaskID, in.TaskPath, in.WorkDir)
	fmt.Fprintf(&b, "- Observed step: %s (%s node `%s`), outcome **%s**", in.StepRef, in.Kind, in.Node, in.Outcome)
	if in.Reason != "" {
		fmt.Fprintf(&b, ": %s", strings.Join(strings.Fields(in.Reason), " "))
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "- Why it is observed: %s\n", in.Why)
	if in.OutputPath != "" {
		fmt.Fprintf(&b, "- Its output: `%s`\n", in.OutputPath)
	}
	b.WriteString("\n## What to return\n\n")
	b.WriteString("A short advisory note in Markdown: what is notable about this step's result (gaps, risks, things to verify), and whether the run is repeating the same failure or drifting beyond the task's scope. The note is recorded for a human; it never routes, reworks or blocks the run.\n")
	return b.String()
}
