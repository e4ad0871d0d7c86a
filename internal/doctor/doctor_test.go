package doctor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
)

// env is a fixed PATH (name → path) and environment.
func env(path map[string]string, vars map[string]string) Env {
	return Env{
		LookPath: func(f string) (string, error) {
			if p, ok := path[f]; ok {
				return p, nil
			}
			return "", errors.New("not found")
		},
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
	}
}

func write(t *testing.T, path, body string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, rs []Result, subject, check string) Result {
	t.Helper()
	for _, r := range rs {
		if r.Subject == subject && r.Check == check {
			return r
		}
	}
	t.Fatalf("no %s / %s in %+v", subject, check, rs)
	return Result{}
}

// A provider's command resolves on PATH, as a path relative
// to its dir under the work dir, or is {stratus}; each "$NAME" of its env
// overlay is set; each failure names the field and what is valid.
func TestDoctor_CheckProvider(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	write(t, filepath.Join(work, "engines/run.sh"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(work, "engines/plain.sh"), "#!/bin/sh\n", 0o644)
	e := env(map[string]string{"sh": "/bin/sh"}, map[string]string{"KEY": "k", "EMPTY": ""})
	for _, tc := range []struct {
		name   string
		p      config.Provider
		check  string
		status string
		detail []string // substrings
	}{
		{"stratus", config.Provider{Command: config.StratusCommand}, CheckCommand, OK, []string{"stratus binary itself"}},
		{"onpath", config.Provider{Command: "sh"}, CheckCommand, OK, []string{"/bin/sh"}},
		{"missing", config.Provider{Command: "claude"}, CheckCommand, Fail, []string{`agents.providers.missing.command "claude" is not found on PATH`, "valid: an executable on PATH", "{stratus}", "@anthropic-ai/claude-code"}},
		{"rel", config.Provider{Command: "./run.sh", Dir: "engines"}, CheckCommand, OK, []string{filepath.Join(work, "engines/run.sh")}},
		{"relmissing", config.Provider{Command: "./run.sh"}, CheckCommand, Fail, []string{"does not exist (" + filepath.Join(work, "run.sh") + ")"}},
		{"noexec", config.Provider{Command: "engines/plain.sh"}, CheckCommand, Fail, []string{"is not executable (chmod +x " + filepath.Join(work, "engines/plain.sh")}},
		{"dir", config.Provider{Command: "./engines"}, CheckCommand, Fail, []string{"is a directory"}},
		{"set", config.Provider{Command: "sh", Env: map[string]string{"API_KEY": "$KEY"}}, "env.API_KEY", OK, []string{"$KEY is set"}},
		{"unset", config.Provider{Command: "sh", Env: map[string]string{"API_KEY": "$NOPE"}}, "env.API_KEY", Fail, []string{"agents.providers.unset.env.API_KEY: $NOPE is not set", "export NOPE"}},
		{"empty", config.Provider{Command: "sh", Env: map[string]string{"API_KEY": "$EMPTY"}}, "env.API_KEY", Warn, []string{"set but empty"}},
		{"bad", config.Provider{Command: "sh", Env: map[string]string{"API_KEY": "${KEY}"}}, "env.API_KEY", Fail, []string{"does not name an environment variable"}},
		{"shim", config.Provider{Command: config.StratusCommand, Args: []string{"engine", "codex"}}, CheckCLI, Fail, []string{`runs the codex CLI: "codex" is not found on PATH`, "npm install -g @openai/codex"}},
		{"shimbin", config.Provider{Command: config.StratusCommand, Args: []string{"engine", "claude", "--binary", "engines/run.sh"}}, CheckCLI, OK, []string{filepath.Join(work, "engines/run.sh")}},
		{"shimbad", config.Provider{Command: config.StratusCommand, Args: []string{"engine", "claude", "--binary=nope/claude"}}, CheckCLI, Fail, []string{"fix the --binary in agents.providers.shimbad.args"}},
	} {
		rs := CheckProvider(e, work, tc.name, tc.p)
		r := find(t, rs, "provider "+tc.name, tc.check)
		if r.Status != tc.status {
			t.Errorf("%s: status %s, want %s: %s", tc.name, r.Status, tc.status, r.Detail)
		}
		for _, d := range tc.detail {
			if !strings.Contains(r.Detail, d) {
				t.Errorf("%s: detail %q lacks %q", tc.name, r.Detail, d)
			}
		}
		if r.Status == Fail && r.Field == "" {
			t.Errorf("%s: a failure names no field", tc.name)
		}
		if strings.Contains(r.Detail, `"k"`) {
			t.Errorf("%s: the detail shows a secret's value: %s", tc.name, r.Detail)
		}
	}
	// A CLI that `npm install` put under node_modules/.bin of the work dir
	// or a directory above it (off PATH) is pointed at.
	local := t.TempDir()
	write(t, filepath.Join(local, "node_modules/.bin/claude"), "#!/bin/sh\n", 0o755)
	project := filepath.Join(local, "projects", "one")
	r := find(t, CheckProvider(e, project, "cc", config.Provider{Command: config.StratusCommand, Args: []string{"engine", "claude"}}), "provider cc", CheckCLI)
	if want := filepath.Join(local, "node_modules/.bin"); r.Status != Fail || !strings.Contains(r.Detail, "add "+want+" to PATH") {
		t.Errorf("claude under node_modules/.bin: %s %s; want a failure saying to add %s to PATH", r.Status, r.Detail, want)
	}
	// A literal env value is not looked up.
	if rs := CheckProvider(e, work, "lit", config.Provider{Command: "sh", Env: map[string]string{"MODE": "fast"}}); len(rs) != 1 {
		t.Errorf("literal env: %+v", rs)
	}
}

const tinyFlow = `flow:
  name: tiny
  task_type: tiny
  permission_ceiling: read-only
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: plan, kind: agent, role_file: tiny/plan.md }
    - { id: review, kind: evaluator, role_file: tiny/plan.md, provider: pinned }
    - { id: lint, kind: tool, tool: lint }
    - { id: done, kind: publish, policy: local_artifact }
  edges:
    - { from: plan, to: review }
    - { from: review, to: lint }
    - { from: lint, to: done }
`

// FlowProviders: the task's nodes.<id>.provider > the node's > the
// primary, for enabled agent and evaluator nodes, plus the supervisor's.
func TestDoctor_FlowProviders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tiny.yaml"), tinyFlow, 0o644)
	fl, err := flow.Load(dir, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Agents.Providers["pinned"] = config.Provider{Command: "sh"}
	cfg.Supervisor.Provider = "script"
	uses := FlowProviders(cfg, fl, nil)
	if got := strings.Join(uses["echo"], ","); got != "node plan" {
		t.Errorf("echo used by %q", got)
	}
	if got := strings.Join(uses["pinned"], ","); got != "node review" {
		t.Errorf("pinned used by %q", got)
	}
	if got := strings.Join(uses["script"], ","); got != Supervisor {
		t.Errorf("script used by %q", got)
	}
	front := map[string]any{"nodes": map[string]any{
		"plan":   map[string]any{"provider": "codex"},
		"review": map[string]any{"enabled": false},
	}}
	off := false
	cfg.Supervisor.Enabled = &off
	uses = FlowProviders(cfg, fl, front)
	if len(uses) != 1 || strings.Join(uses["codex"], ",") != "node plan" {
		t.Errorf("with the task's overrides: %v", uses)
	}
}

// Run: a failing provider a node uses fails; one no node uses warns; a
// tool a node runs must be executable; the HMAC key must be 0600.
func TestDoctor_RunSeverity(t *testing.T) {
	t.Parallel()
	work := t.TempDir()
	state := filepath.Join(work, ".stratus")
	cfg := config.Default()
	cfg.Agents.Providers["pinned"] = config.Provider{Command: "stratus-doctor-test-no-such-engine"}
	cfg.Agents.Allowed = append(cfg.Agents.Allowed, "pinned")
	b, err := config.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(state, "config.yaml"), string(b), 0o644)
	write(t, filepath.Join(state, "flows/tiny.yaml"), tinyFlow, 0o644)
	write(t, filepath.Join(state, "tools/lint"), "#!/bin/sh\n", 0o644)
	write(t, filepath.Join(state, "tools/spare"), "#!/bin/sh\n", 0o644)
	write(t, filepath.Join(state, "hmac.key"), "k", 0o644)
	o := Options{WorkDir: work, ConfigPath: filepath.Join(state, "config.yaml"), FlowsDir: filepath.Join(state, "flows"),
		ToolsDir: filepath.Join(state, "tools"), KeyPath: filepath.Join(state, "hmac.key"), VersionTimeout: -1,
		Env: env(map[string]string{}, map[string]string{})}
	rs := Run(context.Background(), o)
	for _, c := range []struct{ subject, check, status, detail string }{
		{"config", CheckLoad, OK, ""},
		{"provider pinned", CheckUse, OK, "used by flow tiny (1 node)"},
		{"provider pinned", CheckCommand, Fail, "agents.providers.pinned.command"},
		{"provider echo", CheckUse, OK, "used by flow tiny (1 node), the supervisor"},
		{"provider echo", CheckCommand, OK, ""},
		{"provider openseek", CheckCommand, Warn, "not found on PATH"},
		{"provider openseek", "env.DEEPSEEK", Warn, "$DEEPSEEK is not set"},
		{"tool lint", CheckExecutable, Fail, "used by flow tiny node lint"},
		{"tool spare", CheckExecutable, Warn, "no node of an installed flow runs it"},
		{"hmac key", CheckMode, Warn, "fix: chmod 600 " + o.KeyPath},
	} {
		r := find(t, rs, c.subject, c.check)
		if r.Status != c.status || !strings.Contains(r.Detail, c.detail) {
			t.Errorf("%s %s: %s %q, want %s with %q", c.subject, c.check, r.Status, r.Detail, c.status, c.detail)
		}
	}
	if !Failed(rs) {
		t.Error("Failed = false")
	}

	// Fixed: nothing fails, whatever the unused providers say.
	cfg.Agents.Providers["pinned"] = config.Provider{Command: "sh"}
	b, _ = config.Marshal(cfg)
	write(t, filepath.Join(state, "config.yaml"), string(b), 0o644)
	write(t, filepath.Join(state, "tools/lint"), "#!/bin/sh\n", 0o755)
	write(t, filepath.Join(state, "hmac.key"), "k", 0o600)
	o.Env = env(map[string]string{"sh": "/bin/sh"}, nil)
	rs = Run(context.Background(), o)
	if Failed(rs) {
		t.Errorf("still failing: %+v", rs)
	}
	if r := find(t, rs, "hmac key", CheckMode); r.Status != OK || !strings.Contains(r.Detail, "0600") {
		t.Errorf("key: %+v", r)
	}

	// A config that does not load fails.
	write(t, filepath.Join(state, "config.yaml"), "schema_version: 9\n", 0o644)
	if rs = Run(context.Background(), o); !Failed(rs) || find(t, rs, "config", CheckLoad).Status != Fail {
		t.Errorf("bad config: %+v", rs)
	}
}

// The known CLIs are asked for their version: the first line is kept; a
// CLI that fails or does not answer in time only warns.
func TestDoctor_Version(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	write(t, good, "#!/bin/sh\necho '1.2.3 (Claude Code)'\necho second line\n", 0o755)
	bad := filepath.Join(dir, "bad")
	write(t, bad, "#!/bin/sh\necho 'unknown flag' >&2\nexit 3\n", 0o755)
	slow := filepath.Join(dir, "slow")
	write(t, slow, "#!/bin/sh\nsleep 30\n", 0o755)
	if r := Version(context.Background(), "claude", good, dir, 0); r.Status != OK || r.Detail != "1.2.3 (Claude Code)" {
		t.Errorf("good: %+v", r)
	}
	if r := Version(context.Background(), "claude", bad, dir, 0); r.Status != Warn || !strings.Contains(r.Detail, "unknown flag") {
		t.Errorf("bad: %+v", r)
	}
	start := time.Now()
	if r := Version(context.Background(), "claude", slow, dir, 200*time.Millisecond); r.Status != Warn || !strings.Contains(r.Detail, "did not answer within 200ms") {
		t.Errorf("slow: %+v", r)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a slow CLI held doctor for %s", d)
	}

	// Run asks only known CLIs, through the shim's CLI too.
	work := t.TempDir()
	state := filepath.Join(work, ".stratus")
	cfg := config.Default()
	cfg.Agents.Providers["claude"] = config.Provider{Command: config.StratusCommand, Args: []string{"engine", "claude", "--binary", good}}
	cfg.Agents.Providers["openseek"] = config.Provider{Command: bad}
	cfg.Agents.Providers["other"] = config.Provider{Command: good}
	b, _ := config.Marshal(cfg)
	write(t, filepath.Join(state, "config.yaml"), string(b), 0o644)
	rs := Run(context.Background(), Options{WorkDir: work, ConfigPath: filepath.Join(state, "config.yaml"),
		FlowsDir: filepath.Join(state, "flows"), ToolsDir: filepath.Join(state, "tools"), KeyPath: filepath.Join(state, "hmac.key")})
	if r := find(t, rs, "provider claude", CheckVersion); r.Status != OK || r.Detail != "1.2.3 (Claude Code)" {
		t.Errorf("claude: %+v", r)
	}
	for _, r := range rs {
		if r.Check == CheckVersion && r.Subject != "provider claude" {
			t.Errorf("version asked of %s: %+v", r.Subject, r)
		}
	}
}

// LaunchProblems (an embedded run's preflight) keep only the command, CLI
// and env failures of the providers the run uses (a shim whose CLI is not
// installed is refused before the run, not at its first step).
func TestPreflight_LaunchProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "tiny.yaml"), tinyFlow, 0o644)
	fl, err := flow.Load(dir, "tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Agents.Providers["pinned"] = config.Provider{Command: "sh", Env: map[string]string{"TOKEN": "$STRATUS_DOCTOR_UNSET"}}
	cfg.Agents.Providers["echo"] = config.Provider{Command: config.StratusCommand, Args: []string{"engine", "claude"}} // its CLI missing
	e := env(map[string]string{"sh": "/bin/sh"}, nil)
	ps := LaunchProblems(e, dir, cfg, fl, nil)
	if len(ps) != 2 || ps[0].Provider != "echo" || ps[0].Check != CheckCLI || ps[1].Provider != "pinned" || ps[1].Field != "agents.providers.pinned.env.TOKEN" || strings.Join(ps[1].Users, ",") != "node review" {
		t.Fatalf("problems %+v", ps)
	}
	cfg.Agents.Providers["echo"] = config.Provider{Command: config.StratusCommand, Args: []string{"engine", "echo"}}
	// The task turns the node off: nothing uses the provider.
	if ps := LaunchProblems(e, dir, cfg, fl, map[string]any{"nodes": map[string]any{"review": map[string]any{"enabled": false}}}); len(ps) != 0 {
		t.Errorf("disabled node: %+v", ps)
	}
}

// CheckCommands: a check command whose argv[0] resolves (on PATH, or a
// path relative to its cwd) is ok; one that does not fails when a flow
// runs checks, and only warns when none does or its set is skipped when
// unavailable.
func TestDoctor_CheckCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "sub/bin/lint"), "#!/bin/sh\n", 0o755)
	cfg := config.Default()
	cfg.Checks.CommandSets = map[string]config.CommandSet{
		"go":   {Commands: []config.CheckCommand{{Name: "test", Argv: []string{"sh", "-c", "true"}}, {Name: "vet", Argv: []string{"no-such-tool-here", "vet"}}}},
		"lint": {Commands: []config.CheckCommand{{Name: "lint", Argv: []string{"./bin/lint"}, Cwd: "sub"}}},
		"opt":  {SkipIfUnavailable: true, Commands: []config.CheckCommand{{Name: "x", Argv: []string{"no-such-tool-here"}}}},
	}
	checked, err := flow.Parse("checked.yaml", []byte(`flow:
  name: checked
  task_type: checked
  nodes:
    - {id: tests, kind: checks}
    - {id: publish, kind: publish, policy: none}
  edges:
    - {from: tests, to: publish, outcome: pass}
`))
	if err != nil {
		t.Fatal(err)
	}
	rs := CheckCommands(dir, cfg, []*flow.Flow{checked})
	for subject, want := range map[string]string{"check go/test": OK, "check go/vet": Fail, "check lint/lint": OK, "check opt/x": Warn} {
		if r := find(t, rs, subject, CheckExecutable); r.Status != want {
			t.Errorf("%s: %s (%s), want %s", subject, r.Status, r.Detail, want)
		}
	}
	if r := find(t, rs, "check go/vet", CheckExecutable); r.Field != "checks.command_sets.go.commands[1].argv" || !strings.Contains(r.Detail, "node tests") {
		t.Errorf("go/vet: %+v", r)
	}
	if r := find(t, CheckCommands(dir, cfg, nil), "check go/vet", CheckExecutable); r.Status != Warn {
		t.Errorf("with no flow running checks: %+v", r)
	}
}
