package orchestrator

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/doctor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/task"
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

// LaunchPreflight is an embedded run's check of the engines it will start, on
// this machine, before anything runs: every provider the run uses
// (doctor.FlowProviders: each enabled agent and evaluator node's, and the
// supervisor's) must have a command that resolves (on PATH, as a path
// relative to the provider's dir under dir, or {stratus}) and every "$NAME"
// of its env overlay set here. Each problem names the provider, the config
// field and what is valid; all are fatal. Only for embedded runs: on AWS the
// engines start in the worker's environment.
func LaunchPreflight(dir string, fl *flow.Flow, cfg *config.Config, tk *task.Task) []flow.Problem {
	var front map[string]any
	if tk != nil {
		front = tk.Front
	}
	var probs []flow.Problem
	for _, lp := range doctor.LaunchProblems(doctor.Env{}, dir, cfg, fl, front) {
		probs = append(probs, flow.Problem{File: filepath.Join(dir, StateDir, ConfigFile), Path: lp.Field, Fatal: true,
			Message: fmt.Sprintf("provider %s (used by %s): %s", lp.Provider, usersOf(lp.Users), lp.Detail)})
	}
	return probs
}

// usersOf lists who uses a provider, the first three and a count of the rest.
func usersOf(users []string) string {
	if len(users) <= 3 {
		return strings.Join(users, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(users[:3], ", "), len(users)-3)
}
