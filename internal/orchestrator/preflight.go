package orchestrator

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/doctor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/task"
)

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
