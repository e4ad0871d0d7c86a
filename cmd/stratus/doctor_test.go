package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// addProvider adds provider NAME (spec: its YAML lines, indented 6) to an
// installed DIR/.stratus/config.yaml, and makes it the primary if primary.
func addProvider(t *testing.T, dir, name, spec string, primary bool) {
	t.Helper()
	path := filepath.Join(dir, ".stratus/config.yaml")
	cfg := readFile(t, path)
	cfg = strings.Replace(cfg, "  providers:\n", "  providers:\n    "+name+":\n"+spec, 1)
	if primary {
		i := strings.Index(cfg, "primary: ")
		j := strings.Index(cfg[i:], "\n")
		cfg = cfg[:i] + "primary: " + name + cfg[i+j:]
	}
	writeTestFile(t, path, cfg)
}

// doctorRows decodes `doctor --json` into "subject|check" → status, detail.
func doctorRows(t *testing.T, stdout string) map[string][2]string {
	t.Helper()
	var rows []map[string]string
	if err := json.Unmarshal([]byte(stdout), &rows); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, stdout)
	}
	out := map[string][2]string{}
	for _, r := range rows {
		if len(r) != 4 {
			t.Errorf("row %v: want exactly subject, check, status, detail", r)
		}
		out[r["subject"]+"|"+r["check"]] = [2]string{r["status"], r["detail"]}
	}
	return out
}

// `stratus doctor` checks each provider's command, CLI, env
// and version, the tools and the HMAC key; exit 1 only when a provider a
// node uses fails, 2 without a .stratus dir or on bad flags.
func TestDoctor_ChecksProvidersToolsAndKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// A fake claude CLI on PATH, and its key set.
	bin := t.TempDir()
	writeTestFile(t, filepath.Join(bin, "claude"), "#!/bin/sh\necho '2.0.1 (Claude Code)'\n")
	if err := os.Chmod(filepath.Join(bin, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PATH": bin + string(os.PathListSeparator) + os.Getenv("PATH"), "ANTHROPIC_API_KEY": "sk-doctor-test-secret"}
	r := runWorkerCLI(t, env, "", "doctor", "--dir", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"SUBJECT", "provider claude", "2.0.1 (Claude Code)", "$ANTHROPIC_API_KEY is set", "provider echo", "used by flow implementation", " 0 failed"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "sk-doctor-test-secret") {
		t.Errorf("doctor printed a key's value:\n%s", r.stdout)
	}

	// A primary that does not resolve fails; the unused providers only warn.
	addProvider(t, dir, "ghost", "      command: stratus-doctor-no-such-engine\n      env: {TOKEN: $STRATUS_DOCTOR_UNSET}\n", true)
	if err := os.WriteFile(filepath.Join(dir, ".stratus/hmac.key"), []byte("key"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runWorkerCLI(t, nil, "", "doctor", "--dir", dir, "--json")
	if r.code != ExitFailed {
		t.Fatalf("exit %d, want %d\n%s%s", r.code, ExitFailed, r.stdout, r.stderr)
	}
	rows := doctorRows(t, r.stdout)
	for key, want := range map[string][2]string{
		"provider ghost|command":         {"FAIL", `agents.providers.ghost.command "stratus-doctor-no-such-engine" is not found on PATH`},
		"provider ghost|env.TOKEN":       {"FAIL", "$STRATUS_DOCTOR_UNSET is not set"},
		"provider claude|command":        {"ok", "{stratus}"},
		"provider openseek|env.DEEPSEEK": {"", ""},
		"hmac key|mode":                  {"warn", "chmod 600 " + filepath.Join(dir, ".stratus/hmac.key")},
	} {
		got, ok := rows[key]
		switch {
		case !ok:
			t.Errorf("no row %s", key)
		case want[0] == "": // depends on this machine's environment: never a failure
			if got[0] == "FAIL" {
				t.Errorf("%s: %v, want no failure (no node uses it)", key, got)
			}
		case got[0] != want[0] || !strings.Contains(got[1], want[1]):
			t.Errorf("%s: %v, want %s with %q", key, got, want[0], want[1])
		}
	}

	// No .stratus dir, or a bad flag: exit 2.
	if r := runCLI(t, "doctor", "--dir", t.TempDir()); r.code != ExitUsage || !strings.Contains(r.stderr, "stratus install") {
		t.Errorf("no .stratus: exit %d %s", r.code, r.stderr)
	}
	if r := runCLI(t, "doctor", "--nope"); r.code != ExitUsage {
		t.Errorf("bad flag: exit %d", r.code)
	}
}

// An embedded run refuses to start when a provider its flow
// uses has a command that does not resolve or an unset $VAR, naming the
// provider, the field and what is valid; a provider no node uses does not
// stop it.
func TestPreflight_RunRefusesAnEngineThatCannotStart(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(root, "examples/scenario.yaml")); r.code != 0 {
		t.Fatal(r.stderr)
	}
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, readFile(t, filepath.Join(root, "examples/task.md")))
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	installed := readFile(t, cfgPath)

	// Unused, a provider that cannot start is no reason to refuse.
	addProvider(t, dir, "ghost", "      command: ./engines/none.sh\n      env: {TOKEN: $STRATUS_DOCTOR_UNSET}\n", false)
	if r := runWorkerCLI(t, nil, "", "run", task, "--dir", dir); r.code != ExitOK {
		t.Fatalf("run with an unused broken provider: exit %d\n%s", r.code, r.stderr)
	}

	for _, tc := range []struct{ name, spec, want string }{
		{"ghost", "      command: ./engines/none.sh\n", `agents.providers.ghost.command "./engines/none.sh" does not exist (` + filepath.Join(dir, "engines/none.sh") + ")"},
		{"keyless", "      command: sh\n      args: [engine.sh]\n      env: {TOKEN: $STRATUS_DOCTOR_UNSET}\n", "agents.providers.keyless.env.TOKEN: $STRATUS_DOCTOR_UNSET is not set in this environment"},
	} {
		writeTestFile(t, cfgPath, installed)
		addProvider(t, dir, tc.name, tc.spec, true)
		r := runWorkerCLI(t, nil, "", "run", task, "--dir", dir)
		if r.code != ExitUsage {
			t.Fatalf("%s: exit %d, want %d\n%s", tc.name, r.code, ExitUsage, r.stderr)
		}
		for _, want := range []string{"cannot run through flow implementation", cfgPath + ": provider " + tc.name + " (used by node planning", tc.want, "valid: "} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%s", tc.name, want, r.stderr)
			}
		}
		if strings.Contains(r.stderr, "stratus: run ") {
			t.Errorf("%s: the run started:\n%s", tc.name, r.stderr)
		}
	}
}

// validate reports doctor's provider checks of the providers a flow uses:
// what makes an embedded run refuse to start (an unset "$NAME") as an
// error, as run does; an HMAC key others may read as a note.
func TestValidate_ReportsProvidersTheFlowUses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	addProvider(t, dir, "keyless", "      command: sh\n      env: {TOKEN: $STRATUS_DOCTOR_UNSET}\n", true)
	writeTestFile(t, filepath.Join(dir, ".stratus/hmac.key"), "key")
	r := runWorkerCLI(t, nil, "", "validate", "implementation", "--dir", dir)
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	if r.code != ExitFailed {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"error: " + cfgPath + ": provider keyless (used by node planning, ",
		"agents.providers.keyless.env.TOKEN: $STRATUS_DOCTOR_UNSET is not set",
		"an embedded `stratus run` refuses to start",
		"note: " + filepath.Join(dir, ".stratus/hmac.key") + " has mode 0644",
		"flow implementation: 1 error, 0 warnings",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "provider claude") || strings.Contains(r.stdout, "provider openseek") {
		t.Errorf("validate warned of a provider the flow does not use:\n%s", r.stdout)
	}
}
