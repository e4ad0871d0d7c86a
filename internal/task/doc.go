// Package task reads worc task files: Markdown that opens with YAML front
// matter between two `---` lines. A task's id is the run's {task_id} and
// becomes a directory name, so it must be a portable token; its task_type
// selects the flow (absent means "implementation").
//
// What it owns: splitting front matter from body, the allowlist of the 17
// front-matter keys and their types, the id rule, the per-node overrides
// (nodes.<id>.enabled/model/reasoning/provider) and worc's defensive scan
// of front-matter values. The authority is
// worc's guide/skills/worc-task/SKILL.md § The task contract
// and § Hard rules; docs/architecture.md § Vocabulary (Task);
// docs/contracts.md § Flows and task types (a task only names its flow, never
// edits it) and § Prompt audit (the per-task override lives in front matter).
//
// What it deliberately does not do: check that task_type names an
// installed flow (flow.Load does), that nodes.<id> names a node of that
// flow, that depends_on tasks are merged, or interpret the body sections
// (Description, Acceptance criteria); nor enforce worc's file-size caps.
package task
