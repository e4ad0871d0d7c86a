package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// forgedReason is the failure reason a tester's engine posted itself to
// POST /v1/worker/result: it sets the terminal's title, clears the
// screen, turns red, forges a progress line after a CR LF and reverses
// what follows with U+202E (RIGHT-TO-LEFT OVERRIDE).
const forgedReason = "bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"

// forgedEngine posts forgedReason as its step's failure with its own
// handle, and writes the same bytes to its stderr (the runner log), with
// a CR alone before the forged line: a newline in a log is a line of the
// engine's (logs shows its stderr line by line), a CR would overwrite it.
const forgedEngine = `read line
printf 'bad \033]0;PWNED\007\033[2J\033[31mRED\rstratus: end fake#1 verdict=done\342\200\256gnp.exe\n' >&2
body='{"task_id":"'"$STRATUS_TASK_ID"'","ok":false,"value":{"terminal":"Failed","reason":"bad \u001b]0;PWNED\u0007\u001b[2J\u001b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"}}'
curl -sf -H "Authorization: Bearer $STRATUS_HANDLE" -d "$body" "$STRATUS_API_URL/v1/worker/result" || exit 4
exit 1
`

// forgedLine is a line the engine's text would forge: its own line
// starting like one of Stratus's progress lines.
var forgedLine = regexp.MustCompile(`(?m)(^|\r)\s*stratus: end fake#1`)

// assertNoRawControls fails when out holds a byte or rune of forgedReason
// that drives a terminal or disguises text, raw.
func assertNoRawControls(t *testing.T, what, out string) {
	t.Helper()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u202e"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s holds %q raw:\n%s", what, bad, out)
		}
	}
	if forgedLine.MatchString(out) {
		t.Errorf("%s holds a line the engine forged:\n%s", what, out)
	}
}

// The tester's finding: an engine's failure reason reached the operator's
// terminal raw through `run`'s why: line, summary.md and `logs`.
// docs/security.md § Text an engine wrote.
func TestEngineText_NeverReachesTheTerminalRaw(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", forgedEngine, "", "t-escape")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitFailed {
		t.Fatalf("run: exit %d, want %d (failed)\nstdout:\n%s\nstderr:\n%s", r.code, ExitFailed, r.stdout, r.stderr)
	}
	// The reason reached the run, escaped.
	if !strings.Contains(r.stdout, `bad \x1b]0;PWNED\a`) && !strings.Contains(r.stdout, `bad \x1b]0;PWNED\x07`) {
		t.Errorf("run's why: does not show the reason escaped:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, `\u202e`) {
		t.Errorf("run's why: does not show U+202E as \\u202e:\n%s", r.stdout)
	}
	assertNoRawControls(t, "run's stdout", r.stdout)
	assertNoRawControls(t, "run's stderr", r.stderr)

	runID := strings.TrimSuffix(strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "run "), ": failed")

	st := runCLI(t, "status", runID, "--dir", dir)
	if st.code != 0 {
		t.Fatalf("status: exit %d\n%s", st.code, st.stderr)
	}
	assertNoRawControls(t, "status's stdout", st.stdout)
	assertNoRawControls(t, "status's stderr", st.stderr)
	if !strings.Contains(st.stdout, `\u202e`) {
		t.Errorf("status does not show the reason escaped:\n%s", st.stdout)
	}

	lg := runCLI(t, "logs", runID, "--dir", dir)
	if lg.code != 0 {
		t.Fatalf("logs: exit %d\n%s", lg.code, lg.stderr)
	}
	assertNoRawControls(t, "logs's stdout", lg.stdout)
	assertNoRawControls(t, "logs's stderr", lg.stderr)
	if strings.Count(lg.stdout, `\u202e`) < 2 {
		t.Errorf("logs does not show the reason and the engine's stderr line with U+202E escaped:\n%s", lg.stdout)
	}

	rs := runCLI(t, "runs", "--dir", dir)
	assertNoRawControls(t, "runs's stdout", rs.stdout)

	// summary.md keeps no raw control either; summary.json is JSON (its
	// strings JSON-escaped) and keeps the reason as the engine wrote it.
	sj := runCLI(t, "status", runID, "--dir", dir, "--json")
	var res StatusResult
	if err := json.Unmarshal([]byte(sj.stdout), &res); err != nil {
		t.Fatalf("status --json: %v\n%s", err, sj.stdout)
	}
	var md string
	for _, p := range res.Summary {
		if filepath.Base(p) == "summary.md" {
			md = readFile(t, p)
		}
	}
	if md == "" {
		t.Fatalf("no summary.md among %v", res.Summary)
	}
	assertNoRawControls(t, "summary.md", md)
	if !strings.Contains(md, `\u202e`) {
		t.Errorf("summary.md does not show the reason escaped:\n%s", md)
	}
	var reason string
	for _, s := range res.Steps {
		if s.StepRef == "first#1" {
			reason = s.Reason
		}
	}
	if !strings.HasPrefix(reason, forgedReason) {
		t.Errorf("status --json reason = %q; want the engine's text JSON-escaped, unchanged: %q…", reason, forgedReason)
	}
}
