package nodeexec

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ChecksReport renders a checks result and its verdict as the Markdown the
// next nodes read as {checks_path} (README.md § Node kinds: "output saved as
// {checks_path}"): the verdict and why, how the sets were selected, then
// per command its set, name, argv, result (exit code, skipped, launch
// error or timeout), duration and output tail in a fenced block, saying
// when the output was cut. Citation results list each entry's verdict and
// the manifest path. The caller redacts it.
func ChecksReport(r *ChecksResult, v Verdict) string {
	var b strings.Builder
	outcome := v.Outcome
	if v.Manual {
		outcome = "incomplete (manual_action_required)"
	}
	fmt.Fprintf(&b, "# Checks: %s\n\n", outcome)
	if v.Reason != "" {
		fmt.Fprintf(&b, "%s\n\n", v.Reason)
	}
	if r == nil {
		return b.String()
	}
	fmt.Fprintf(&b, "- checker: %s\n", r.Checker)
	if r.Checker == Citation {
		mp := "null"
		if r.ManifestPath != "" {
			mp = r.ManifestPath
		}
		fmt.Fprintf(&b, "- manifest_path: %s\n", mp)
		if r.Note != "" {
			fmt.Fprintf(&b, "- note: %s\n", r.Note)
		}
		if len(r.Citations) > 0 {
			b.WriteString("\n| # | Source | Verdict | Why |\n| --- | --- | --- | --- |\n")
			for i, c := range r.Citations {
				src := c.URL
				if c.Path != "" {
					src = c.Path
					if c.Line > 0 {
						src += fmt.Sprintf(":%d", c.Line)
					}
				}
				id := c.ID
				if id == "" {
					id = fmt.Sprint(i + 1)
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(id), cell(src), c.Verdict, cell(c.Why))
			}
		}
		return b.String()
	}
	switch r.Selection {
	case SelectedByDiff:
		fmt.Fprintf(&b, "- selection: by the work tree's diff, %d changed paths\n", r.ChangedTotal)
	case SelectedAll:
		b.WriteString("- selection: every command set (not selected by a diff)\n")
	}
	if r.Note != "" {
		fmt.Fprintf(&b, "- note: %s\n", r.Note)
	}
	if len(r.Changed) > 0 {
		b.WriteString("\n## Changed paths\n\n")
		for _, p := range r.Changed {
			fmt.Fprintf(&b, "- `%s`\n", p)
		}
		if r.ChangedTotal > len(r.Changed) {
			fmt.Fprintf(&b, "- … and %d more\n", r.ChangedTotal-len(r.Changed))
		}
	}
	if len(r.Runs) == 0 {
		return b.String()
	}
	b.WriteString("\n## Results\n\n| Set | Check | Result | Duration |\n| --- | --- | --- | --- |\n")
	for _, c := range r.Runs {
		fmt.Fprintf(&b, "| %s | %s | %s | %d ms |\n", cell(c.Set), cell(c.Name), cell(runResult(c)), c.DurationMS)
	}
	for _, c := range r.Runs {
		fmt.Fprintf(&b, "\n## %s / %s\n\n", c.Set, c.Name)
		fmt.Fprintf(&b, "- argv: %s\n", codeSpan(argvString(c.Argv)))
		if c.Cwd != "" {
			fmt.Fprintf(&b, "- cwd: %s\n", c.Cwd)
		}
		fmt.Fprintf(&b, "- result: %s\n", runResult(c))
		fmt.Fprintf(&b, "- duration: %d ms\n", c.DurationMS)
		if c.Status == StatusSkipped || c.Status == StatusLaunchError {
			continue
		}
		if c.OutputBytes > int64(len(c.Output)) {
			fmt.Fprintf(&b, "- output: the last %d of %d bytes (the start was cut)\n", len(c.Output), c.OutputBytes)
		} else {
			fmt.Fprintf(&b, "- output: %d bytes\n", c.OutputBytes)
		}
		if c.Output != "" {
			b.WriteString("\n" + fenced("text", c.Output))
		}
	}
	return b.String()
}

func runResult(c CheckRun) string {
	switch c.Status {
	case StatusExited:
		if c.ExitCode < 0 {
			return "killed: " + c.Error
		}
		return fmt.Sprintf("exit %d", c.ExitCode)
	case StatusSkipped:
		return "skipped (toolchain absent)"
	case StatusTimedOut:
		return "timed out: " + c.Error
	case StatusLaunchError:
		return "launch error: " + c.Error
	}
	return c.Status
}

// ToolReport renders the short Markdown summary of a tool run written to
// <ctx-dir>/<node>.md: the outcome and why, the executable, exit, duration,
// where its stdout was saved, the stderr tail, and the findings and data it
// printed (recorded, never applied). The caller redacts it.
func ToolReport(r *ToolResult, v ToolVerdict, stdoutPath string) string {
	var b strings.Builder
	outcome := v.Outcome
	if v.Manual {
		outcome = "manual_action_required"
	}
	name := ""
	if r != nil {
		name = r.Name
	}
	fmt.Fprintf(&b, "# Tool %s: %s\n\n", name, outcome)
	if v.Reason != "" {
		fmt.Fprintf(&b, "%s\n\n", v.Reason)
	}
	if r == nil {
		return b.String()
	}
	if r.Path != "" {
		fmt.Fprintf(&b, "- executable: %s\n", r.Path)
	}
	switch r.Status {
	case StatusExited:
		fmt.Fprintf(&b, "- exit code: %d\n", r.ExitCode)
	case StatusTimedOut:
		fmt.Fprintf(&b, "- timed out after %d s\n", r.TimeoutSeconds)
	default:
		fmt.Fprintf(&b, "- %s: %s\n", strings.ReplaceAll(r.Status, "_", " "), r.Error)
	}
	fmt.Fprintf(&b, "- duration: %d ms\n", r.DurationMS)
	if stdoutPath != "" {
		cut := ""
		if !r.StdoutComplete() {
			cut = fmt.Sprintf(", the first %d and the last %d kept", len(r.Stdout), len(r.StdoutTail))
		}
		fmt.Fprintf(&b, "- stdout: %s (%d bytes%s)\n", stdoutPath, r.StdoutBytes, cut)
	}
	if strings.TrimSpace(r.Stderr) != "" {
		if r.StderrBytes > int64(len(r.Stderr)) {
			fmt.Fprintf(&b, "- stderr: the last %d of %d bytes\n", len(r.Stderr), r.StderrBytes)
		} else {
			fmt.Fprintf(&b, "- stderr: %d bytes\n", r.StderrBytes)
		}
		b.WriteString("\n" + fenced("text", r.Stderr))
	}
	for _, s := range []struct {
		title string
		raw   json.RawMessage
	}{{"Findings", v.Findings}, {"Data", v.Data}} {
		if empty(s.raw) {
			continue
		}
		fmt.Fprintf(&b, "\n## %s (recorded, not applied)\n\n", s.title)
		b.WriteString(fenced("json", indentJSON(s.raw)))
	}
	return b.String()
}

// fenced wraps s in a code fence longer than any backtick run inside it.
func fenced(lang, s string) string {
	n, run := 3, 0
	for _, r := range s {
		if r == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return f + lang + "\n" + s + f + "\n"
}

// codeSpan wraps s in a Markdown code span whose backtick run does not
// occur inside it (CommonMark § Code spans).
func codeSpan(s string) string {
	n, run := 1, 0
	for _, r := range s {
		if r == '`' {
			run++
			n = max(n, run+1)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", n)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return f + s + f
}

func indentJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

// argvString shows an argv the way a reader would type it.
func argvString(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$") {
			parts[i] = fmt.Sprintf("%q", a)
		} else {
			parts[i] = a
		}
	}
	return strings.Join(parts, " ")
}
