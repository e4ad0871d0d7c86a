package conform

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// Parts of a conforming sh engine
// (docs/contracts.md § Conformance checklist's four-line engine plus the
// version check of docs/contracts.md § Versioning); each test swaps one part
// to break one rule.
const (
	readLine     = "IFS= read -r line\n"
	versionCheck = `case "$line" in
*'"workflow_contract":1,'*) ;;
*) printf '{"event":"command_error","error":"unsupported workflow_contract"}\n'; exit 0 ;;
esac
`
	stepLine   = `printf '{"event":"agent_step","step":1}\n'` + "\n"
	usageLine  = `printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7}}\n'` + "\n"
	reportLine = `printf '{"subrun_report":{"answer":42}}\n'` + "\n"
	conforming = readLine + versionCheck + stepLine + usageLine + reportLine
)

// printf returns an sh line printing s and a newline.
func printf(s string) string { return "printf '%s\\n' '" + s + "'\n" }

// engine writes an sh engine and returns a Target for it with test-sized
// timings.
func engine(t *testing.T, script string) Target {
	t.Helper()
	path := filepath.Join(t.TempDir(), "engine.sh")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return Target{Command: "sh", Args: []string{path}, GraceMS: 2000, TimeoutMS: 4000}
}

// conformAll runs every check and compares each status with want, a check
// absent from want being expected to PASS (failure-explained: SKIP).
func conformAll(t *testing.T, target Target, want map[string]Status) []Result {
	t.Helper()
	results, err := Run(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(Checks()) {
		t.Fatalf("%d results, want %d", len(results), len(Checks()))
	}
	for _, r := range results {
		w, ok := want[r.Check]
		if !ok {
			w = Pass
		}
		if r.Check == "failure-explained" && !ok {
			w = Skip
		}
		if r.Status != w {
			t.Errorf("%s: %s (%s), want %s", r.Check, r.Status, r.Detail, w)
		}
	}
	return results
}

func detail(results []Result, check string) string {
	for _, r := range results {
		if r.Check == check {
			return r.Detail
		}
	}
	return ""
}

// A shell engine doing everything docs/contracts.md § Conformance checklist
// asks passes every check.
func TestConform_ConformingShellEnginePasses(t *testing.T) { // docs/contracts.md § Conformance checklist
	t.Parallel()
	res := conformAll(t, engine(t, conforming), nil)
	if !Passed(res) {
		t.Error("Passed = false")
	}
}

// An engine must reject another major with a command_error and no report.
func TestConform_RejectsOtherMajor(t *testing.T) { // docs/contracts.md § Versioning, § Conformance checklist
	t.Parallel()
	for name, tc := range map[string]struct {
		script, detail string
	}{
		"never checks the version (the checklist's four-line engine)": {readLine + stepLine + usageLine + reportLine, "no command_error event, and a report on line 3"},
		"command_error and a report": {readLine + `case "$line" in *'"workflow_contract":1,'*) ;; *) printf '{"event":"command_error","error":"v"}\n' ;; esac` + "\n" + stepLine + usageLine + reportLine,
			`command_error "v", but also a report on line 4`},
		"command_error without an error string": {readLine + `case "$line" in *'"workflow_contract":1,'*) ;; *) printf '{"event":"command_error"}\n'; exit 0 ;; esac` + "\n" + stepLine + usageLine + reportLine,
			"no command_error event (with a string error)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := map[string]Status{"rejects-other-major": Fail}
			if strings.Contains(tc.detail, "but also a report") {
				want["failure-explained"] = Fail
			}
			res := conformAll(t, engine(t, tc.script), want)
			if d := detail(res, "rejects-other-major"); !strings.Contains(d, tc.detail) {
				t.Errorf("detail %q, want %q", d, tc.detail)
			}
			if Passed(res) {
				t.Error("Passed = true")
			}
		})
	}
}

// An engine must not wait for a second line while stdin stays open.
func TestConform_ToleratesOpenStdin(t *testing.T) { // docs/contracts.md § The request line, § Conformance checklist
	t.Parallel()
	target := engine(t, readLine+versionCheck+"IFS= read -r more\n"+stepLine+usageLine+reportLine)
	target.TimeoutMS = 1000
	res := conformAll(t, target, map[string]Status{"tolerates-open-stdin": Fail})
	if d := detail(res, "tolerates-open-stdin"); !strings.Contains(d, "still running with stdin open after 1000 ms") {
		t.Errorf("detail %q", d)
	}
	// The raw checks still see the output, noting that stdin had to close.
	if d := detail(res, "one-report-last"); !strings.Contains(d, "it ended after stdin was closed") {
		t.Errorf("detail %q", d)
	}
}

// On stdin EOF an engine must end within the cancel grace; one that carries
// on regardless is killed at the end of the grace.
func TestConform_StopsOnStdinEOF(t *testing.T) { // docs/contracts.md § Process lifecycle, § Conformance checklist
	t.Parallel()
	target := engine(t, readLine+"sleep 2\n"+versionCheck+stepLine+usageLine+reportLine)
	target.GraceMS = 300
	res := conformAll(t, target, map[string]Status{"stops-on-stdin-eof": Fail})
	if d := detail(res, "stops-on-stdin-eof"); !strings.Contains(d, "not stopped within the grace") || !strings.Contains(d, "grace 300 ms") || !strings.Contains(d, "killed") {
		t.Errorf("detail %q", d)
	}
}

// Regression: the EOF check once closed stdin 1 ms after the launch, before
// a slow-starting engine had read its request, so an engine that reads its
// request and then ignores stdin EOF passed. Stdin is now closed only once
// the engine has had the request, and such an engine is killed at the end
// of the grace: FAIL.
func TestConform_StopsOnStdinEOF_ReadsRequestThenIgnoresEOF(t *testing.T) { // docs/contracts.md § Process lifecycle, § Conformance checklist
	t.Parallel()
	py := `import sys, time
line = sys.stdin.readline()
if '"workflow_contract":1,' not in line:
    print('{"event":"command_error","error":"unsupported workflow_contract"}', flush=True)
    sys.exit(0)
time.sleep(0.5)  # stands in for a slow start of the real work
if sys.stdin.read() == "":  # stdin EOF, ignored
    time.sleep(5)
print('{"subrun_report":{"answer":42}}', flush=True)
`
	for name, tc := range map[string]struct {
		command string
		script  string
	}{
		"python3": {"python3", py},
		"sh":      {"sh", readLine + versionCheck + "cat >/dev/null\nsleep 5\n" + reportLine},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testenv.MustHaveCommand(t, tc.command, "an engine written in "+name)
			target := engine(t, tc.script)
			target.Command = tc.command
			target.GraceMS, target.TimeoutMS = 400, 1000
			results, err := Run(context.Background(), target)
			if err != nil {
				t.Fatal(err)
			}
			var got Result
			for _, r := range results {
				if r.Check == "stops-on-stdin-eof" {
					got = r
				}
			}
			if got.Status != Fail || !strings.Contains(got.Detail, "not stopped within the grace") || !strings.Contains(got.Detail, "killed") {
				t.Errorf("stops-on-stdin-eof: %s (%s), want FAIL: killed", got.Status, got.Detail)
			}
		})
	}
}

// An engine that stops at stdin EOF without a report, once it has read its
// request, passes, and the detail says stdin was closed after the request.
func TestConform_StopsOnStdinEOF_NoReportIsFine(t *testing.T) { // docs/contracts.md § Process lifecycle, § Conformance checklist
	t.Parallel()
	target := engine(t, readLine+versionCheck+"cat >/dev/null\nexit 0\n")
	res := conformAll(t, target, map[string]Status{"tolerates-open-stdin": Fail, "one-report-last": Fail})
	if d := detail(res, "stops-on-stdin-eof"); !strings.Contains(d, "stdin closed at") || !strings.Contains(d, "ms after the request was written") || !strings.Contains(d, "no report") {
		t.Errorf("detail %q", d)
	}
}

// A grandchild holding stdout open after the engine exited is named in the
// details instead of blaming the engine for not ending.
func TestConform_GrandchildHoldsStdout(t *testing.T) { // docs/contracts.md § Process lifecycle
	t.Parallel()
	target := engine(t, readLine+versionCheck+stepLine+usageLine+reportLine+"sleep 6 &\nexit 0\n")
	target.GraceMS, target.TimeoutMS = 500, 4000
	res := conformAll(t, target, map[string]Status{"stops-on-stdin-eof": Fail})
	for _, c := range []string{"json-only-stdout", "one-report-last", "stops-on-stdin-eof"} {
		if d := detail(res, c); !strings.Contains(d, "its stdout stayed open until") || !strings.Contains(d, "held by another process") || strings.Contains(d, "did not end within") {
			t.Errorf("%s: detail %q", c, d)
		}
	}
}

// A normal run that ends with a failure event and no report is blamed on
// the input, not on open stdin.
func TestConform_FailureInsteadOfReport(t *testing.T) { // docs/contracts.md § Terminal classification, § Conformance checklist
	t.Parallel()
	target := engine(t, readLine+versionCheck+printf(`{"event":"command_error","error":"no such node"}`))
	res := conformAll(t, target, map[string]Status{"tolerates-open-stdin": Fail, "one-report-last": Fail})
	want := `the engine reported a failure instead of a report: command_error "no such node"; pass --input the engine accepts`
	for _, c := range []string{"tolerates-open-stdin", "one-report-last"} {
		if d := detail(res, c); d != want {
			t.Errorf("%s: detail %q, want %q", c, d, want)
		}
	}
}

// A failure event followed by a report violates
// docs/child-contract.md § Ending: when to exit, and what the runner concludes.
func TestConform_FailureExplained(t *testing.T) { // docs/contracts.md § Terminal classification, § Conformance checklist
	t.Parallel()
	target := engine(t, readLine+versionCheck+printf(`{"event":"turn_failed","error":"model down"}`)+reportLine)
	res := conformAll(t, target, map[string]Status{"failure-explained": Fail})
	want := `the normal run: emitted turn_failed and then a report; § Ending: never a report after a failure (line 1: "model down"; report on line 2)`
	if d := detail(res, "failure-explained"); d != want {
		t.Errorf("detail %q, want %q", d, want)
	}
}

// Every stdout line must be JSON; noise and blank lines are not.
func TestConform_JSONOnlyStdout(t *testing.T) { // docs/contracts.md § The event stream, § Conformance checklist
	t.Parallel()
	for name, tc := range map[string]struct{ script, detail string }{
		"a log line":   {readLine + versionCheck + printf("starting up") + stepLine + usageLine + reportLine, `line 1 of 4 is not a JSON object: "starting up"`},
		"a blank line": {readLine + versionCheck + stepLine + "echo\n" + usageLine + reportLine, `line 2 of 4 is not a JSON object: ""`},
		"a JSON array": {readLine + versionCheck + stepLine + printf("[1,2]") + usageLine + reportLine, `line 2 of 4 is not a JSON object: "[1,2]"`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := conformAll(t, engine(t, tc.script), map[string]Status{"json-only-stdout": Fail})
			if d := detail(res, "json-only-stdout"); d != tc.detail {
				t.Errorf("detail %q, want %q", d, tc.detail)
			}
		})
	}
}

// Exactly one report, and it is the last line.
func TestConform_OneReportLast(t *testing.T) { // docs/contracts.md § The report line, § Conformance checklist
	t.Parallel()
	for name, tc := range map[string]struct {
		script, detail string
		also           map[string]Status
	}{
		"two reports":        {conforming + reportLine, "2 subrun_report lines (lines 3, 4)", nil},
		"an event after it":  {conforming + stepLine, `the report is line 3 but line 4 follows it: "{\"event\":\"agent_step\",\"step\":1}"`, nil},
		"a stray report key": {readLine + versionCheck + printf(`{"event":"agent_step","step":1,"subrun_report":1}`) + usageLine + reportLine, "2 subrun_report lines (lines 1, 3)", nil},
		"no report at all":   {readLine + versionCheck + stepLine + usageLine, "no subrun_report line in 2 lines", map[string]Status{"tolerates-open-stdin": Fail}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want := map[string]Status{"one-report-last": Fail}
			for k, v := range tc.also {
				want[k] = v
			}
			res := conformAll(t, engine(t, tc.script), want)
			if d := detail(res, "one-report-last"); d != tc.detail {
				t.Errorf("detail %q, want %q", d, tc.detail)
			}
		})
	}
}

// Every usage event carries the five fields, integral, and a valid cost_usd
// when it has one.
func TestConform_WellFormedUsage(t *testing.T) { // docs/contracts.md § The event stream, § Conformance checklist
	t.Parallel()
	usage := func(fields string) string {
		return printf(`{"event":"usage","usage":{` + fields + `}}`)
	}
	const five = `"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7`
	for name, tc := range map[string]struct {
		usage  string
		status Status
		detail string
	}{
		"all five":            {usage(five), Pass, "1 usage event(s), all well-formed"},
		"no usage at all":     {"", Pass, "no usage events (optional: the engine reports no token counts)"},
		"2.0, 1e1, a cost":    {usage(`"prompt_tokens":7.0,"completion_tokens":3,"total_tokens":1e1,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7,"cost_usd":0.25`), Pass, "1 usage event(s), all well-formed"},
		"a field missing":     {usage(`"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0`), Fail, "line 2: usage.prompt_cache_miss_tokens is missing (the runner ignores the whole line)"},
		"a fractional count":  {usage(`"prompt_tokens":7.5,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7`), Fail, "line 2: usage.prompt_tokens is 7.5, not an integral number (the runner ignores the whole line)"},
		"a string count":      {usage(`"prompt_tokens":"7","completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7`), Fail, `line 2: usage.prompt_tokens is "7", not an integral number (the runner ignores the whole line)`},
		"a negative cost":     {usage(five + `,"cost_usd":-0.5`), Fail, "line 2: usage.cost_usd is -0.5, not a finite non-negative number (the runner ignores the whole line)"},
		"a null cost":         {usage(five + `,"cost_usd":null`), Fail, "line 2: usage.cost_usd is null, not a finite non-negative number (the runner ignores the whole line)"},
		"usage not an object": {printf(`{"event":"usage","usage":10}`), Fail, "line 2: usage is not an object (the runner ignores the whole line)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := conformAll(t, engine(t, readLine+versionCheck+stepLine+tc.usage+reportLine), map[string]Status{"well-formed-usage": tc.status})
			if d := detail(res, "well-formed-usage"); d != tc.detail {
				t.Errorf("detail %q, want %q", d, tc.detail)
			}
		})
	}
}

// Integral numbers are decided exactly
// (docs/contracts.md § The event stream).
func TestIntegral(t *testing.T) { // docs/contracts.md § The event stream
	t.Parallel()
	for in, want := range map[string]bool{
		"0": true, "-3": true, "2.0": true, "1e2": true, "1E+2": true, "150e-1": true, "-0.0": true,
		"9223372036854775807": true, "9223372036854775808": false, "-9223372036854775808": true,
		"1.5": false, "1e-1": false, "1e400": false, "0e999999": true, "9007199254740993.5": false,
	} {
		if got := integral(json.Number(in)); got != want {
			t.Errorf("integral(%s) = %v, want %v", in, got, want)
		}
	}
	if integral("7") {
		t.Error(`integral of a Go string is true`)
	}
}

// A Target without a command or with an input that is not JSON is refused
// before anything is launched.
func TestConform_InvalidTarget(t *testing.T) {
	t.Parallel()
	if _, err := Run(context.Background(), Target{}); err == nil {
		t.Error("no command: no error")
	}
	if _, err := Run(context.Background(), Target{Command: "sh", Input: json.RawMessage("{nope")}); err == nil {
		t.Error("bad input: no error")
	}
}

// Each launch runs in a fresh scratch directory of its own, never in the
// caller's working directory, and the scratch is gone when Run returns
// (docs/child-contract.md § Checking an engine): an engine that writes to
// its working directory writes nothing of the caller's. A relative script
// path is resolved against the caller's directory first.
func TestConform_LaunchesRunInScratchDirectories(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "pwd.log")
	script := readLine + "pwd >> '" + log + "'\necho edited > edited-by-engine.txt\n" + versionCheck + stepLine + usageLine + reportLine
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "engine.sh"), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	// Run from dir with a relative script path, as `conform -- sh engine.sh`
	// typed in the engine's own directory.
	here, _ := os.Getwd()
	cmd, args := absolute("sh", []string{"engine.sh"})
	if cmd != "sh" || args[0] != "engine.sh" {
		t.Fatalf("absolute from %s: %s %v", here, cmd, args) // engine.sh is not in the test's directory
	}
	target := Target{Command: "sh", Args: []string{filepath.Join(dir, "engine.sh")}, GraceMS: 2000, TimeoutMS: 4000}
	conformAll(t, target, nil)
	if _, err := os.Stat(filepath.Join(here, "edited-by-engine.txt")); err == nil {
		os.Remove(filepath.Join(here, "edited-by-engine.txt"))
		t.Fatal("the engine ran in the caller's working directory")
	}
	raw, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	dirs := strings.Fields(string(raw))
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == here || seen[d] {
			t.Errorf("launch directory %s: the caller's, or shared with another launch (%q)", d, dirs)
		}
		seen[d] = true
		if _, err := os.Stat(d); err == nil {
			t.Errorf("scratch directory %s left behind", d)
		}
	}
	if len(dirs) != 4 {
		t.Errorf("%d launches logged (%q), want 4", len(dirs), dirs)
	}
}

// A relative command path and a relative argument naming a file resolve
// against the caller's directory; flags and other words are left alone.
func TestConform_AbsoluteResolvesFilesOnly(t *testing.T) {
	t.Parallel()
	here, _ := os.Getwd()
	cmd, args := absolute("./engine", []string{"conform_test.go", "-v", "echo", "/abs"})
	if cmd != filepath.Join(here, "engine") || args[0] != filepath.Join(here, "conform_test.go") || args[1] != "-v" || args[2] != "echo" || args[3] != "/abs" {
		t.Errorf("absolute: %s %q", cmd, args)
	}
}

// An engine that watches stdin for EOF while it works (the cancel signal)
// and ends after its report conforms; one that reads stdin to EOF before
// it answers waits for an EOF that only a cancel brings, and fails, the
// detail saying why (docs/child-contract.md § Input).
func TestConform_EOFReadingEngines(t *testing.T) {
	t.Parallel()
	// sh gives a background job /dev/null as its stdin: the watcher reads
	// the engine's stdin through fd 3.
	watcher := readLine + versionCheck + "exec 3<&0\n( cat <&3 >/dev/null; kill $$ 2>/dev/null ) >/dev/null 2>&1 &\n" + stepLine + usageLine + "sleep 0.2\n" + reportLine
	conformAll(t, engine(t, watcher), nil)

	waiter := engine(t, readLine+versionCheck+"cat >/dev/null\n"+stepLine+usageLine+reportLine)
	waiter.TimeoutMS = 1000
	res := conformAll(t, waiter, map[string]Status{"tolerates-open-stdin": Fail})
	if d := detail(res, "tolerates-open-stdin"); !strings.Contains(d, "must not wait for EOF") || !strings.Contains(d, "docs/child-contract.md") {
		t.Errorf("detail %q", d)
	}
}
