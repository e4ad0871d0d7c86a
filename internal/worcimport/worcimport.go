// Package worcimport brings an existing worc setup into Stratus: a worc home
// (`.worc/`: config.yaml, flows/ with their role files, tools/) becomes a
// Stratus config and the flows and tools `stratus install --from-worc` writes
// under `.stratus/`. Flows are copied unchanged (Stratus reads worc's flow
// format as is; docs/contracts.md § Flows and task types); a worc flow named
// like a built-in replaces it, as worc's own rule says. config.yaml is mapped
// key by key into config.Config; every key that has no Stratus meaning is
// listed with why, never silently dropped.
package worcimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// File is one file to install, relative to its directory (flows/ or
// tools/), with its mode's executable bit.
type File struct {
	Path       string
	Body       []byte
	Executable bool
}

// Note is one worc config key Stratus did not take, and why.
type Note struct {
	Key, Why string
}

// Result is what an import installs and what it says.
type Result struct {
	Config   *config.Config
	Flows    []File
	Tools    []File
	Names    []string // the flows imported (their task_types), sorted
	Replaced []string // imported flows named like a built-in: they replace it
	Mapped   []string // the worc config keys taken, as dotted paths
	Unmapped []Note   // the keys left out, each with why
}

// MaxFileBytes bounds one imported file.
const MaxFileBytes = 4 << 20

// Import reads worc home dir (a `.worc` directory) over base (the config
// Stratus would install; it is changed) and the built-in flow names.
// Errors: EINVALID naming the path for a directory that is not a worc home
// (no config.yaml and no flows/), an unreadable or invalid config.yaml, a
// file over MaxFileBytes or a link leaving dir.
func Import(dir string, base *config.Config, builtins []string) (*Result, error) {
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "from-worc", "%s is not a directory; valid: a worc home, the .worc directory holding config.yaml and flows/", dir)
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	_, cfgErr := os.Stat(cfgPath)
	_, flowsErr := os.Stat(filepath.Join(dir, "flows"))
	if cfgErr != nil && flowsErr != nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "from-worc", "%s holds neither config.yaml nor flows/; valid: a worc home (.worc)", dir)
	}
	r := &Result{Config: base}
	if cfgErr == nil {
		// A regular file only: a named pipe would block the import forever.
		data, err := inputfile.ReadFile("worc config", cfgPath)
		if err != nil {
			return nil, err
		}
		if err := r.mapConfig(cfgPath, data); err != nil {
			return nil, err
		}
	} else {
		r.Unmapped = append(r.Unmapped, Note{"config.yaml", "absent: Stratus's default config is kept"})
	}
	if r.Flows, err = readTree(filepath.Join(dir, "flows")); err != nil {
		return nil, err
	}
	if r.Tools, err = readTree(filepath.Join(dir, "tools")); err != nil {
		return nil, err
	}
	for _, f := range r.Flows {
		if filepath.Dir(f.Path) == "." && strings.HasSuffix(f.Path, ".yaml") {
			name := strings.TrimSuffix(f.Path, ".yaml")
			r.Names = append(r.Names, name)
			if slices.Contains(builtins, name) {
				r.Replaced = append(r.Replaced, name)
			}
		}
	}
	sort.Strings(r.Names)
	return r, nil
}

// readTree reads every regular file under root (none when root is
// absent); a symbolic link is followed only when it stays inside root.
func readTree(root string) ([]File, error) {
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, err
	}
	var out []File
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		target, err := filepath.EvalSymlinks(p)
		if err != nil {
			return err
		}
		if rel, err := filepath.Rel(real, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return stratus.FieldErrorf(stratus.EINVALID, "from-worc", "%s links outside %s; an import copies only what the worc home holds", p, root)
		}
		fi, err := os.Stat(target)
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		if fi.Size() > MaxFileBytes {
			return stratus.FieldErrorf(stratus.EINVALID, "from-worc", "%s is %d bytes; valid: at most %d", p, fi.Size(), MaxFileBytes)
		}
		body, err := os.ReadFile(target)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(real, p)
		out = append(out, File{Path: filepath.ToSlash(rel), Body: body, Executable: fi.Mode()&0o111 != 0})
		return nil
	})
	return out, err
}

// unmapped explains every worc config key Stratus has no use for.
var unmapped = map[string]string{
	"schema_version": "worc's config format version; Stratus's config has its own",
	"agents.primary": "not a worc key (worc marks its primary with agents.providers.<name>.primary: true, which is imported); set Stratus's agents.primary, or give install --primary",
	"repo":           "Stratus runs in the work dir it is given (--dir); it clones nothing",
	"orchestrator.auto_mode.confirm_next_task": "no chat approvals before a claim: stratus promote is the gate (README.md § Task pool)",
	"telegram":                          "no chat approvals: hitl gates are answered with stratus approve|reject|answer or stratus ui",
	"logging":                           "Stratus logs to stderr and the run's .stratus/logs/",
	"validation":                        "stratus validate runs the same fatal flow validation on demand",
	"skills":                            "Stratus passes a node's skills to the engine; there is no skills registry to configure",
	"memory":                            "Stratus has no cross-task memory store",
	"agents.max_total_fix_iterations":   "Stratus caps loops per run with flow budgets and agents.max_fix_cycles",
	"agents.routing":                    "removed in worc itself (schema_version 11): routing is per node",
	"agents.decomposition.max_subtasks": "the flow's decomposition block bounds the split",
	"security.denied_read_paths":        "Stratus does not sandbox reads; the engines' own sandbox applies",
	"security.denied_commands":          "Stratus does not filter an engine's commands; the engines' own sandbox applies",
	"security.trust_level":              "approval policy of the CLIs; set it in the engine's own settings",
	"security.protected_paths":          "Stratus does not guard paths; the engines' own sandbox applies",
	"security.allow_git_evidence":       "a node's git_evidence grant is honoured from the flow",
	"security.disable_read_isolation":   "Stratus does not sandbox reads",
}

// providerUnmapped explains the provider keys Stratus does not take.
var providerUnmapped = map[string]string{
	"command":             "Stratus drives the Claude Code and Codex CLIs through its shims (stratus engine claude|codex), which run the CLI found on PATH",
	"permission_profile":  "a node's permission profile comes from the flow (its permission_profile under the flow's ceiling)",
	"extra_args":          "give extra CLI flags per node (extra_args in the flow)",
	"sandbox":             "the engines' own sandbox settings apply",
	"max_turns_gate":      "no chat prompts: a turn cap ends the attempt",
	"allow_native_memory": "Stratus does not manage the CLI's native memory",
}

// mapConfig maps worc's config.yaml into r.Config.
func (r *Result) mapConfig(path string, data []byte) error {
	var doc map[string]any
	if err := yamlast.Unmarshal(data, &doc); err != nil {
		return stratus.FieldErrorf(stratus.EINVALID, "from-worc", "%s: %v", path, err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	c := r.Config
	for _, k := range keys {
		v := doc[k]
		switch k {
		case "agents":
			r.mapAgents(asMap(v))
		case "checks":
			var ch config.Checks
			if r.decode(k, v, &ch) {
				c.Checks = ch
			}
		case "security":
			m := asMap(v)
			for _, sk := range sortedKeys(m) {
				full := "security." + sk
				switch sk {
				case "allowed_environment":
					var env []string
					if r.decode(full, m[sk], &env) {
						c.Security.AllowedEnvironment = env
					}
				case "strict_isolation":
					var b bool
					if r.decode(full, m[sk], &b) {
						c.Security.StrictIsolation = &b
					}
				default:
					r.skip(full)
				}
			}
		case "git":
			// worc configuration.md § `git`: the same keys, read the
			// same way (README § Publishing).
			var g config.Git
			if r.decode(k, v, &g) {
				c.Git = g
			}
		case "supervisor":
			var s config.Supervisor
			if r.decode(k, v, &s) {
				c.Supervisor = s
			}
		case "hitl":
			m := asMap(v)
			for _, hk := range sortedKeys(m) {
				if hk == "timeout_seconds" || hk == "timeout_s" {
					var n int
					if r.decode("hitl."+hk, m[hk], &n) {
						c.HITL.TimeoutSeconds = n
					}
				} else {
					r.skip("hitl." + hk)
				}
			}
		case "orchestrator":
			r.mapOrchestrator(asMap(v))
		case "paths":
			// worc configuration.md § paths: the same key and rule
			// (README.md § Task pool).
			var p config.Paths
			if r.decode(k, v, &p) {
				c.Paths = p
			}
		case "prompt_audit":
			var b bool
			if r.decode(k, v, &b) {
				c.PromptAudit = b
			}
		default:
			r.skip(k)
		}
	}
	return nil
}

// mapOrchestrator maps worc's orchestrator block (worc configuration.md §
// orchestrator: the same keys and defaults, README.md § Task pool).
func (r *Result) mapOrchestrator(m map[string]any) {
	o := &r.Config.Orchestrator
	for _, k := range sortedKeys(m) {
		full := "orchestrator." + k
		switch k {
		case "auto_mode":
			am := asMap(m[k])
			for _, ak := range sortedKeys(am) {
				if ak == "enabled" {
					var b bool
					if r.decode(full+".enabled", am[ak], &b) {
						o.AutoMode.Enabled = b
					}
				} else {
					r.skip(full + "." + ak)
				}
			}
		case "poll_interval_seconds":
			var n int
			if r.decode(full, m[k], &n) {
				o.PollIntervalSeconds = &n
			}
		case "queue":
			var q string
			if r.decode(full, m[k], &q) {
				o.Queue = q
			}
		case "max_concurrent_tasks":
			var n int
			if r.decode(full, m[k], &n) {
				o.MaxConcurrentTasks = n
			}
		default:
			r.skip(full)
		}
	}
}

// mapAgents maps worc's agents block: allowed providers, the primary,
// each provider's model, reasoning, timeout and turn cap, the fix cap and
// the decomposition gate.
func (r *Result) mapAgents(m map[string]any) {
	c := r.Config
	for _, k := range sortedKeys(m) {
		full := "agents." + k
		switch k {
		case "allowed":
			var allowed []string
			if !r.decode(full, m[k], &allowed) {
				continue
			}
			var out []string
			for _, p := range allowed {
				if _, ok := c.Agents.Providers[p]; ok {
					out = append(out, p)
				} else {
					r.Unmapped = append(r.Unmapped, Note{full + ": " + p, "Stratus has no provider named " + p})
				}
			}
			// Stratus's bundled engines stay allowed (tests, demos).
			for _, keep := range []string{"echo", "script"} {
				if !slices.Contains(out, keep) {
					out = append(out, keep)
				}
			}
			c.Agents.Allowed = out
		case "providers":
			r.mapProviders(asMap(m[k]))
		case "max_fix_cycles":
			var n int
			if r.decode(full, m[k], &n) {
				c.Agents.MaxFixCycles = n
			}
		case "max_stage_attempts":
			// worc configuration.md § agents: provider hops, primary +
			// fallback; internal/retry walks them.
			var n int
			if r.decode(full, m[k], &n) {
				c.Agents.MaxStageAttempts = &n
			}
		case "retry":
			r.mapRetry(asMap(m[k]))
		case "decomposition":
			d := asMap(m[k])
			for _, dk := range sortedKeys(d) {
				if dk == "enabled" {
					var b bool
					if r.decode(full+".enabled", d[dk], &b) {
						c.Agents.Decomposition.Enabled = b
					}
				} else {
					r.skip(full + "." + dk)
				}
			}
		default:
			r.skip(full)
		}
	}
}

// mapRetry maps worc's agents.retry (worc configuration.md §
// agents.retry) key by key: the same names, units and meaning in
// Stratus (config.Retry).
func (r *Result) mapRetry(m map[string]any) {
	rt := &r.Config.Agents.Retry
	for _, k := range sortedKeys(m) {
		full := "agents.retry." + k
		switch k {
		case "max_attempts":
			var n int
			if r.decode(full, m[k], &n) {
				rt.MaxAttempts = &n
			}
		case "base_delay_s", "max_delay_s", "max_blocked_s":
			var x float64
			if !r.decode(full, m[k], &x) {
				continue
			}
			switch k {
			case "base_delay_s":
				rt.BaseDelayS = &x
			case "max_delay_s":
				rt.MaxDelayS = &x
			default:
				rt.MaxBlockedS = &x
			}
		default:
			r.skip(full)
		}
	}
}

func (r *Result) mapProviders(m map[string]any) {
	c := r.Config
	for _, name := range sortedKeys(m) {
		pm := asMap(m[name])
		base := "agents.providers." + name
		prov, ok := c.Agents.Providers[name]
		if !ok {
			r.Unmapped = append(r.Unmapped, Note{base, "Stratus has no provider named " + name + "; add its launch spec to config.yaml by hand"})
			continue
		}
		for _, k := range sortedKeys(pm) {
			full := base + "." + k
			v := pm[k]
			switch k {
			case "primary":
				var b bool
				if r.decode(full, v, &b) && b {
					c.Agents.Primary = name
				}
			case "model":
				var s string
				if v == nil || r.decode(full, v, &s) {
					prov.Model = s
					r.mark(full)
				}
			case "reasoning":
				var s string
				if v == nil || r.decode(full, v, &s) {
					prov.Reasoning = s
					r.mark(full)
				}
			case "timeout_seconds":
				var n int
				if r.decode(full, v, &n) {
					prov.TimeoutSeconds = n
				}
			case "max_turns":
				var n int
				if s, isText := v.(string); isText || v == nil {
					prov.MaxSteps = 0 // "none" / "max" / null: no cap
					r.Unmapped = append(r.Unmapped, Note{full + ": " + s, "no cap in Stratus is max_steps unset"})
				} else if r.decode(full, v, &n) {
					prov.MaxSteps = n
				}
			default:
				why, known := providerUnmapped[k]
				if !known {
					why = "Stratus has no such provider setting"
				}
				r.Unmapped = append(r.Unmapped, Note{full, why})
			}
		}
		c.Agents.Providers[name] = prov
	}
}

// decode re-reads v (a decoded YAML value) into dst strictly; on failure
// the key is listed as unmapped with the decoder's reason.
func (r *Result) decode(key string, v any, dst any) bool {
	// goccy/go-yaml truncates a number into an integer (2.5 → 2): an
	// integer setting written as a fraction is not taken, as config.Parse
	// would refuse it.
	if f, frac := v.(float64); frac {
		if _, integer := dst.(*int); integer {
			r.Unmapped = append(r.Unmapped, Note{key, fmt.Sprintf("not taken: must be an integer, got %v", f)})
			return false
		}
	}
	data, err := yaml.Marshal(v)
	if err == nil {
		err = yaml.UnmarshalWithOptions(data, dst, yaml.Strict())
	}
	if err != nil {
		r.Unmapped = append(r.Unmapped, Note{key, "not taken: " + firstLine(err.Error())})
		return false
	}
	r.mark(key)
	return true
}

func (r *Result) mark(key string) {
	if !slices.Contains(r.Mapped, key) {
		r.Mapped = append(r.Mapped, key)
	}
}

func (r *Result) skip(key string) {
	why, ok := unmapped[key]
	if !ok {
		why = "Stratus has no such setting"
	}
	r.Unmapped = append(r.Unmapped, Note{key, why})
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func sortedKeys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// Summary says what the import did, one line per fact, for the CLI.
func (r *Result) Summary() string {
	var b strings.Builder
	names := ""
	if len(r.Names) > 0 {
		names = " (" + strings.Join(r.Names, ", ") + ")"
	}
	fmt.Fprintf(&b, "imported %s%s, %s; config keys taken: %d\n", english.Plural(len(r.Names), "flow"), names, english.Plural(len(r.Tools), "tool file"), len(r.Mapped))
	for _, n := range r.Replaced {
		fmt.Fprintf(&b, "  flow %s replaces the built-in of that name (worc's rule: an operator flow wins)\n", n)
	}
	for _, n := range r.Unmapped {
		fmt.Fprintf(&b, "  not imported: %s — %s\n", n.Key, n.Why)
	}
	return b.String()
}
