package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/publish"
	"github.com/stratusflow/stratus/internal/retry"
	"github.com/stratusflow/stratus/internal/runcheck"
	"github.com/stratusflow/stratus/internal/safetext"
)

// toolsDirName is the tool registry under DIR/.stratus/ (worc's
// .worc/tools/; docs/contracts.md § Tools).
const toolsDirName = "tools"

// ValidateOptions are the flags of `stratus validate`.
type ValidateOptions struct {
	IO    IO
	Names []string
	All   bool
	Dir   string
	Flows string // default DIR/.stratus/flows
	Tools string // default DIR/.stratus/tools
	JSON  bool
}

func newValidateCmd(io IO) *cobra.Command {
	o := &ValidateOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "validate [NAME... | --all]",
		Short: "Validate flows and list every problem that would stop a run",
		Long: `validate loads each named flow (its task_type) from DIR/.stratus/flows/, or the
directory given with --flows, and lists every problem with file:line:column,
sorted by position: the graph-integrity and security-ceiling layers always;
the config-consistency layer when DIR/.stratus/config.yaml exists (providers,
reasoning, Codex network, skills, supervisor.observe.mode); the tool registry
(every tool node's executable in DIR/.stratus/tools/, or --tools); and what a
run checks before it starts: a missing role file of a node not gated by ` + "`when`" + `,
a checker this build cannot run, a provider the flow uses whose command does not
resolve on this machine or whose "$NAME" is unset. Whatever makes ` + "`stratus run`" + `
refuse the flow is an error here. Warnings: the anti-drift lint of role files,
the missing prompts of ` + "`when`" + `-gated nodes and the supervisor, loop budgets, and
the rest of what ` + "`stratus doctor`" + ` finds wrong with those providers.

Each flow ends with one line: "flow NAME: ok", or "flow NAME: N errors, M
warnings". Exit status 1 when there is any error.`,
		RunE: func(_ *cobra.Command, args []string) error {
			o.Names = args
			return runValidate(o)
		},
	}
	cmd.Flags().BoolVar(&o.All, "all", false, "validate every flow in the flows directory")
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/")
	cmd.Flags().StringVar(&o.Flows, "flows", "", "flows directory (default DIR/.stratus/flows)")
	cmd.Flags().StringVar(&o.Tools, "tools", "", "tool registry directory (default DIR/.stratus/tools)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print problems as JSON")
	return cmd
}

// ValidateReport is the output of `validate --json`.
type ValidateReport struct {
	// Config is the config.yaml the config-aware layer read; "" when there
	// was none and that layer was skipped (Notes says so).
	Config string `json:"config"`
	// ConfigErrors are why config.yaml did not load, one problem each
	// ("file:line:col: message"); none when it did, or there is none. Each
	// counts as an error in Fatal.
	ConfigErrors []string     `json:"config_errors,omitempty"`
	ToolsDir     string       `json:"tools_dir"`
	Notes        []string     `json:"notes"`
	Fatal        int          `json:"fatal"`    // errors: what makes run refuse the flow
	Warnings     int          `json:"warnings"` // problems that do not
	Flows        []FlowReport `json:"flows"`
}

// FlowReport is one flow's result in `validate --json`.
type FlowReport struct {
	Flow     string         `json:"flow"`
	Fatal    int            `json:"fatal"`
	Warnings int            `json:"warnings"`
	Problems []flow.Problem `json:"problems"`
}

func runValidate(o *ValidateOptions) error {
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	dir := o.Flows
	if dir == "" {
		dir = filepath.Join(state, orchestrator.FlowsDir)
	}
	names := o.Names
	if o.All {
		if len(names) > 0 {
			return usageError{fmt.Errorf("give flow names or --all, not both")}
		}
		matches, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		for _, m := range matches {
			names = append(names, strings.TrimSuffix(filepath.Base(m), ".yaml"))
		}
		sort.Strings(names)
		if len(names) == 0 {
			return usageError{fmt.Errorf("no flows (*.yaml) in %s", dir)}
		}
	}
	if len(names) == 0 {
		return usageError{fmt.Errorf("name a flow (its task_type) or pass --all")}
	}
	if _, err := os.Stat(dir); err != nil {
		return usageError{fmt.Errorf("flows directory: %w", err)}
	}
	rep := ValidateReport{ToolsDir: o.Tools, Notes: []string{}, Flows: []FlowReport{}}
	if rep.ToolsDir == "" {
		rep.ToolsDir = filepath.Join(state, toolsDirName)
	}
	// With a config at hand, check config consistency too
	// (docs/contracts.md § Fatal validation, third layer); without one, say
	// once that it was skipped.
	cfgPath := filepath.Join(state, orchestrator.ConfigFile)
	cfg, err := config.Load(cfgPath)
	switch {
	case err == nil:
		rep.Config = cfgPath
		// Valid, but worth a word: more provider hops than providers.
		rep.Notes = append(rep.Notes, retry.FromConfig(cfg).Notes()...)
	case stratus.ErrorCode(err) == stratus.ENOTFOUND:
		rep.Notes = append(rep.Notes, fmt.Sprintf("no %s: the config-aware layer (providers, reasoning, Codex network, skills, supervisor.observe.mode, max_fix_cycles) is skipped", cfgPath))
		cfg = nil
	default:
		// A config.yaml that does not load is what validate is for: an
		// error of its own (exit 1, as any error), and the flows are still
		// checked without the config-aware layer, so one run shows all.
		for _, l := range strings.Split(stratus.ErrorMessage(err), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				rep.ConfigErrors = append(rep.ConfigErrors, l)
			}
		}
		rep.Fatal += len(rep.ConfigErrors)
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s does not load: the config-aware layer is skipped until it does", cfgPath))
		cfg = nil
	}
	if n := keyModeNote(filepath.Join(state, orchestrator.KeyFile)); n != "" {
		rep.Notes = append(rep.Notes, n)
	}
	opt := flow.ValidateOptions{RoleFileRoot: dir, Config: cfg, ToolsDir: rep.ToolsDir}
	_, repoErr := gitwork.Open(context.Background(), o.Dir)
	inRepo := repoErr == nil
	remoteName := config.DefaultGitRemote
	if cfg != nil {
		remoteName = cfg.Git.RemoteName()
	}
	for _, name := range names {
		r := FlowReport{Flow: name, Problems: []flow.Problem{}}
		f, err := flow.Load(dir, name)
		var pe *flow.ParseError
		var parsed []flow.Problem
		switch {
		case errors.As(err, &pe):
			// What did parse is checked too (worc: all fatal, all
			// collected), leaving out what restates a parse problem.
			parsed, f = pe.Problems, pe.Flow
		case err != nil:
			// No such flow, or a name that is not a flow's task_type.
			return usageError{err}
		}
		if f != nil {
			r.Problems = append(r.Problems, requiredRoleFiles(f, dir, flow.Validate(f, opt))...)
			// What a run's preflight refuses (a checker this build cannot
			// run, a pinned provider the config does not allow) is an
			// error here too: validate and run agree.
			r.Problems = append(r.Problems, notAlreadyFatal(r.Problems, runcheck.Preflight(f, cfg, nil))...)
			// A pull-request policy Stratus does not act on: said, never silent.
			// Outside a git repository a run works in place and says at its
			// publish step that nothing was pushed.
			if inRepo {
				remote, password := publish.ReadRemote(context.Background(), o.Dir, remoteName)
				r.Problems = append(r.Problems, orchestrator.PublishingWarnings(f, remote, remoteName)...)
				if password && runcheck.PullRequestFlow(f) {
					r.Problems = append(r.Problems, flow.Problem{File: cfgPath, Path: "git.remote",
						Message: fmt.Sprintf("remote %s's URL holds a password, which Stratus never stores or uses (README.md § Publishing): publishing authenticates with GITHUB_TOKEN, GH_TOKEN, `gh auth token` or git's credential helper; take the password out of the URL (git remote set-url %s URL)", remoteName, remoteName)})
				}
			}
			// What `stratus doctor` says of the providers this flow uses:
			// an error where an embedded run refuses to start (its
			// LaunchPreflight), a warning for the rest.
			r.Problems = append(r.Problems, providerProblems(o.Dir, cfgPath, cfg, f)...)
			// A check command that does not start here: a warning (on AWS
			// the runner image's toolchain runs it), said before the run
			// parks at the checks node.
			r.Problems = append(r.Problems, checkCommandProblems(o.Dir, cfgPath, cfg, f)...)
		}
		if f != nil && pe == nil && len(flow.Fatal(r.Problems)) == 0 {
			// The last thing a run does before it starts: compile the flow
			// with the config. What the compiler alone refuses (two loop
			// counters that collide, a state name too long) is an error too.
			r.Problems = append(r.Problems, compileProblems(f, cfg)...)
		}
		r.Problems = append(append([]flow.Problem{}, parsed...), flow.WithoutCascades(pe, r.Problems)...)
		flow.SortProblems(filepath.Join(dir, name+".yaml"), r.Problems)
		for _, p := range r.Problems {
			if p.Fatal {
				r.Fatal++
			} else {
				r.Warnings++
			}
		}
		rep.Fatal += r.Fatal
		rep.Warnings += r.Warnings
		rep.Flows = append(rep.Flows, r)
	}
	if o.JSON {
		enc := json.NewEncoder(o.IO.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, n := range rep.Notes {
			fmt.Fprintf(o.IO.Out, "note: %s\n", safetext.Line(n))
		}
		if len(rep.ConfigErrors) > 0 {
			for _, e := range rep.ConfigErrors {
				fmt.Fprintf(o.IO.Out, "error: %s\n", safetext.Line(e))
			}
			fmt.Fprintf(o.IO.Out, "config %s: %s\n", cfgPath, validateStatus(len(rep.ConfigErrors), 0))
		}
		for _, r := range rep.Flows {
			for _, p := range r.Problems {
				sev := "warning"
				if p.Fatal {
					sev = "error"
				}
				// A problem quotes the flow's files, which an engine working
				// in the work dir can write (docs/security.md § Text an engine wrote).
				fmt.Fprintf(o.IO.Out, "%s: %s\n", sev, safetext.Line(p.String()))
			}
			fmt.Fprintf(o.IO.Out, "flow %s: %s\n", r.Flow, validateStatus(r.Fatal, r.Warnings))
		}
	}
	if rep.Fatal > 0 {
		return &exitError{code: ExitFailed}
	}
	return nil
}

// compileProblems compiles f as a run would (lifecycle.CompileOptions of
// the config, the defaults without one) and returns the compiler's refusal
// as one error located at the flow file; none when it compiles.
func compileProblems(f *flow.Flow, cfg *config.Config) []flow.Problem {
	if cfg == nil {
		cfg = config.Default()
	}
	if _, err := compiler.Compile(f, lifecycle.CompileOptions(cfg)); err != nil {
		return []flow.Problem{{File: f.File, Fatal: true,
			Message: "the flow does not compile, so `stratus run` refuses it: " + stratus.ErrorMessage(err)}}
	}
	return nil
}

// notAlreadyFatal drops from more the problems located where probs already
// has a fatal one (the config layer of flow.Validate and a run's preflight
// both refuse a pinned provider the config does not allow): one error per
// key.
func notAlreadyFatal(probs, more []flow.Problem) []flow.Problem {
	type at struct {
		file, path string
		line, col  int
	}
	seen := map[at]bool{}
	for _, p := range probs {
		if p.Fatal {
			seen[at{p.File, p.Path, p.Line, p.Col}] = true
		}
	}
	var out []flow.Problem
	for _, p := range more {
		if !seen[at{p.File, p.Path, p.Line, p.Col}] {
			out = append(out, p)
		}
	}
	return out
}

// validateStatus is a flow's summary line: "ok" when it has no problem,
// else "N errors, M warnings" (errors are what makes validate exit 1 and
// run refuse the flow).
func validateStatus(errs, warns int) string {
	if errs == 0 && warns == 0 {
		return "ok"
	}
	return english.Plural(errs, "error") + ", " + english.Plural(warns, "warning")
}

// requiredRoleFiles turns the missing-role-file warnings of flow.Validate
// into errors for the prompts a run refuses to start without
// (runcheck.RoleFileRequired with no task: every node not gated by
// `when`), so that validate fails a flow run would refuse.
func requiredRoleFiles(f *flow.Flow, flowsDir string, probs []flow.Problem) []flow.Problem {
	fatal := map[string]flow.Problem{}
	for _, m := range flow.MissingRoleFiles(f, flowsDir) {
		if runcheck.RoleFileRequired(f, m, nil) {
			fatal[m.Problem.Path] = m.Problem
		}
	}
	for i, p := range probs {
		if m, ok := fatal[p.Path]; ok && !p.Fatal && strings.Contains(p.Message, "does not exist") {
			p.Fatal = true
			p.Message = m.Message + "; the node runs on every task that does not disable it, so `stratus run` refuses the flow"
			probs[i] = p
		}
	}
	return probs
}
