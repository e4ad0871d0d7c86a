package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

func TestDefault_RoundTrips(t *testing.T) {
	t.Parallel()
	b, err := Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("config.yaml", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if c.Agents.Primary != "echo" || c.Worker.TokenTTLSeconds != 600 || c.Projection.Placement != "workspace/tasks/{task_id}/ctx" {
		t.Errorf("parsed = %+v", c)
	}
}

// Bad config names the field, the value and what is valid.
func TestParse_Errors(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":      {base + "bogus: 1\n", "bogus"},
		"schema version":   {strings.Replace(base, "schema_version: 1", "schema_version: 9", 1), "schema_version 9"},
		"missing primary":  {strings.Replace(base, "primary: echo", "primary: nope", 1), `provider "nope"`},
		"empty command":    {strings.Replace(base, "{command: x}", "{command: \"\"}", 1), "command"},
		"negative ttl":     {base + "worker: {token_ttl_seconds: -1}\n", "token_ttl_seconds"},
		"short ttl":        {base + "worker: {token_ttl_seconds: 20}\n", "token_ttl_seconds: 20 is too short; valid: 120 seconds or more"},
		"negative timeout": {strings.Replace(base, "{command: x}", "{command: x, timeout_seconds: -5}", 1), "timeout_seconds"},
		"NaN cost cap":     {base + "limits: {max_cost_usd: .nan}\n", "limits.max_cost_usd: NaN"},
		"infinite cap":     {base + "limits: {max_cost_usd: .inf}\n", "limits.max_cost_usd: +Inf"},
		"negative snap":    {base + "limits: {max_snapshot_bytes: -1}\n", "limits.max_snapshot_bytes"},
		"workspace mode":   {base + "workspace: cloud\n", `workspace: "cloud" is not a workspace mode`},
		"negative retention": {base + "retention_days: -1\n",
			"retention_days: -1 is not a retention; valid: 1 to 36500 (days after a run ended that its files and step records are kept; default 30), or 0 to keep every run for ever"},
		"huge retention":  {base + "retention_days: 36501\n", "retention_days: 36501 is not a retention"},
		"text retention":  {base + "retention_days: month\n", "retention_days: must be an integer"},
		"checks env name": {base + "checks: {env: {\"GO FLAGS\": x}}\n", `checks.env.GO FLAGS: "GO FLAGS" is not an environment variable name`},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want EINVALID mentioning %q", name, err, tc.want)
		}
	}
}

func TestProvider_PinnedMustBeAllowed(t *testing.T) {
	t.Parallel()
	c := Default()
	if name, _, err := c.Provider(""); err != nil || name != "echo" {
		t.Errorf("primary: %s %v", name, err)
	}
	c.Agents.Allowed = []string{"script"}
	// The primary, named (an attempt's record of it: a supervisor turn
	// resolved to it), is allowed though the list leaves it out.
	if name, _, err := c.Provider("echo"); err != nil || name != "echo" {
		t.Errorf("the primary named: %s %v", name, err)
	}
	c.Agents.Allowed = []string{"echo"}
	if _, _, err := c.Provider("script"); stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "agents.allowed") {
		t.Errorf("pinned outside allowed: %v", err)
	}
}

func TestParse_PlacementAndProviderRules(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"absolute placement": {base + "projection: {placement: \"/tmp/{task_id}\"}\n", "relative"},
		"escaping placement": {base + "projection: {placement: \"../../{task_id}\"}\n", ".."},
		"shared placement":   {base + "projection: {placement: ctx}\n", "{task_id}"},
		"unknown variable":   {base + "projection: {placement: \"w/{task_id}/{nosuch}\"}\n", "only the variable"},
		"absolute dir":       {strings.Replace(base, "{command: x}", "{command: x, dir: /nonexistent}", 1), "relative"},
		"bad env name":       {strings.Replace(base, "{command: x}", "{command: x, env: {\"A=B\": x}}", 1), "environment variable name"},
		"negative max_steps": {strings.Replace(base, "{command: x}", "{command: x, max_steps: -3}", 1), "max_steps"},
		"empty file":         {"", "is empty"},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want EINVALID mentioning %q", name, err, tc.want)
		}
	}
}

// docs/contracts.md § The reference engine: openseek's per-kind step ceilings
// and adapter deadlines fill what a provider leaves unset; {kind} and
// {max_steps} mirror onto argv.
func TestProvider_OpenseekKindDefaults(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string][2]int{"explore": {100, 600}, "review": {100, 900}, "worker": {300, 2700}, "echo": {0, 600}} {
		p := Provider{Command: "/usr/local/bin/openseek", Kind: kind}.Resolved()
		if p.MaxSteps != want[0] || p.TimeoutSeconds != want[1] {
			t.Errorf("%s: max_steps %d timeout %d, want %v", kind, p.MaxSteps, p.TimeoutSeconds, want)
		}
	}
	if p := (Provider{Command: "openseek", Kind: "review", MaxSteps: 7}).Resolved(); p.MaxSteps != 7 || p.TimeoutSeconds != 900 {
		t.Errorf("explicit max_steps overridden: %+v", p)
	}
	if p := (Provider{Command: "other", Kind: "review"}).Resolved(); p.MaxSteps != 0 {
		t.Errorf("non-openseek provider got openseek defaults: %+v", p)
	}
}

// Every problem of config.yaml comes in one error, one per line, sorted by
// position, each with file:line:col: the parser's (an unknown key, a key
// given twice, a value of the wrong type) and the semantic rules' (located at
// the key at fault, looked up in the AST).
func TestParse_EveryProblemInOneErrorWithPositions(t *testing.T) {
	t.Parallel()
	src := `schema_version: 1
agents:
  primary: nope
  bogus: x
  providers:
    echo: {command: x, max_steps: many}
    other:
      command: ""
      timeout_seconds: -5
worker:
  token_ttl_seconds: -1
  token_ttl_seconds: 5
checks:
  command_sets:
    go:
      commands:
        - {name: "", argv: [go, test]}
supervisor:
  observe: {mode: loud}
`
	_, err := Parse("config.yaml", []byte(src))
	if stratus.ErrorCode(err) != stratus.EINVALID {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		`config.yaml:3:3: agents.primary: provider "nope" has no launch spec; valid: echo, other`,
		`config.yaml:4:3: agents.bogus: unknown key "bogus" in agents; allowed: allowed, decomposition, max_fix_cycles, max_stage_attempts, primary, providers, retry`,
		`config.yaml:6:35: agents.providers.echo.max_steps: must be an integer, got string "many"`,
		`config.yaml:8:7: agents.providers.other.command: empty; valid: an executable name or path, or {stratus}`,
		`config.yaml:9:7: agents.providers.other.timeout_seconds: -5 is negative; valid: seconds > 0, or 0 for 600`,
		`config.yaml:11:3: worker.token_ttl_seconds: -1 is negative; valid: a positive number of seconds`,
		`config.yaml:12:3: worker.token_ttl_seconds: duplicate key "token_ttl_seconds" (first at line 11, column 3); a key may appear once in a mapping`,
		`config.yaml:17:12: checks.command_sets.go.commands[0].name: empty; valid: a label for logs`,
		`config.yaml:19:13: supervisor.observe.mode: "loud"; valid: none, events, selected, all`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// A byte order mark is skipped, bytes that are not UTF-8 are
// refused naming the byte offset, and YAML merge keys merge.
func TestParse_BOMUTF8AndMergeKeys(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: &p {command: x, max_steps: 7}\n    copy: {<<: *p, max_steps: 9}\n"
	c, err := Parse("config.yaml", []byte("\ufeff"+base))
	if err != nil {
		t.Fatalf("BOM: %v", err)
	}
	if p := c.Agents.Providers["copy"]; p.Command != "x" || p.MaxSteps != 9 {
		t.Errorf("merged provider = %+v", p)
	}
	_, err = Parse("config.yaml", []byte(base+"projection: {placement: \"caf\xe9/{task_id}\"}\n"))
	off := len(base) + len("projection: {placement: \"caf")
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), fmt.Sprintf("config.yaml:7: the config file is not valid UTF-8: byte 0xe9 at byte offset %d", off)) {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

// docs/security.md § Retention: retention_days unset is 30 days, 0 keeps
// runs for ever, a number of days is taken as written; install writes the
// default out.
func TestRetention_DefaultZeroAndDays(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	for _, tc := range []struct {
		yaml string
		want int
	}{{"", DefaultRetentionDays}, {"retention_days: null\n", DefaultRetentionDays}, {"retention_days: 0\n", 0}, {"retention_days: 7\n", 7}, {"retention_days: 36500\n", 36500}} {
		c, err := Parse("config.yaml", []byte(base+tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if got := c.Retention(); got != tc.want {
			t.Errorf("%q: Retention() = %d, want %d", tc.yaml, got, tc.want)
		}
	}
	b, err := Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nretention_days: 30\n") {
		t.Errorf("the default config does not write retention_days: 30:\n%s", b)
	}
}

// worc configuration.md § agents.retry: "Validation rejects negative
// values and max_delay_s < base_delay_s"; an integer setting written as a
// fraction is refused, not truncated. Each error names the key, the value
// and what is valid.
func TestParse_RetryBlockErrorsNameKeyValueAndRange(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"negative max_attempts": {base + "  retry: {max_attempts: -1}\n",
			"config.yaml:6:11: agents.retry.max_attempts: -1 is negative; valid: 0 (no same-provider retry) or more"},
		"fractional max_attempts": {base + "  retry: {max_attempts: 2.5}\n", "agents.retry.max_attempts: must be an integer, got number 2.5"},
		"text max_attempts":       {base + "  retry: {max_attempts: twice}\n", `agents.retry.max_attempts: must be an integer, got string "twice"`},
		"negative base":           {base + "  retry: {base_delay_s: -0.5}\n", "agents.retry.base_delay_s: -0.5 is negative; valid: 0 to 31622401 seconds (default 2)"},
		"text base":               {base + "  retry: {base_delay_s: soon}\n", `agents.retry.base_delay_s: must be a number, got string "soon"`},
		"negative max delay":      {base + "  retry: {max_delay_s: -1, base_delay_s: 0}\n", "agents.retry.max_delay_s: -1 is negative"},
		"max below base": {base + "  retry: {base_delay_s: 10, max_delay_s: 5}\n",
			"agents.retry.max_delay_s: 5 is less than agents.retry.base_delay_s 10; valid: a cap of 10 seconds or more"},
		"max below the default base": {base + "  retry: {max_delay_s: 1}\n", "agents.retry.max_delay_s: 1 is less than agents.retry.base_delay_s 2"},
		"negative blocked":           {base + "  retry: {max_blocked_s: -60}\n", "agents.retry.max_blocked_s: -60 is negative; valid: 0 to 31536000 seconds a step may stay parked"},
		"NaN blocked":                {base + "  retry: {max_blocked_s: .nan}\n", "agents.retry.max_blocked_s: NaN is not a number of seconds"},
		"blocked over a year":        {base + "  retry: {max_blocked_s: 40000000}\n", "agents.retry.max_blocked_s: 40000000 is too large; valid: 0 to 31536000"},
		"zero stage attempts": {base + "  max_stage_attempts: 0\n",
			"agents.max_stage_attempts: 0; valid: 1 (no fallback to another provider) or more providers one step may run on before it parks (default 3)"},
		"fractional stage attempts": {base + "  max_stage_attempts: 1.5\n", "agents.max_stage_attempts: must be an integer, got number 1.5"},
		"too many attempts per cycle": {base + "  max_stage_attempts: 8\n  retry: {max_attempts: 4}\n",
			"config.yaml:6:3: agents.max_stage_attempts: agents.max_stage_attempts 8 with agents.retry.max_attempts 4 gives (4 + 1) × 8 attempts of one step before it parks; valid: at most 30 in all"},
		"huge max_attempts": {base + "  retry: {max_attempts: 9223372036854775807}\n", "agents.retry.max_attempts: agents.max_stage_attempts 3 with agents.retry.max_attempts 9223372036854775807"},
		"unknown retry key": {base + "  retry: {jitter: full}\n", `unknown key "jitter" in agents.retry; allowed: base_delay_s, max_attempts, max_blocked_s, max_delay_s`},
	} {
		_, err := Parse("config.yaml", []byte(tc.yaml))
		if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant EINVALID mentioning %q", name, err, tc.want)
		}
	}
}

// worc configuration.md § agents.retry: absent → the defaults; 0 is a
// setting (no same-provider retry, never park), not "unset".
func TestParse_RetryDefaultsAndZeroes(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	c, err := Parse("config.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	want := RetrySettings{MaxAttempts: 2, BaseDelayS: 2, MaxDelayS: 30, MaxBlockedS: 21600, MaxStageAttempts: 3}
	if got := c.Agents.RetrySettings(); got != want {
		t.Errorf("absent: %+v, want %+v", got, want)
	}
	if c.Agents.Retry.MaxAttempts == nil || c.Agents.MaxStageAttempts == nil {
		t.Errorf("Parse leaves the retry settings unset: %+v", c.Agents)
	}
	c, err = Parse("config.yaml", []byte(base+"  max_stage_attempts: 1\n  retry: {max_attempts: 0, base_delay_s: 0, max_delay_s: 0, max_blocked_s: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Agents.RetrySettings(); got != (RetrySettings{MaxStageAttempts: 1}) {
		t.Errorf("zeroes: %+v", got)
	}
	// `stratus install` writes them out, with the header saying what they do.
	b, err := Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"  max_stage_attempts: 3\n", "  retry:\n    max_attempts: 2\n    base_delay_s: 2.0\n    max_delay_s: 30.0\n    max_blocked_s: 21600.0\n", "# agents.retry and agents.max_stage_attempts"} {
		if !strings.Contains(string(b), line) {
			t.Errorf("the default config.yaml lacks %q:\n%s", line, b)
		}
	}
}

// A bundled stand-in engine answers without a model: never a fallback.
func TestProvider_StandIn(t *testing.T) {
	t.Parallel()
	c := Default()
	for name, want := range map[string]bool{"echo": true, "script": true, "claude": false, "codex": false, "openseek": false} {
		if got := c.Agents.Providers[name].StandIn(name); got != want {
			t.Errorf("%s: StandIn %v, want %v", name, got, want)
		}
	}
	if !(Provider{Command: StratusCommand, Args: []string{"engine", "echo"}}).StandIn("fake") {
		t.Error("a provider running `stratus engine echo` under another name is a stand-in too")
	}
}

// docs/runner-image.md § The environment of checks and tools: checks.env
// is a mapping of variable names to values, kept as written.
func TestParse_ChecksEnv(t *testing.T) {
	t.Parallel()
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	c, err := Parse("config.yaml", []byte(base+"checks:\n  env: {GOFLAGS: -mod=vendor, CGO_ENABLED: \"0\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Checks.Env; len(got) != 2 || got["GOFLAGS"] != "-mod=vendor" || got["CGO_ENABLED"] != "0" {
		t.Errorf("checks.env = %v", got)
	}
}
