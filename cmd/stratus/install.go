package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/engine"
	"github.com/stratusflow/stratus/internal/orchestrator"
)

// InstallOptions are the flags of `stratus install`.
type InstallOptions struct {
	IO       IO
	Dir      string
	Primary  string
	Scenario string
	Force    bool
}

func newInstallCmd(io IO) *cobra.Command {
	o := &InstallOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "install [--dir DIR]",
		Short: "Write DIR/.stratus/config.yaml and editable copies of the built-in flows",
		Long: `install writes DIR/.stratus/config.yaml and DIR/.stratus/flows/ with Stratus's
built-in flows and their role files as editable copies: the only copies a run
reads. Existing files are kept unless --force is given.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runInstall(o) },
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory to install into")
	cmd.Flags().StringVar(&o.Primary, "primary", "", "provider every node runs on (echo, script, openseek, or one you added to config.yaml); rewrites config.yaml")
	cmd.Flags().StringVar(&o.Scenario, "scenario", "", "scenario file for the script engine, copied to .stratus/scenario.yaml")
	cmd.Flags().BoolVar(&o.Force, "force", false, "overwrite existing config and flow files")
	return cmd
}

func runInstall(o *InstallOptions) error {
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
		data, err := os.ReadFile(o.Scenario)
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
	flowsDir := filepath.Join(state, orchestrator.FlowsDir)
	n := 0
	var flows []string
	err := fs.WalkDir(builtin.Flows, "flows", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel("flows", p)
		data, err := builtin.Flows.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(flowsDir, rel)
		if _, err := os.Stat(dst); err == nil && !o.Force {
			return nil
		}
		n++
		if filepath.Dir(rel) == "." && strings.HasSuffix(rel, ".yaml") {
			flows = append(flows, strings.TrimSuffix(rel, ".yaml"))
		}
		return writeFile(dst, data, true)
	})
	if err != nil {
		return err
	}
	what := fmt.Sprintf("%d flows", len(flows))
	if len(flows) == 1 {
		what = "1 flow"
	}
	if len(flows) == 0 {
		fmt.Fprintf(o.IO.Out, "installed into %s: config.yaml (primary %s); the flows under flows/ kept as they are (--force replaces them)\n", state, cfg.Agents.Primary)
		return nil
	}
	what += " (" + strings.Join(flows, ", ") + fmt.Sprintf("; %d files)", n)
	fmt.Fprintf(o.IO.Out, "installed into %s: config.yaml (primary %s), %s under flows/\n", state, cfg.Agents.Primary, what)
	return nil
}

func writeFile(path string, data []byte, overwrite bool) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if !overwrite {
		if _, err := os.Stat(path); err == nil {
			return nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return os.WriteFile(path, data, 0o644)
}
