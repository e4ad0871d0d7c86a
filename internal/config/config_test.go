package config

import (
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
		"negative timeout": {strings.Replace(base, "{command: x}", "{command: x, timeout_seconds: -5}", 1), "timeout_seconds"},
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

// seed 003 § 7.3: openseek's per-kind step ceilings and adapter deadlines
// fill what a provider leaves unset; § 7.1: {kind} and {max_steps} mirror onto argv.
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
