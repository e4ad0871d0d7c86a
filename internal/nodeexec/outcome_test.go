package nodeexec

import (
	"strings"
	"testing"
)

func exited(set, name string, code int) CheckRun {
	return CheckRun{Set: set, Name: name, Status: StatusExited, ExitCode: code}
}

// worc configuration.md § Run-all, then aggregate: incomplete beats fail
// beats pass; skips never count as passed; nothing selected passes
// vacuously. reference.md § checks node: only broken citations gate.
func TestChecksVerdict_RunAllThenAggregate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		res     *ChecksResult
		outcome string
		manual  bool
		reason  string
	}{
		{"no command sets passes vacuously", &ChecksResult{Checker: CommandProfile, Note: "no command_sets"}, Pass, false, "no command_sets"},
		{"empty diff passes vacuously", &ChecksResult{Checker: CommandProfile, Selection: SelectedByDiff}, Pass, false, "vacuously"},
		{"all exit 0 passes", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "vet", 0), exited("go", "test", 0)}}, Pass, false, "2 checks passed"},
		{"a non-zero exit fails", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "vet", 0), exited("go", "test", 1)}}, Fail, false, "go/test (exit 1)"},
		{"a timeout fails", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "go", Name: "test", Status: StatusTimedOut, ExitCode: -1}}}, Fail, false, "timed out"},
		{"a required launch error is incomplete even when others fail", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{
			exited("go", "test", 1), {Set: "py", Name: "lint", Status: StatusLaunchError, Error: "ruff: not found on PATH"}}}, "", true, "could not launch"},
		{"every check skipped is incomplete", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "ios", Name: "build", Status: StatusSkipped}}}, "", true, "every selected check was skipped"},
		{"a partial skip passes and says so", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "test", 0), {Set: "ios", Name: "build", Status: StatusSkipped}}}, Pass, false, "1 skipped (toolchain absent), not passed: ios/build"},
		{"a partial skip with a failure fails", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "test", 2), {Set: "ios", Name: "build", Status: StatusSkipped}}}, Fail, false, "exit 2"},
		{"citation: a broken entry fails", &ChecksResult{Checker: Citation, Citations: []CitationEntry{{ID: "s1", Verdict: Verified}, {ID: "s2", Verdict: Broken}}}, Fail, false, "1 of 2 citations broken"},
		{"citation: weak and uncheckable do not gate", &ChecksResult{Checker: Citation, Citations: []CitationEntry{{Verdict: Weak}, {Verdict: Uncheckable}}}, Pass, false, "1 weak"},
		{"citation: a missing manifest does nothing", &ChecksResult{Checker: Citation, Note: "uncheckable: sources.json missing"}, Pass, false, "sources.json missing"},
		{"no result is incomplete", nil, "", true, "empty"},
		// docs/runner-image.md § When a check cannot run.
		{"exit 127 is the environment, not a failing test", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "vet", 0), exited("go", "test", 127)}}, "", true, "go/test (exit 127: a command it runs was not found"},
		{"exit 126 is the environment", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("sh", "lint", 126)}}, "", true, "not executable"},
		{"exit 127 names what the shell said", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "go", Name: "test", Status: StatusExited, ExitCode: 127,
			Output: "running\nsh: 1: gotest: not found\n"}}}, "", true, `exit 127: a command it runs was not found (it said: sh: 1: gotest: not found); install it`},
		{"go without a build cache is the environment", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "go", Name: "test", Status: StatusExited, ExitCode: 1,
			Output: "build cache is required, but could not be located: GOCACHE is not defined and neither $XDG_CACHE_HOME nor $HOME are defined\n"}}}, "", true, "give the runner a HOME"},
		{"an environment failure beside a failing test still parks", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{exited("go", "test", 1), exited("js", "test", 127)}}, "", true, "the toolchain's environment, not the code: 1 of 2"},
		{"the message in a passing check is not a failure", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "go", Name: "test", Status: StatusExited,
			Output: "GOCACHE is not defined and neither $XDG_CACHE_HOME nor $HOME are defined"}}}, Pass, false, "1 check passed"},
		{"exit 2 with ordinary output is a failing test", &ChecksResult{Checker: CommandProfile, Runs: []CheckRun{{Set: "go", Name: "test", Status: StatusExited, ExitCode: 2, Output: "--- FAIL: TestX\nHOME=/root"}}}, Fail, false, "go/test (exit 2)"},
	} {
		v := ChecksVerdict(tc.res)
		if v.Outcome != tc.outcome || v.Manual != tc.manual || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want outcome %q manual %v reason containing %q", tc.name, v, tc.outcome, tc.manual, tc.reason)
		}
		if v.Manual && v.Error != ErrChecksIncomplete {
			t.Errorf("%s: error %q, want %s", tc.name, v.Error, ErrChecksIncomplete)
		}
	}
}

// worc flow-authoring.md § Custom tool nodes; reference.md § tool node.
func TestToolOutcome_JSONAuthoritativeElseExitCode(t *testing.T) {
	t.Parallel()
	ok := func(code int, stdout, stderr string) *ToolResult {
		return &ToolResult{Name: "t", Status: StatusExited, ExitCode: code, Stdout: stdout, StdoutBytes: int64(len(stdout)), Stderr: stderr, TimeoutSeconds: 9}
	}
	for _, tc := range []struct {
		name    string
		res     *ToolResult
		outcome string
		err     string // the manual error name, "" when it routes
		reason  string
	}{
		{"exit 0 passes", ok(0, "all good\n", ""), Pass, "", "exited 0"},
		{"non-zero fails", ok(1, "3 problems\n", ""), Fail, "", "exited 1"},
		{"non-zero, no stdout, no stderr fails", ok(1, "", ""), Fail, "", "exited 1"},
		{"JSON pass beats a non-zero exit", ok(1, `{"outcome":"pass"}`, ""), Pass, "", "printed outcome pass"},
		{"JSON fail beats exit 0", ok(0, `{"outcome":"fail","findings":[{"what":"short"}]}`, ""), Fail, "", "printed outcome fail"},
		{"JSON route", ok(0, `{"outcome":"route:large","data":{"n":3}}`, ""), "route:large", "", "route:large"},
		{"JSON on the last line after logs", ok(0, "scanning...\n{\"outcome\":\"route:small\"}\n", ""), "route:small", "", "route:small"},
		{"JSON without outcome falls back to the exit code", ok(3, `{"data":{}}`, ""), Fail, "", "exited 3"},
		{"invalid outcome value", ok(0, `{"outcome":"maybe"}`, ""), "", ErrToolInvalidOutcome, `"maybe"`},
		{"non-string outcome", ok(0, `{"outcome":1}`, ""), "", ErrToolInvalidOutcome, "printed outcome 1"},
		{"route without a label", ok(0, `{"outcome":"route:"}`, ""), "", ErrToolInvalidOutcome, "route:"},
		{"crashed checker", ok(2, "", "Traceback: boom\n"), "", ErrToolCrashed, "stderr: Traceback: boom"},
		{"timeout is manual", &ToolResult{Name: "t", Status: StatusTimedOut, TimeoutSeconds: 9}, "", ErrToolTimedOut, "timeout of 9 s"},
		{"launch error is manual", &ToolResult{Name: "t", Status: StatusLaunchError, Error: "not installed"}, "", ErrToolLaunch, "not installed"},
	} {
		v := ToolOutcome(tc.res)
		if v.Outcome != tc.outcome || v.Error != tc.err || v.Manual != (tc.err != "") || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want outcome %q error %q reason containing %q", tc.name, v.Verdict, tc.outcome, tc.err, tc.reason)
		}
	}
}

// An outcome object cut short or malformed never passes on the exit code:
// it is an invalid outcome (→ manual_action_required). A stdout kept as
// head and tail is read by the tail's last line. JSON log lines are not
// taken for a cut object.
func TestToolOutcome_CutOrMalformedOutcomeObjectIsInvalid(t *testing.T) {
	t.Parallel()
	ok := func(code int, stdout string) *ToolResult {
		return &ToolResult{Name: "t", Status: StatusExited, ExitCode: code, Stdout: stdout, StdoutBytes: int64(len(stdout))}
	}
	cut := func(head, tail string, total int64) *ToolResult {
		return &ToolResult{Name: "t", Status: StatusExited, Stdout: head, StdoutTail: tail, StdoutBytes: total}
	}
	for _, tc := range []struct {
		name    string
		res     *ToolResult
		outcome string
		err     string
		reason  string
	}{
		{"a cut object with exit 0", ok(0, `{"outcome": "pass"`), "", ErrToolInvalidOutcome, `not valid JSON: {"outcome": "pass"`},
		{"a cut pretty-printed object", ok(0, "{\n  \"outcome\": \"pass\",\n  \"findings\": ["), "", ErrToolInvalidOutcome, "not valid JSON"},
		{"a cut last line after logs", ok(0, "scanning\n{\"outcome\":\"pass\",\"data\":{"), "", ErrToolInvalidOutcome, "not valid JSON"},
		{"trailing garbage after the object", ok(0, `{"outcome":"pass"} done`), "", ErrToolInvalidOutcome, "not valid JSON"},
		{"JSON log lines then prose still go by the exit code", ok(0, "{\"step\":1,\"outcome\":\"maybe\"}\n{\"step\":2}\nall done\n"), Pass, "", "exited 0"},
		{"prose mentioning outcome is not an object", ok(0, "the \"outcome\" is fine\n"), Pass, "", "exited 0"},
		{"an object without outcome still goes by the exit code", ok(1, `{"data":{"n":1}`), Fail, "", "exited 1"},
		{"head and tail: the tail's last line decides", cut(strings.Repeat("x", 100), "xxx\n{\"outcome\":\"route:big\"}\n", 5000), "route:big", "", "stdout cut: the first 100 and the last 28 of 5000 bytes kept"},
		{"head and tail: a last line longer than the tail", cut("{\"outcome\":\"pass\",\"data\":\"xx", "xx\"}", 5000), "", ErrToolInvalidOutcome, "was cut"},
		{"head and tail: a huge object's head", cut("{\"outcome\":\"pass\",\"data\":\"xx", "xx\n\"}\n}\n", 5000), "", ErrToolInvalidOutcome, "was cut"},
		{"head and tail: no JSON goes by the exit code", cut("log\n", "more log\nend\n", 5000), Pass, "", "exited 0"},
	} {
		v := ToolOutcome(tc.res)
		if v.Outcome != tc.outcome || v.Error != tc.err || v.Manual != (tc.err != "") || !strings.Contains(v.Reason, tc.reason) {
			t.Errorf("%s: got %+v, want outcome %q error %q reason containing %q", tc.name, v.Verdict, tc.outcome, tc.err, tc.reason)
		}
	}
}

// The saved stdout is the whole of it when the head and the tail meet, else
// the head, a line saying how much was dropped, and the tail.
func TestToolResult_KeptStdoutJoinsHeadAndTail(t *testing.T) {
	t.Parallel()
	whole := &ToolResult{Stdout: "head", StdoutTail: "tail", StdoutBytes: 8}
	if got := whole.KeptStdout(); got != "headtail" || !whole.StdoutComplete() {
		t.Errorf("whole: %q", got)
	}
	gap := &ToolResult{Stdout: "head\n", StdoutTail: "tail\n", StdoutBytes: 100}
	if got := gap.KeptStdout(); got != "head\n[stratus: 90 bytes of stdout not kept; the first 5 and the last 5 are]\ntail\n" || gap.StdoutComplete() {
		t.Errorf("gap: %q", got)
	}
}

// A crashed tool's diagnostic is bounded (reference.md § tool node: "a
// bounded redacted stderr diagnostic").
func TestToolOutcome_CrashDiagnosticIsBounded(t *testing.T) {
	t.Parallel()
	stderr := strings.Repeat("x", 10*DiagnosticBytes) + "LAST"
	v := ToolOutcome(&ToolResult{Name: "t", Status: StatusExited, ExitCode: 1, Stderr: stderr})
	if v.Error != ErrToolCrashed || len(v.Reason) > 2*DiagnosticBytes || !strings.HasSuffix(v.Reason, "LAST") {
		t.Errorf("reason of %d bytes: %.80q…", len(v.Reason), v.Reason)
	}
}

// Findings and data are recorded as printed; a fail without findings gets
// the digest the repeated-fail guard compares.
func TestToolOutcome_RecordsFindingsAndData(t *testing.T) {
	t.Parallel()
	v := ToolOutcome(&ToolResult{Name: "t", Status: StatusExited, ExitCode: 1, Stdout: `{"outcome":"fail","findings":[{"what":"a"}],"data":{"k":1}}`})
	if string(v.Findings) != `[{"what":"a"}]` || string(v.Data) != `{"k":1}` || v.Digest != "" {
		t.Errorf("got findings %s data %s digest %q", v.Findings, v.Data, v.Digest)
	}
}

// reference.md § tool node: two identical fail results without findings
// from the same node park on the second; changed output or findings reset
// the guard.
func TestRepeatedFail_IdenticalFailWithoutFindingsParks(t *testing.T) {
	t.Parallel()
	fail := func(stdout string) ToolVerdict {
		return ToolOutcome(&ToolResult{Name: "t", Status: StatusExited, ExitCode: 1, Stdout: stdout})
	}
	first := fail("too short: 120 chars\n")
	for _, tc := range []struct {
		name string
		prev string
		cur  ToolVerdict
		want bool
	}{
		{"same output twice", first.Digest, fail("too short: 120 chars\n"), true},
		{"changed output", first.Digest, fail("too short: 340 chars\n"), false},
		{"with findings", first.Digest, fail(`{"outcome":"fail","findings":[{"what":"x"}]}`), false},
		{"previous was not such a fail", "", fail("too short: 120 chars\n"), false},
		{"a pass", first.Digest, ToolOutcome(&ToolResult{Name: "t", Status: StatusExited, Stdout: "too short: 120 chars\n"}), false},
	} {
		if got := RepeatedFail(tc.prev, tc.cur); got != tc.want {
			t.Errorf("%s: RepeatedFail = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The reports say what a reader needs: per command its set, name, argv,
// result, duration, and its output in a fence that survives backticks in
// it, noting a cut.
func TestChecksReport_PerCommandResultAndOutputTail(t *testing.T) {
	t.Parallel()
	r := &ChecksResult{Checker: CommandProfile, Selection: SelectedByDiff, Changed: []string{"a.go"}, ChangedTotal: 1, Runs: []CheckRun{
		{Set: "go", Name: "test", Argv: []string{"go", "test", "./..."}, Status: StatusExited, ExitCode: 1, DurationMS: 42, Output: "```\nFAIL x\n", OutputBytes: 100000},
		{Set: "ios", Name: "build", Argv: []string{"xcodebuild"}, Status: StatusSkipped},
		{Set: "md", Name: "fence", Argv: []string{"sh", "-c", "echo '```'"}, Status: StatusExited},
	}}
	md := ChecksReport(r, ChecksVerdict(r))
	for _, want := range []string{"# Checks: fail", "## go / test", "- argv: `go test ./...`", "- result: exit 1", "- duration: 42 ms",
		"the last 11 of 100000 bytes (the start was cut)", "````text\n```\nFAIL x\n````\n", "skipped (toolchain absent)", "- `a.go`", "- argv: ````sh -c \"echo '```'\"````"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	tr := &ToolResult{Name: "lint", Path: "/x/.stratus/tools/lint", Status: StatusExited, ExitCode: 0, Stdout: `{"outcome":"pass","data":{"n":1}}`, StdoutBytes: 30}
	tmd := ToolReport(tr, ToolOutcome(tr), "/ctx/tools/lint/stdout.txt")
	for _, want := range []string{"# Tool lint: pass", "- exit code: 0", "- stdout: /ctx/tools/lint/stdout.txt", "## Data (recorded, not applied)", `"n": 1`} {
		if !strings.Contains(tmd, want) {
			t.Errorf("tool report lacks %q:\n%s", want, tmd)
		}
	}
}
