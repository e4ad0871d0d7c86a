package nodeexec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/stratusflow/stratus/internal/english"
)

// Outcomes of a checks or tool node that route (reference.md § Edges:
// checks and tool emit pass/fail; any kind may emit route:<label>).
const (
	Pass        = "pass"
	Fail        = "fail"
	RoutePrefix = "route:"
)

// Error names a checks or tool step fails with when its verdict is
// manual_action_required. Any of them lands in the compiled Task state's
// Catch, which for these kinds goes to manual_action_required: no fix
// iteration is charged (worc configuration.md § checks: "a fix loop cannot
// help"; § tools: "never a quality fail").
const (
	ErrChecksIncomplete   = "stratus.ChecksIncomplete"    // a required toolchain could not launch, or every selected check was skipped
	ErrToolLaunch         = "stratus.ToolLaunchFailed"    // the tool is not registered, not contained, not executable, or could not start
	ErrToolTimedOut       = "stratus.ToolTimedOut"        // the tool ran past its timeout
	ErrToolCrashed        = "stratus.ToolCrashed"         // non-zero exit, empty stdout, non-empty stderr
	ErrToolInvalidOutcome = "stratus.ToolInvalidOutcome"  // a JSON outcome that is not pass, fail or route:<label>
	ErrToolRepeatedFail   = "stratus.ToolRepeatedFailure" // the same fail, without findings, twice in a row
)

// Verdict is the server's decision on a checks or tool result.
type Verdict struct {
	// Outcome is what the step completes with and the compiled Choice
	// routes on: pass, fail or route:<label>. "" when Manual.
	Outcome string
	// Manual parks the run: the step fails with Error, which the Task
	// state's Catch sends to manual_action_required.
	Manual bool
	Error  string
	Reason string
}

// ChecksVerdict decides a checks node (worc configuration.md § Run-all,
// then aggregate; reference.md § checks node):
//
//   - citation: any broken entry → fail; otherwise pass (weak and
//     uncheckable entries are reported, never gate);
//   - command_profile, nothing ran (no command sets, or an empty diff, or
//     a diff no set claims) → pass, vacuously;
//   - a command that could not launch (a required set's binary absent, a
//     bad cwd) → incomplete (Manual, ErrChecksIncomplete), even if others
//     passed: the agent cannot install host toolchains;
//   - a check that exited for its environment rather than its code
//     (EnvironmentFailure: exit 126 or 127, or a toolchain's message that
//     its cache dir or HOME is missing) → incomplete: a fix loop cannot
//     install a program or give the runner a HOME;
//   - every selected check skipped (toolchain absent) → incomplete;
//   - any launched check that exited non-zero or ran past its timeout →
//     fail;
//   - otherwise pass; a partial skip is said in the reason, never counted
//     as passed.
func ChecksVerdict(r *ChecksResult) Verdict {
	if r == nil {
		return Verdict{Manual: true, Error: ErrChecksIncomplete, Reason: "the checks result is empty"}
	}
	if r.Checker == Citation {
		counts := map[string]int{}
		var broken []string
		for _, c := range r.Citations {
			counts[c.Verdict]++
			if c.Verdict == Broken {
				broken = append(broken, citationName(c))
			}
		}
		tally := fmt.Sprintf("%d verified, %d weak, %d broken, %d uncheckable", counts[Verified], counts[Weak], counts[Broken], counts[Uncheckable])
		if len(broken) > 0 {
			return Verdict{Outcome: Fail, Reason: fmt.Sprintf("%d of %d citations broken (%s): %s", len(broken), len(r.Citations), tally, strings.Join(broken, ", "))}
		}
		if r.Note != "" {
			return Verdict{Outcome: Pass, Reason: r.Note}
		}
		return Verdict{Outcome: Pass, Reason: tally}
	}
	if len(r.Runs) == 0 {
		reason := r.Note
		if reason == "" {
			reason = "no check selected: the node passes vacuously"
		}
		return Verdict{Outcome: Pass, Reason: reason}
	}
	var launch, envs, failed, skipped []string
	for _, c := range r.Runs {
		name := c.Set + "/" + c.Name
		if why := EnvironmentFailure(c); why != "" {
			envs = append(envs, fmt.Sprintf("%s (%s)", name, why))
			continue
		}
		switch c.Status {
		case StatusLaunchError:
			launch = append(launch, fmt.Sprintf("%s (%s)", name, c.Error))
		case StatusSkipped:
			skipped = append(skipped, name)
		case StatusTimedOut:
			failed = append(failed, name+" (timed out)")
		case StatusExited:
			if c.ExitCode != 0 {
				failed = append(failed, fmt.Sprintf("%s (exit %d)", name, c.ExitCode))
			}
		default:
			launch = append(launch, fmt.Sprintf("%s (unknown status %q)", name, c.Status))
		}
	}
	switch {
	case len(envs) > 0:
		reason := fmt.Sprintf("checks incomplete: the toolchain's environment, not the code: %d of %d could not run: %s", len(envs), len(r.Runs), strings.Join(envs, "; "))
		if len(launch) > 0 {
			reason += fmt.Sprintf("; %d could not launch: %s", len(launch), strings.Join(launch, "; "))
		}
		return Verdict{Manual: true, Error: ErrChecksIncomplete, Reason: reason}
	case len(launch) > 0:
		return Verdict{Manual: true, Error: ErrChecksIncomplete,
			Reason: fmt.Sprintf("checks incomplete: %d of %d could not launch: %s", len(launch), len(r.Runs), strings.Join(launch, "; "))}
	case len(skipped) == len(r.Runs):
		return Verdict{Manual: true, Error: ErrChecksIncomplete,
			Reason: fmt.Sprintf("checks incomplete: every selected check was skipped (toolchain absent): %s", strings.Join(skipped, ", "))}
	}
	suffix := ""
	if len(skipped) > 0 {
		suffix = fmt.Sprintf("; %d skipped (toolchain absent), not passed: %s", len(skipped), strings.Join(skipped, ", "))
	}
	if len(failed) > 0 {
		return Verdict{Outcome: Fail, Reason: fmt.Sprintf("%d of %d checks failed: %s%s", len(failed), len(r.Runs), strings.Join(failed, ", "), suffix)}
	}
	return Verdict{Outcome: Pass, Reason: fmt.Sprintf("%s passed%s", english.Plural(len(r.Runs)-len(skipped), "check"), suffix)}
}

// toolchainEnvMessages are what toolchains print when the environment,
// not the code, stops them, each with how to fix it. Kept short and
// exact: a message a failing test could print is not one.
var toolchainEnvMessages = []struct{ text, fix string }{
	{"GOCACHE is not defined and neither $XDG_CACHE_HOME nor $HOME are defined",
		"go found no build cache: give the runner a HOME, or set GOCACHE or XDG_CACHE_HOME in config checks.env"},
	{"neither GOMODCACHE nor GOPATH is set",
		"go found no module cache: give the runner a HOME, or set GOMODCACHE or GOPATH in config checks.env"},
	{"failed to initialize build cache",
		"go could not create its build cache: make HOME (or GOCACHE, XDG_CACHE_HOME in config checks.env) a writable directory"},
	{"$HOME is not defined",
		"the toolchain needs a HOME: give the runner one, or set HOME in config checks.env"},
}

// EnvironmentFailure says why a check that ran failed for its environment
// rather than its code (docs/runner-image.md § When a check cannot run),
// with how to fix it; "" when it did not. It is conservative: exit 127
// (the shell's "command not found"), exit 126 ("not executable"), and a
// non-zero exit whose output carries one of a few toolchain messages about
// a missing cache dir or HOME.
func EnvironmentFailure(c CheckRun) string {
	if c.Status != StatusExited || c.ExitCode == 0 {
		return ""
	}
	said := ""
	if l := lastLine(c.Output); l != "" {
		said = " (it said: " + truncate(strings.ToValidUTF8(l, "?"), 160) + ")"
	}
	switch c.ExitCode {
	case 127:
		return "exit 127: a command it runs was not found" + said + "; install it in the runner image (docs/runner-image.md) or put its directory on the PATH security.allowed_environment passes"
	case 126:
		return "exit 126: a command it runs is not executable" + said + "; check its mode and that it was built for the runner's platform"
	}
	for _, m := range toolchainEnvMessages {
		if strings.Contains(c.Output, m.text) {
			return fmt.Sprintf("exit %d, %q: %s", c.ExitCode, m.text, m.fix)
		}
	}
	return ""
}

// lastLine is the last non-empty line of s, trimmed.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[i+1:])
	}
	return s
}

func citationName(c CitationEntry) string {
	switch {
	case c.ID != "":
		return c.ID
	case c.Line > 0:
		return c.Path + ":" + strconv.Itoa(c.Line)
	}
	return c.Path
}

// ToolVerdict is the decision on a tool result, with what it recorded.
type ToolVerdict struct {
	Verdict
	// Findings and Data are the printed JSON's `findings` and `data`, as
	// printed (nil when absent): recorded, never applied.
	Findings json.RawMessage
	Data     json.RawMessage
	// Digest identifies a fail without findings (sha256 of the exit code
	// and stdout), "" for any other result: RepeatedFail compares it.
	Digest string
}

// ToolOutcome decides a tool node (worc flow-authoring.md § Custom tool
// nodes; reference.md § tool node), in this order:
//
//   - not launched (unregistered, uncontained, not executable, could not
//     start) → Manual, ErrToolLaunch;
//   - timed out → Manual, ErrToolTimedOut (never a fail, never a fix
//     iteration);
//   - stdout is a JSON object (the whole of it, or its last non-empty line)
//     with an "outcome": that outcome is authoritative when it is pass,
//     fail or route:<label> (a label without spaces); any other value →
//     Manual, ErrToolInvalidOutcome. A stdout longer than StdoutBytes is
//     read by its last line (StdoutTail), so a trailing outcome still counts;
//   - no such object, but stdout (or its last non-empty line) starts with
//     "{", contains "outcome" in quotes and is not valid JSON — an outcome
//     object cut short or malformed, e.g. `{"outcome": "pass"` — →
//     Manual, ErrToolInvalidOutcome, like an invalid outcome value: the exit
//     code never passes what may have been a fail (a whole stdout that is
//     a stream of complete JSON values, such as JSON log lines, is not
//     taken for one);
//   - else exit 0 → pass;
//   - a non-zero exit with empty stdout and non-empty stderr is a crashed
//     checker → Manual, ErrToolCrashed, the reason carrying the last 1 KiB
//     of stderr;
//   - else non-zero → fail.
func ToolOutcome(r *ToolResult) ToolVerdict {
	if r == nil {
		return ToolVerdict{Verdict: Verdict{Manual: true, Error: ErrToolLaunch, Reason: "the tool result is empty"}}
	}
	switch r.Status {
	case StatusLaunchError:
		return ToolVerdict{Verdict: Verdict{Manual: true, Error: ErrToolLaunch, Reason: fmt.Sprintf("tool %s could not be launched: %s", r.Name, r.Error)}}
	case StatusTimedOut:
		return ToolVerdict{Verdict: Verdict{Manual: true, Error: ErrToolTimedOut,
			Reason: fmt.Sprintf("tool %s did not finish within its timeout of %d s", r.Name, r.TimeoutSeconds)}}
	case StatusExited:
	default:
		return ToolVerdict{Verdict: Verdict{Manual: true, Error: ErrToolLaunch, Reason: fmt.Sprintf("tool %s: unknown status %q", r.Name, r.Status)}}
	}
	var v ToolVerdict
	obj, malformed := outcomeObject(r)
	if obj != nil {
		v.Findings, v.Data = obj["findings"], obj["data"]
		if raw, ok := obj["outcome"]; ok {
			var s string
			if json.Unmarshal(raw, &s) != nil || !validOutcome(s) {
				v.Verdict = Verdict{Manual: true, Error: ErrToolInvalidOutcome,
					Reason: fmt.Sprintf("tool %s printed outcome %s; valid: %q, %q or \"route:<label>\"", r.Name, truncate(string(raw), 80), Pass, Fail)}
				return v
			}
			v.Outcome = s
			v.Reason = fmt.Sprintf("tool %s printed outcome %s (exit %d)", r.Name, s, r.ExitCode)
		}
	}
	if v.Outcome == "" && malformed != "" {
		cut := ""
		if !r.StdoutComplete() {
			cut = fmt.Sprintf(" (its stdout of %d bytes was cut: the first %d and the last %d kept)", r.StdoutBytes, len(r.Stdout), len(r.StdoutTail))
		}
		v.Verdict = Verdict{Manual: true, Error: ErrToolInvalidOutcome,
			Reason: fmt.Sprintf("tool %s printed what looks like a JSON outcome object but is not valid JSON%s: %s; valid: one JSON object with \"outcome\" %q, %q or \"route:<label>\", as the whole stdout or its last line",
				r.Name, cut, truncate(malformed, 80), Pass, Fail)}
		return v
	}
	if v.Outcome == "" {
		switch {
		case r.ExitCode == 0:
			v.Outcome, v.Reason = Pass, fmt.Sprintf("tool %s exited 0", r.Name)
		case strings.TrimSpace(r.Stdout) == "" && strings.TrimSpace(r.Stderr) != "":
			v.Verdict = Verdict{Manual: true, Error: ErrToolCrashed,
				Reason: fmt.Sprintf("tool %s crashed (exit %d, no stdout); stderr: %s", r.Name, r.ExitCode, tail(strings.TrimSpace(r.Stderr), DiagnosticBytes))}
			return v
		default:
			v.Outcome, v.Reason = Fail, fmt.Sprintf("tool %s exited %d", r.Name, r.ExitCode)
		}
	}
	if !r.StdoutComplete() {
		v.Reason += fmt.Sprintf("; stdout cut: the first %d and the last %d of %d bytes kept", len(r.Stdout), len(r.StdoutTail), r.StdoutBytes)
	}
	if v.Outcome == Fail && empty(v.Findings) {
		sum := sha256.Sum256([]byte(strconv.Itoa(r.ExitCode) + "\x00" + r.Stdout + "\x00" + r.StdoutTail))
		v.Digest = hex.EncodeToString(sum[:])
	}
	return v
}

// RepeatedFail reports whether a tool result repeats the previous visit's
// fail without findings (reference.md § tool node: "Two identical fail
// results without findings from the same node also park on the second
// result before another fix iteration is charged; changed output or
// findings reset that guard"). prevDigest is the previous visit's
// ToolVerdict.Digest ("" when it was anything but such a fail).
func RepeatedFail(prevDigest string, cur ToolVerdict) bool {
	return cur.Digest != "" && cur.Digest == prevDigest
}

func validOutcome(s string) bool {
	if s == Pass || s == Fail {
		return true
	}
	label, ok := strings.CutPrefix(s, RoutePrefix)
	return ok && label != "" && !strings.ContainsFunc(label, unicode.IsSpace)
}

// outcomeQuoted is what marks text as a would-be outcome object.
const outcomeQuoted = `"outcome"`

// outcomeObject finds the JSON object a tool printed: its whole stdout
// when that was kept entirely, else its last non-empty line — read from
// StdoutTail when the middle was dropped, if that line is whole there. obj
// is nil when neither is a JSON object. malformed is the text that looks
// like an outcome object and is not valid JSON ("" when none; see
// ToolOutcome): the whole stdout, when its first JSON value does not
// decode, or the last line.
func outcomeObject(r *ToolResult) (obj map[string]json.RawMessage, malformed string) {
	complete := r.StdoutComplete()
	text := r.StdoutTail
	if complete {
		text = r.Stdout + r.StdoutTail
		if s := strings.TrimSpace(text); strings.HasPrefix(s, "{") {
			if json.Unmarshal([]byte(s), &obj) == nil {
				return obj, ""
			}
			obj = nil
			if strings.Contains(s, outcomeQuoted) && !firstValueDecodes(s) {
				malformed = s
			}
		}
	} else if s := strings.TrimSpace(r.Stdout); strings.HasPrefix(s, "{") && strings.Contains(s, outcomeQuoted) && !firstValueDecodes(s) {
		malformed = s // the head of an object too long to keep
	}
	s := strings.TrimSpace(text)
	i := strings.LastIndexByte(s, '\n')
	if i < 0 && !complete {
		if strings.Contains(s, outcomeQuoted) {
			malformed = s // a last line longer than the tail kept
		}
		return nil, malformed
	}
	last := strings.TrimSpace(s[i+1:]) // the whole stdout when it is one line
	if !strings.HasPrefix(last, "{") {
		return nil, malformed
	}
	if json.Unmarshal([]byte(last), &obj) == nil {
		return obj, malformed
	}
	if strings.Contains(last, outcomeQuoted) {
		malformed = last
	}
	return nil, malformed
}

// firstValueDecodes reports whether s begins with one complete JSON value
// (s may be a stream of them, such as JSON log lines).
func firstValueDecodes(s string) bool {
	var v any
	return json.NewDecoder(strings.NewReader(s)).Decode(&v) == nil
}

// empty reports whether a findings value holds nothing.
func empty(raw json.RawMessage) bool {
	switch string(bytes.TrimSpace(raw)) {
	case "", "null", "[]", "{}", `""`:
		return true
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
