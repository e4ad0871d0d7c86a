// Package runcheck holds the checks a run passes before it starts, on
// either runtime (docs/contracts.md § Fatal validation): the flow with the
// operator config and the tools dir, the role files of the nodes the task
// will run, and what flow validation alone cannot see (Preflight). It
// starts nothing and reads only the files it is given, so the claim
// function checks a task file on a stack as `stratus run` checks it here.
package runcheck

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// Preflight checks what flow validation alone cannot, before anything runs:
// that this build can run every checks node's checker (only the names
// nodeexec.Supported reports run; dependency_scan is refused), that every
// provider a node pins (or the task hints, nodes.<id>.provider) is in
// agents.allowed and has a launch spec (docs/contracts.md § Fatal validation,
// config consistency), and that the task's nodes overrides name nodes of the
// flow (worc: "an id absent from the flow ends the task failed"). tk may be
// nil (validate). It returns every problem found; all are fatal for a run.
// Every node kind the flow format knows runs, so an unknown kind is
// flow.Validate's to report (once: "kind ... is not allowed"), never
// Preflight's.
func Preflight(fl *flow.Flow, cfg *config.Config, tk *task.Task) []flow.Problem {
	var probs []flow.Problem
	at := func(n flow.Node, key string) flow.Problem {
		pos := n.Pos
		if p, ok := n.Fields[key]; ok {
			pos = p
		}
		return flow.Problem{File: fl.File, Line: pos.Line, Col: pos.Col, Path: fmt.Sprintf("nodes[%d].%s", n.Index, key), Fatal: true}
	}
	for _, n := range fl.Nodes {
		if n.Kind == flow.KindChecks && n.Checker != "" && !nodeexec.Supported(n.Checker) {
			p := at(n, "checker")
			p.Message = fmt.Sprintf("node %s: checker %s is not supported by this build of Stratus; supported: %s, %s",
				n.ID, n.Checker, nodeexec.CommandProfile, nodeexec.Citation)
			probs = append(probs, p)
		}
		if n.Provider != "" && cfg != nil {
			if _, _, err := cfg.Provider(n.Provider); err != nil {
				p := at(n, "provider")
				p.Message = fmt.Sprintf("node %s: %s", n.ID, stratus.ErrorMessage(err))
				probs = append(probs, p)
			}
		}
	}
	if tk == nil {
		return probs
	}
	// The task branch is never the base its pull request goes into:
	// publishing it would push the run straight onto the base
	// (README.md § Publishing).
	if b, _ := tk.Front["branch_name"].(string); b != "" && cfg != nil && b == cfg.Git.Base() && PullRequestFlow(fl) {
		probs = append(probs, flow.Problem{File: tk.Path, Path: "branch_name", Fatal: true,
			Message: fmt.Sprintf("branch_name %q is git.pr_base, the branch the run's pull request goes into; give the task a branch of its own (such as stratus/%s), or leave branch_name out", b, tk.ID)})
	}
	nodes, _ := tk.Front["nodes"].(map[string]any)
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if fl.Node(id) == nil {
			probs = append(probs, flow.Problem{File: tk.Path, Path: "nodes." + id, Fatal: true,
				Message: fmt.Sprintf("nodes.%s: flow %s has no node %q", id, fl.TaskType, id)})
			continue
		}
		o, _ := nodes[id].(map[string]any)
		if p, ok := o["provider"].(string); ok && p != "" && cfg != nil {
			if _, _, err := cfg.Provider(p); err != nil {
				probs = append(probs, flow.Problem{File: tk.Path, Path: "nodes." + id + ".provider", Fatal: true,
					Message: fmt.Sprintf("nodes.%s.provider: %s", id, stratus.ErrorMessage(err))})
			}
		}
	}
	return probs
}

// CheckRun is the validation a run needs before it starts
// (docs/contracts.md § Fatal validation, "at flow dispatch"): all three
// layers of flow.Validate with the operator config and the tools dir, plus,
// for every node the task will run (enabled and not gated by a `when` fact),
// a role file that exists. A missing prompt of a `when`-gated node, a
// resume_role_file or a supervisor prompt is a warning logged on warn: the
// node fails if it runs, and the supervisor falls back to its built-in
// instruction. The fatal problems are one EINVALID listing each.
func CheckRun(fl *flow.Flow, flowsDir, toolsDir string, cfg *config.Config, tk *task.Task, warn *slog.Logger) error {
	probs := flow.Validate(fl, flow.ValidateOptions{RoleFileRoot: flowsDir, Config: cfg, ToolsDir: toolsDir})
	for _, m := range flow.MissingRoleFiles(fl, flowsDir) {
		if RoleFileRequired(fl, m, tk) {
			probs = append(probs, m.Problem)
			continue
		}
		warn.Warn(m.Problem.Message)
	}
	return fatalError(fl, probs)
}

// RoleFileRequired reports whether a missing prompt file makes a run
// refuse to start: the role_file of a node the task will run (not gated by
// a `when` fact, not disabled by the task's nodes.<id>.enabled: false; tk
// nil is a task that disables nothing). Any other missing prompt is a
// warning. CheckRun and `stratus validate` share this rule, so validate
// reports as an error exactly what run refuses.
func RoleFileRequired(fl *flow.Flow, m flow.MissingRoleFile, tk *task.Task) bool {
	n := fl.Node(m.Node)
	return n != nil && m.Field == "role_file" && n.When == nil && (tk == nil || worker.NodeEnabled(tk, n.ID))
}

// Check runs the fatal validation of a flow; its problems are one EINVALID.
func Check(fl *flow.Flow, flowsDir string) error {
	return fatalError(fl, flow.Validate(fl, flow.ValidateOptions{RoleFileRoot: flowsDir}))
}

// fatalError is one EINVALID listing the fatal problems, one per line; nil
// when there is none.
func fatalError(fl *flow.Flow, probs []flow.Problem) error {
	var msg string
	for _, p := range probs {
		if p.Fatal {
			msg += "\n  " + p.String()
		}
	}
	if msg != "" {
		return stratus.Errorf(stratus.EINVALID, "flow %s is invalid:%s", fl.TaskType, msg)
	}
	return nil
}

// PullRequestFlow reports whether some publish node of fl opens a pull
// request (report.PullRequestPolicy).
func PullRequestFlow(fl *flow.Flow) bool {
	for i := range fl.Nodes {
		if report.PullRequestPolicy(fl, &fl.Nodes[i]) != "" {
			return true
		}
	}
	return false
}

// Task is CheckRun then Preflight of task tk through flow fl: everything a
// run of it is refused for before anything is written. Errors: CheckRun's
// EINVALID; EINVALID listing Preflight's problems, one a line.
func Task(fl *flow.Flow, flowsDir, toolsDir string, cfg *config.Config, tk *task.Task, warn *slog.Logger) error {
	if err := CheckRun(fl, flowsDir, toolsDir, cfg, tk, warn); err != nil {
		return err
	}
	if probs := Preflight(fl, cfg, tk); len(probs) > 0 {
		var lines []string
		for _, p := range probs {
			lines = append(lines, p.String())
		}
		return stratus.Errorf(stratus.EINVALID, "task %s cannot run through flow %s:\n  %s", tk.ID, fl.TaskType, strings.Join(lines, "\n  "))
	}
	return nil
}
