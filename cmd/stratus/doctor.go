package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/doctor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/safetext"
)

// DoctorOptions are the flags of `stratus doctor`.
type DoctorOptions struct {
	IO   IO
	Dir  string
	JSON bool
}

func newDoctorCmd(io IO) *cobra.Command {
	o := &DoctorOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "doctor [--dir DIR] [--json]",
		Short: "Check that this machine can run the engines and tools DIR/.stratus/ names",
		Long: `doctor checks, for each provider in DIR/.stratus/config.yaml, that its command
resolves (on PATH, as a path relative to the provider's dir under DIR, or {stratus},
this binary), that the CLI a Claude or Codex shim drives is installed, that every
"$NAME" its env overlay reads is set in this environment, and asks the known CLIs
(claude, codex, openseek) for their version (5 s each); that every tool registered
in DIR/.stratus/tools/ (and every tool a flow runs) is executable; and that
DIR/.stratus/hmac.key is private (mode 0600).

A provider used by a node of an installed flow (agents.primary for the nodes that
pin nothing, a node's provider:, supervisor.provider) fails its checks; one no node
uses only warns, as do a --version that does not answer and the key's mode.

Exit status: 0 nothing failed (warnings allowed), 1 a check failed, 2 bad flags or
no DIR/.stratus/.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runDoctor(o) },
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the checks as a JSON array of {subject, check, status, detail}")
	return cmd
}

func runDoctor(o *DoctorOptions) error {
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return usageError{err}
	}
	state := filepath.Join(dir, orchestrator.StateDir)
	if st, err := os.Stat(state); err != nil || !st.IsDir() {
		return stratus.Errorf(stratus.ENOTFOUND, "no %s: run `stratus install --dir %s` first, or give the --dir that holds it", state, o.Dir)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results := doctor.Run(ctx, doctor.Options{
		WorkDir:    dir,
		ConfigPath: filepath.Join(state, orchestrator.ConfigFile),
		FlowsDir:   filepath.Join(state, orchestrator.FlowsDir),
		ToolsDir:   filepath.Join(state, orchestrator.ToolsDir),
		KeyPath:    filepath.Join(state, orchestrator.KeyFile),
	})
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(o.IO.Out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tCHECK\tSTATUS\tDETAIL")
		counts := map[string]int{}
		for _, r := range results {
			counts[r.Status]++
			// A detail may quote an engine's own output (its --version
			// line): one cell, escaped (docs/security.md § Text an engine wrote).
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", safetext.Line(r.Subject), r.Check, r.Status, safetext.Line(r.Detail))
		}
		tw.Flush()
		fmt.Fprintf(o.IO.Out, "%d ok, %d warnings, %d failed\n", counts[doctor.OK], counts[doctor.Warn], counts[doctor.Fail])
	}
	if doctor.Failed(results) {
		return &exitError{code: ExitFailed}
	}
	return nil
}

// providerProblems are validate's problems with the providers a run of f
// would use (doctor.FlowProviders): errors for what makes an embedded run
// refuse to start on this machine (orchestrator.LaunchPreflight, the same
// check), then doctor's other provider checks, without the --version
// probe, as warnings. None without a config.
func providerProblems(workDir, cfgPath string, cfg *config.Config, f *flow.Flow) []flow.Problem {
	if cfg == nil {
		return nil
	}
	if abs, err := filepath.Abs(workDir); err == nil {
		workDir = abs
	}
	out := orchestrator.LaunchPreflight(workDir, f, cfg, nil)
	fatal := map[string]bool{}
	for i := range out {
		fatal[out[i].Path] = true
		out[i].Message += " (an embedded `stratus run` refuses to start; with --target aws the engines start in the worker's environment instead)"
	}
	uses := doctor.FlowProviders(cfg, f, nil)
	for _, name := range cfg.ProviderNames() {
		users := uses[name]
		if len(users) == 0 {
			continue
		}
		for _, r := range doctor.CheckProvider(doctor.Env{}, workDir, name, cfg.Agents.Providers[name]) {
			if r.Status == doctor.OK || fatal[r.Field] {
				continue
			}
			who := strings.Join(users, ", ")
			if len(users) > 3 {
				who = fmt.Sprintf("%s and %d more", strings.Join(users[:3], ", "), len(users)-3)
			}
			out = append(out, flow.Problem{File: cfgPath, Path: r.Field,
				Message: fmt.Sprintf("provider %s (used by %s): %s", name, who, r.Detail)})
		}
	}
	return out
}

// checkCommandProblems are validate's warnings for the check commands of
// config.yaml that do not start on this machine (doctor.CheckCommands),
// when f has a checks node; none without a config.
func checkCommandProblems(workDir, cfgPath string, cfg *config.Config, f *flow.Flow) []flow.Problem {
	if cfg == nil || !slices.ContainsFunc(f.Nodes, func(n flow.Node) bool { return n.Kind == flow.KindChecks }) {
		return nil
	}
	if abs, err := filepath.Abs(workDir); err == nil {
		workDir = abs
	}
	var out []flow.Problem
	for _, r := range doctor.CheckCommands(workDir, cfg, []*flow.Flow{f}) {
		if r.Status == doctor.OK {
			continue
		}
		out = append(out, flow.Problem{File: cfgPath, Path: r.Field, Message: fmt.Sprintf("%s: %s (with --target aws the runner image's PATH is what counts)", r.Subject, r.Detail)})
	}
	return out
}

// keyModeNote is validate's note on an HMAC key others may read; "" when
// it is private or absent.
func keyModeNote(path string) string {
	if r := doctor.KeyMode(path); r.Status != doctor.OK {
		return r.Detail
	}
	return ""
}
