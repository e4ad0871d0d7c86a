package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/engine"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/worcimport"
)

// InstallOptions are the flags of `stratus install`.
type InstallOptions struct {
	IO       IO
	Dir      string
	Primary  string
	Scenario string
	Force    bool
	// FromWorc is a worc home (.worc) to import.
	FromWorc string
	// Reconfigure refreshes the built-in flows after snapshotting flows/
	// and tools/ (docs/contracts.md § Flows and task types).
	Reconfigure bool
	now         func() time.Time
}

func newInstallCmd(io IO) *cobra.Command {
	o := &InstallOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "install [--dir DIR]",
		Short: "Write DIR/.stratus/config.yaml and editable copies of the built-in flows",
		Long: `install writes DIR/.stratus/config.yaml and DIR/.stratus/flows/ with Stratus's
built-in flows and their role files as editable copies: the only copies a run
reads. Existing files are kept unless --force is given.

It also writes DIR/.stratus/.gitignore (appended to one that exists, once),
which keeps Stratus's runtime files out of git: the store, hmac.key, logs,
locks, runs, uploads, ctx dirs, backups. Commit .stratus/.gitignore,
config.yaml, flows/ and tools/ (and scenario.yaml) with your project.

--from-worc PATH/.worc imports an existing worc setup: its flows and role files
(unchanged; a worc flow named like a built-in replaces it, as worc's own rule
says), its tools/, and a config.yaml mapped from worc's (agents.allowed and the
primary, each provider's model, reasoning, timeout and turn cap, max_fix_cycles,
the decomposition gate, checks command sets, security allowed_environment and
strict_isolation, supervisor, hitl, prompt_audit). Every worc key it could not
map is listed with why.

--reconfigure refreshes the built-in flows to this binary's version, after
moving flows/ and tools/ aside to flows.bak-<UTC> and tools.bak-<UTC>; the
newest three snapshots of each are kept (a directory named otherwise is never
removed). config.yaml is kept.`,
		Args:        cobra.NoArgs,
		Annotations: map[string]string{dirMayBeMade: "yes"},
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("from-worc") && o.FromWorc == "" {
				return usageError{fmt.Errorf(`--from-worc "": want the path of a worc home (PATH/.worc, holding config.yaml and flows/)`)}
			}
			if o.FromWorc != "" && o.Reconfigure {
				return usageError{fmt.Errorf("--from-worc and --reconfigure are exclusive; give one")}
			}
			return runInstall(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory to install into")
	cmd.Flags().StringVar(&o.Primary, "primary", "", "provider every node runs on (echo, script, openseek, or one you added to config.yaml); rewrites config.yaml")
	cmd.Flags().StringVar(&o.Scenario, "scenario", "", "scenario file for the script engine, copied to .stratus/scenario.yaml")
	cmd.Flags().BoolVar(&o.Force, "force", false, "overwrite existing config and flow files")
	cmd.Flags().StringVar(&o.FromWorc, "from-worc", "", "import a worc home (PATH/.worc): its flows, tools and a mapped config.yaml")
	cmd.Flags().BoolVar(&o.Reconfigure, "reconfigure", false, "refresh the built-in flows, snapshotting flows/ and tools/ first")
	return cmd
}

func runInstall(o *InstallOptions) error {
	// The work dir is the user's project: made as any project directory
	// is (0755 before the umask), only .stratus/ in it is private
	// (docs/security.md § Files under .stratus).
	if err := os.MkdirAll(o.Dir, projectDirPerm); err != nil {
		return fmt.Errorf("make the work dir: %w", err)
	}
	// An existing state dir is tightened first; a new one is made 0700
	// by writeFile (docs/security.md § Files under .stratus).
	if state := filepath.Join(o.Dir, orchestrator.StateDir); exists(state) {
		if err := statedir.Secure(state); err != nil {
			return err
		}
	}
	if o.FromWorc != "" {
		return runInstallFromWorc(o)
	}
	if o.Reconfigure {
		return runReconfigure(o)
	}
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	cfgPath := filepath.Join(state, orchestrator.ConfigFile)
	cfg := config.Default()
	existing := false
	if _, err := os.Stat(cfgPath); err == nil && !o.Force {
		if cfg, err = config.Load(cfgPath); err != nil {
			return err
		}
		existing = true
	}
	if o.Primary != "" {
		if _, _, err := cfg.Provider(o.Primary); err != nil {
			return usageError{fmt.Errorf("--primary: %w", err)}
		}
		cfg.Agents.Primary = o.Primary
	}
	if o.Scenario != "" {
		if _, err := engine.LoadScenario(o.Scenario); err != nil {
			return usageError{fmt.Errorf("--scenario: %w", err)}
		}
		data, err := inputfile.ReadFile("--scenario", o.Scenario)
		if err != nil {
			return usageError{fmt.Errorf("--scenario: %w", err)}
		}
		if err := writeFile(filepath.Join(state, "scenario.yaml"), data, true); err != nil {
			return err
		}
	}
	// An existing config is kept byte for byte (comments included) unless
	// a flag asks for a change.
	if !existing || o.Primary != "" {
		data, err := config.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := writeFile(cfgPath, data, true); err != nil {
			return err
		}
	}
	flows, n, err := installBuiltins(state, o.Force)
	if err != nil {
		return err
	}
	what := english.Plural(len(flows), "flow")
	if len(flows) == 0 {
		fmt.Fprintf(o.IO.Out, "installed into %s: config.yaml (primary %s); the flows under flows/ kept as they are (--force replaces them)\n", state, cfg.Agents.Primary)
	} else {
		what += " (" + strings.Join(flows, ", ") + fmt.Sprintf("; %d files)", n)
		fmt.Fprintf(o.IO.Out, "installed into %s: config.yaml (primary %s), %s under flows/\n", state, cfg.Agents.Primary, what)
	}
	return installGitIgnore(o.IO, state)
}

// installGitIgnore writes .stratus/.gitignore (appended to an existing
// one, once: statedir.WriteGitIgnore) and says which of the state dir's
// files to commit (README § Workspaces).
func installGitIgnore(io IO, state string) error {
	wrote, err := statedir.WriteGitIgnore(state)
	if err != nil {
		return err
	}
	var commit []string
	for _, name := range statedir.Committed() {
		fi, err := os.Stat(filepath.Join(state, name))
		if err != nil {
			continue
		}
		name = orchestrator.StateDir + "/" + name
		if fi.IsDir() {
			name += "/"
		}
		commit = append(commit, name)
	}
	how := "has the lines that keep"
	if wrote {
		how = "now keeps"
	}
	fmt.Fprintf(io.Out, "commit with your project: %s; %s/%s %s the rest (the store, hmac.key, logs, runs) out of git\n",
		strings.Join(commit, ", "), orchestrator.StateDir, statedir.GitIgnoreName, how)
	return nil
}

// projectDirPerm is the mode install makes a missing work dir with.
const projectDirPerm os.FileMode = 0o755

// writeFile writes a file of the state dir, the owner's alone, as are the
// directories it makes (docs/security.md § Files under .stratus); an
// existing file only when overwrite.
func writeFile(path string, data []byte, overwrite bool) error {
	if err := os.MkdirAll(filepath.Dir(path), statedir.DirPerm); err != nil {
		return err
	}
	if !overwrite {
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.WriteFile(path, data, statedir.FilePerm)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// runInstallFromWorc imports a worc home: the built-in flows first, then
// worc's flows over them and its tools, and config.yaml mapped from worc's
// (worcimport), validated before it is written.
func runInstallFromWorc(o *InstallOptions) error {
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	cfgPath := filepath.Join(state, orchestrator.ConfigFile)
	if _, err := os.Stat(cfgPath); err == nil && !o.Force {
		return usageError{fmt.Errorf("%s exists; --from-worc writes a new one: give --force to replace it (its flows are replaced only where worc has a flow of the same file)", cfgPath)}
	}
	res, err := worcimport.Import(o.FromWorc, config.Default(), builtin.Names)
	if err != nil {
		return usageError{err}
	}
	if o.Primary != "" {
		res.Config.Agents.Primary = o.Primary
	}
	data, err := config.Marshal(res.Config)
	if err != nil {
		return err
	}
	if _, err := config.Parse(cfgPath, data); err != nil {
		return usageError{fmt.Errorf("the config mapped from %s is not valid: %w", o.FromWorc, err)}
	}
	if _, _, err := installBuiltins(state, false); err != nil {
		return err
	}
	for _, f := range res.Flows {
		if err := writeFile(filepath.Join(state, orchestrator.FlowsDir, filepath.FromSlash(f.Path)), f.Body, true); err != nil {
			return err
		}
	}
	for _, f := range res.Tools {
		p := filepath.Join(state, "tools", filepath.FromSlash(f.Path))
		if err := writeFile(p, f.Body, true); err != nil {
			return err
		}
		if f.Executable {
			if err := os.Chmod(p, statedir.ExecPerm); err != nil {
				return err
			}
		}
	}
	if err := writeFile(cfgPath, data, true); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "installed into %s from %s: config.yaml (primary %s)\n%s", state, o.FromWorc, res.Config.Agents.Primary, res.Summary())
	if err := installGitIgnore(o.IO, state); err != nil {
		return err
	}
	// An imported flow that will not run is said now, not at its first run.
	flowsDir := filepath.Join(state, orchestrator.FlowsDir)
	opt := flow.ValidateOptions{RoleFileRoot: flowsDir, Config: res.Config, ToolsDir: filepath.Join(state, orchestrator.ToolsDir)}
	for _, name := range res.Names {
		f, err := flow.Load(flowsDir, name)
		bad := err != nil
		if !bad {
			bad = slices.ContainsFunc(flow.Validate(f, opt), func(p flow.Problem) bool { return p.Fatal })
		}
		if bad {
			fmt.Fprintf(o.IO.Err, "stratus: warning: imported flow %s does not validate; `stratus validate %s --dir %s` lists each problem\n", name, name, o.Dir)
		}
	}
	return nil
}

// installBuiltins writes the built-in flows under state/flows, an existing
// file only when overwrite, and returns the flows (by name) and the number
// of files it wrote.
func installBuiltins(state string, overwrite bool) (flows []string, files int, err error) {
	err = fs.WalkDir(builtin.Flows, "flows", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("flows", p)
		dst := filepath.Join(state, orchestrator.FlowsDir, rel)
		if _, err := os.Stat(dst); err == nil && !overwrite {
			return nil
		}
		data, err := builtin.Flows.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		if filepath.Dir(rel) == "." && strings.HasSuffix(rel, ".yaml") {
			flows = append(flows, strings.TrimSuffix(rel, ".yaml"))
		}
		return writeFile(dst, data, true)
	})
	return flows, files, err
}

// snapshotStamp is the fixed-width UTC stamp of a snapshot's name.
const snapshotStamp = "20060102T150405Z"

// KeepSnapshots is how many flows.bak-* and tools.bak-* snapshots
// --reconfigure keeps of each.
const KeepSnapshots = 3

// runReconfigure refreshes the built-in flows
// (docs/contracts.md § Flows and task types; worc's install --reconfigure):
// flows/ and tools/ move to <dir>.bak-<UTC>, the newest KeepSnapshots of each
// are kept, and the built-ins are written afresh. config.yaml is kept.
func runReconfigure(o *InstallOptions) error {
	state := filepath.Join(o.Dir, orchestrator.StateDir)
	if _, err := os.Stat(filepath.Join(state, orchestrator.ConfigFile)); err != nil {
		return usageError{fmt.Errorf("nothing to reconfigure: %s has no config.yaml (stratus install first)", state)}
	}
	now := time.Now
	if o.now != nil {
		now = o.now
	}
	stamp := now().UTC().Format(snapshotStamp)
	var moved []string
	for _, name := range []string{orchestrator.FlowsDir, "tools"} {
		src := filepath.Join(state, name)
		if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
			continue
		}
		dst := src + ".bak-" + stamp
		if _, err := os.Stat(dst); err == nil {
			return fmt.Errorf("%s exists: a reconfigure ran this second; try again", dst)
		}
		if err := os.Rename(src, dst); err != nil {
			return err
		}
		moved = append(moved, dst)
		if err := pruneSnapshots(state, name); err != nil {
			return err
		}
	}
	if _, _, err := installBuiltins(state, true); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "reconfigured %s: built-in flows (%s) refreshed; snapshots: %s (the newest %d of each kept)\n", state, strings.Join(builtin.Names, ", "), strings.Join(moved, ", "), KeepSnapshots)
	return installGitIgnore(o.IO, state)
}

// pruneSnapshots removes all but the newest KeepSnapshots <name>.bak-<UTC>
// directories of state; a name that is not exactly that shape (one an
// operator made by hand) is never removed.
func pruneSnapshots(state, name string) error {
	entries, err := os.ReadDir(state)
	if err != nil {
		return err
	}
	var snaps []string
	for _, e := range entries {
		stamp, ok := strings.CutPrefix(e.Name(), name+".bak-")
		if !ok || !e.IsDir() {
			continue
		}
		if _, err := time.Parse(snapshotStamp, stamp); err != nil || len(stamp) != len(snapshotStamp) {
			continue
		}
		snaps = append(snaps, e.Name())
	}
	sort.Strings(snaps) // the fixed-width stamp sorts by time
	for len(snaps) > KeepSnapshots {
		if err := os.RemoveAll(filepath.Join(state, snaps[0])); err != nil {
			return err
		}
		snaps = snaps[1:]
	}
	return nil
}
