package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/safetext"
)

// Summary is summary.json: one key set for every flow, every terminal and
// both writers (docs/contracts.md § The summary artifacts). The optional keys
// are present only when they apply.
type Summary struct {
	What             string             `json:"what"`
	Summary          string             `json:"summary"`
	FollowUps        []FollowUp         `json:"follow_ups,omitempty"`
	TaskUsage        *Usage             `json:"task_usage,omitempty"`
	SupervisorUsage  *SupervisorUsage   `json:"supervisor_usage,omitempty"`
	CostNotAccounted []CostNotAccounted `json:"cost_not_accounted,omitempty"`
	Degraded         bool               `json:"degraded,omitempty"`
	// ProviderAttempts is the audit trail of the run's agent and evaluator
	// attempts (worc configuration.md § agents.retry: "each attempt,
	// including every retry"), present when one of them failed or a step
	// took more than one: which provider each ran on, how it ended and
	// its failure class (internal/failclass).
	ProviderAttempts []ProviderAttempt `json:"provider_attempts,omitempty"`
	// Publication is the run's pushed branch and pull request
	// (stratus.Publication), once its publish step pushed.
	Publication *stratus.Publication `json:"publication,omitempty"`
}

// ProviderAttempt is one attempt of summary.json's provider_attempts.
type ProviderAttempt struct {
	StepRef  string    `json:"step_ref"`
	Attempt  int       `json:"attempt"`
	Provider string    `json:"provider"`
	Status   string    `json:"status"`            // running | submitted | failed
	Class    string    `json:"class,omitempty"`   // a failed attempt's failure class
	Reason   string    `json:"reason,omitempty"`  // a failed attempt's reason, one line
	RetryAt  time.Time `json:"retry_at,omitzero"` // a rate limit's reset, when its provider said
	Started  time.Time `json:"started_at"`        // UTC
	Ended    time.Time `json:"ended_at,omitzero"` // UTC
}

// providerAttempts is summary.json's provider_attempts: every attempt of
// the agent and evaluator steps, when one failed or a step took more than
// one; nil otherwise.
func (f *Facts) providerAttempts() []ProviderAttempt {
	var out []ProviderAttempt
	eventful := false
	for _, l := range f.Steps {
		if l.Step.Kind != flow.KindAgent && l.Step.Kind != flow.KindEvaluator {
			continue
		}
		eventful = eventful || len(l.Attempts) > 1
		for _, a := range l.Attempts {
			eventful = eventful || a.Status == stratus.AttemptFailed
			pa := ProviderAttempt{StepRef: l.Step.StepRef, Attempt: a.N, Provider: l.Provider(a), Status: a.Status,
				Class: a.Class, RetryAt: a.RetryAt.UTC(), Started: a.StartedAt.UTC(), Ended: a.EndedAt.UTC()}
			if a.Status == stratus.AttemptFailed {
				pa.Reason = oneLine(a.Reason)
			}
			if a.RetryAt.IsZero() {
				pa.RetryAt = time.Time{}
			}
			if a.EndedAt.IsZero() {
				pa.Ended = time.Time{}
			}
			out = append(out, pa)
		}
	}
	if !eventful {
		return nil
	}
	return out
}

// FactHeadings are the three fact sections that close every summary.md,
// whoever wrote the prose (docs/contracts.md § The summary artifacts).
var FactHeadings = []string{"## Pipeline nodes skipped", "## Provider fallbacks", "## Run cost"}

// FollowUpsHeading heads the follow-ups section.
const FollowUpsHeading = "## Follow-ups"

// AllFollowUps is the follow-ups list of the report: the mechanical ones,
// then, when the flow sets emit_follow_ups, the supervisor's own, deduped.
func (f *Facts) AllFollowUps() []FollowUp {
	fus := FollowUps(f.Steps)
	if f.prose() != "" && f.EmitFollowUps {
		fus = mergeFollowUps(fus, f.Synthesis.FollowUps)
	}
	return fus
}

func (f *Facts) summary() Summary {
	s := Summary{What: f.Run.TaskTitle, Summary: f.prose(), FollowUps: f.AllFollowUps(), Degraded: f.Degraded(), Publication: f.Run.Publication}
	s.TaskUsage, s.SupervisorUsage, s.CostNotAccounted = f.usage()
	s.ProviderAttempts = f.providerAttempts()
	return s
}

// markdown renders summary.md: the provider-authored composition when
// prose reached disk, else the deterministic report; through
// safetext.Block.
func (f *Facts) markdown(s Summary) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n", oneLine(f.Run.TaskTitle))
	if s.Summary != "" {
		b.WriteString(s.Summary)
		b.WriteString("\n")
		if len(s.FollowUps) > 0 {
			f.followUpsSection(&b, s.FollowUps)
		}
	} else {
		status := "**" + f.Status + "**"
		if f.Stop != nil && f.Stop.Interrupted && f.Status != stratus.RunInterrupted {
			status += " (interrupted)"
		}
		fmt.Fprintf(&b, "Task `%s`, flow `%s`, run `%s`: %s.\n", f.Run.TaskID, f.Run.Flow, f.Run.ID, status)
		f.whySection(&b)
		if s.Degraded {
			fmt.Fprintf(&b, "\nThe supervisor's synthesis (%s) did not reach this report: %s. It is rendered from the run's recorded facts.\n",
				f.Synthesis.StepRef, f.degradedWhy())
		}
		f.changes(&b)
		f.steps(&b)
		f.checks(&b)
		f.gates(&b)
		f.debt(&b)
		f.followUpsSection(&b, s.FollowUps)
	}
	f.publishing(&b)
	f.skipped(&b)
	f.fallbacks(&b)
	f.cost(&b, s)
	// The prose, reasons, findings and paths are what engines wrote; a
	// reader opens the file in a terminal or a review tool: no control,
	// bidi or invisible format character stays raw, lines and tabs do
	// (docs/security.md § Text an engine wrote). summary.json keeps the
	// text as written, JSON-escaped.
	return []byte(safetext.Block(b.String()))
}

func (f *Facts) degradedWhy() string {
	switch f.Synthesis.Outcome {
	case SynthesisCollapsed:
		return fmt.Sprintf("its prose was %d characters, below the %d-character floor", len([]rune(strings.TrimSpace(f.Synthesis.Discarded))), CollapseFloor)
	case SynthesisFailed:
		return "the turn could not complete (" + oneLine(f.Synthesis.Reason) + ")"
	}
	return "no prose was recorded"
}

func (f *Facts) changes(b *bytes.Buffer) {
	b.WriteString("\n## Changes\n\n")
	switch c := f.Changes; {
	case c.Branch != "" && c.Head == c.Base:
		b.WriteString("No step changed the workspace: the engines worked in checkouts of their own, and the run made no commit.\n")
	case c.Branch != "":
		// The run's own commits are rewritten onto the operator's HEAD
		// when pulled: their hashes are not the branch's, so none is
		// named; the pull line names the branch's tip (README § Workspaces).
		on, log := "", "`git log --stat "+c.Branch+"`"
		if c.Origin != "" {
			on = fmt.Sprintf(" on top of %.12s, your HEAD at run start", c.Origin)
			log = fmt.Sprintf("`git log --stat %.12s..%s`", c.Origin, c.Branch)
		}
		fmt.Fprintf(b, "The engines worked in checkouts of their own; the run's change comes back as the commits of branch `%s`%s: "+
			"one per step that changed the workspace (%d, each named by its step), after one holding the uncommitted changes to tracked files when there were any. "+
			"`stratus pull` makes the branch (an embedded run does when it ends); %s lists its commits.\n", c.Branch, on, c.Commits, log)
	case !f.Changes.Git:
		fmt.Fprintf(b, "Not known: %s.\n", f.Changes.Note)
	case len(f.Changes.Paths) == 0:
		b.WriteString("The work dir has no uncommitted change.\n")
	default:
		for _, p := range f.Changes.Paths {
			code, name, _ := strings.Cut(p, " ")
			fmt.Fprintf(b, "- `%s` %s\n", name, code)
		}
		fmt.Fprintf(b, "\n%s changed (git status of the work dir); the change itself is its diff, not inlined here", english.Plural(len(f.Changes.Paths), "path"))
		if f.Changes.DiffPath != "" {
			fmt.Fprintf(b, ": `%s`", f.Changes.DiffPath)
		}
		b.WriteString(".\n")
	}
}

func (f *Facts) steps(b *bytes.Buffer) {
	b.WriteString("\n## Steps\n\n")
	if len(f.Steps) == 0 {
		b.WriteString("No step ran.\n")
		return
	}
	b.WriteString("| step | outcome | attempts | terminal | duration | tokens in/out |\n|---|---|---|---|---|---|\n")
	for _, l := range f.Steps {
		term, dur, in, out := "", time.Duration(0), int64(0), int64(0)
		for _, a := range l.Attempts {
			term = a.Terminal
			if !a.EndedAt.IsZero() {
				dur += a.EndedAt.Sub(a.StartedAt)
			}
			in += a.PromptTokens
			out += a.CompletionTokens
		}
		if len(l.Attempts) == 0 && !l.Step.EndedAt.IsZero() && l.Step.EndedAt.After(l.Step.CreatedAt) {
			// A step no worker ran (a hitl wait, a publish): its own span,
			// so a hitl that timed out shows how long it waited.
			dur = l.Step.EndedAt.Sub(l.Step.CreatedAt)
		}
		outcome := l.Step.Verdict
		if outcome == "" {
			outcome = l.Step.Status
		}
		if l.Step.Kind == flow.KindPublish && l.Step.Status == stratus.StepRunning {
			// docs/contracts.md § What the supervisor layer does: the
			// publish step writes this report, so it is pending while the
			// report is written; that is expected.
			outcome = "pending (it writes this report)"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %d/%d |\n", l.Step.StepRef, outcome, len(l.Attempts), dash(term), english.Duration(dur), in, out)
	}
}

// checksRun is the part of a checks step's result the report reads
// (internal/nodeexec.Result, decoded loosely so the report reads any
// version of it).
type checksResult struct {
	Checks *struct {
		Checker string `json:"checker"`
		Runs    []struct {
			Set      string `json:"set"`
			Name     string `json:"name"`
			Status   string `json:"status"`
			ExitCode int    `json:"exit_code"`
			Error    string `json:"error"`
		} `json:"runs"`
		Citations []struct {
			Verdict string `json:"verdict"`
		} `json:"citations"`
	} `json:"checks"`
}

// visitFile is the absolute path of a file in a step's log dir, one per
// node visit (.stratus/logs/<task_id>/stages/<node>/run-<visit>/, where
// internal/worker saves a checks visit's checks.md), "" when the work dir
// is unknown.
func (f *Facts) visitFile(st stratus.Step, name string) string {
	if f.Run.WorkDir == "" {
		return ""
	}
	return path.Join(f.Run.WorkDir, Dir(f.Run.TaskID), "stages", st.Node, fmt.Sprintf("run-%06d", st.Visit), name)
}

func (f *Facts) checks(b *bytes.Buffer) {
	b.WriteString("\n## Checks\n\n")
	n := 0
	for _, l := range f.Steps {
		if l.Step.Kind != flow.KindChecks || l.Step.Verdict == "skipped" {
			continue
		}
		n++
		outcome := l.Step.Verdict
		if outcome == "" {
			outcome = l.Step.Status
		}
		fmt.Fprintf(b, "- %s: **%s**", l.Step.StepRef, outcome)
		if l.Reason != "" {
			fmt.Fprintf(b, " (%s)", oneLine(l.Reason))
		}
		if p := f.visitFile(l.Step, "checks.md"); p != "" && l.Final != nil {
			fmt.Fprintf(b, "; output `%s`", p) // this visit's own copy: the ctx file is the latest visit's
		}
		b.WriteString("\n")
		var r checksResult
		if json.Unmarshal(l.Final, &r) != nil || r.Checks == nil {
			continue
		}
		for _, run := range r.Checks.Runs {
			name := run.Name
			if run.Set != "" {
				name = run.Set + "/" + run.Name
			}
			what := run.Status
			switch run.Status {
			case "exited":
				what = fmt.Sprintf("exit %d", run.ExitCode)
			case "skipped":
				what = "skipped (toolchain absent)"
			}
			if run.Error != "" {
				what += ": " + oneLine(run.Error)
			}
			fmt.Fprintf(b, "  - `%s`: %s\n", name, what)
		}
		if len(r.Checks.Citations) > 0 {
			counts := map[string]int{}
			for _, c := range r.Checks.Citations {
				counts[c.Verdict]++
			}
			fmt.Fprintf(b, "  - citations: %s\n", countList(counts, []string{"verified", "weak", "broken", "uncheckable"}))
		}
	}
	if n == 0 {
		b.WriteString("No checks step ran.\n")
	}
}

func (f *Facts) gates(b *bytes.Buffer) {
	b.WriteString("\n## Gates\n\n")
	n := 0
	for _, l := range f.Steps {
		if l.Step.Kind != flow.KindEvaluator || l.Step.Verdict == "skipped" {
			continue
		}
		n++
		verdict := l.Step.Verdict
		if verdict == "" {
			verdict = l.Step.Status
		}
		fmt.Fprintf(b, "- %s: **%s**", l.Step.StepRef, verdict)
		if l.Reason != "" {
			fmt.Fprintf(b, " (%s)", oneLine(l.Reason))
		}
		if len(l.Findings) > 0 {
			counts := map[string]int{}
			for _, x := range l.Findings {
				counts[x.Severity]++
			}
			sev := append([]string(nil), findings.Severities...)
			for i, j := 0, len(sev)-1; i < j; i, j = i+1, j-1 {
				sev[i], sev[j] = sev[j], sev[i]
			}
			fmt.Fprintf(b, " — %s; %d gating at %s", countList(counts, sev), l.GatingCount(), l.Gate)
		}
		if l.AcceptedOpen() {
			b.WriteString("; accepted with gating findings still open (rework budget spent)")
		}
		b.WriteString("\n")
	}
	if n == 0 {
		b.WriteString("No gate decided.\n")
	}
}

// debt lists what the run accepted without resolving: evaluators that
// accepted with gating findings open, best-effort steps that failed, check
// commands skipped for an absent toolchain.
func (f *Facts) debt(b *bytes.Buffer) {
	b.WriteString("\n## Technical debt\n\n")
	n := 0
	latest := map[string]int{}
	for i, l := range f.Steps {
		if l.Step.Kind == flow.KindEvaluator {
			latest[l.Step.Node] = i
		}
	}
	for i, l := range f.Steps {
		switch {
		case l.Step.Kind == flow.KindEvaluator && latest[l.Step.Node] == i && l.AcceptedOpen():
			n++
			fmt.Fprintf(b, "- %s accepted with %s at or above %s still open: its rework budget (max_rework_per_stage %d) was spent.\n",
				l.Step.StepRef, english.Plural(l.GatingCount(), "finding"), l.Gate, l.MaxRework)
		case l.BestEffort && l.Step.Status == stratus.StepFailed:
			n++
			fmt.Fprintf(b, "- %s (best effort) failed and the run went on without it", l.Step.StepRef)
			if l.Reason != "" {
				fmt.Fprintf(b, ": %s", oneLine(l.Reason))
			}
			b.WriteString(".\n")
		case l.Step.Kind == flow.KindChecks:
			var r checksResult
			if json.Unmarshal(l.Final, &r) != nil || r.Checks == nil {
				continue
			}
			for _, run := range r.Checks.Runs {
				if run.Status == "skipped" {
					n++
					fmt.Fprintf(b, "- %s: `%s` was skipped (toolchain absent), so it checked nothing.\n", l.Step.StepRef, run.Name)
				}
			}
		}
	}
	if n == 0 {
		b.WriteString("None recorded.\n")
	}
}

func (f *Facts) followUpsSection(b *bytes.Buffer, fus []FollowUp) {
	b.WriteString("\n" + FollowUpsHeading + "\n\n")
	if len(fus) == 0 {
		b.WriteString("None.\n")
		return
	}
	for _, fu := range fus {
		fmt.Fprintf(b, "- **%s**", oneLine(fu.Title))
		var tags []string
		if fu.Severity != "" {
			tags = append(tags, fu.Severity)
		}
		for _, p := range fu.Paths {
			tags = append(tags, "`"+p+"`")
		}
		if fu.Source != "" {
			tags = append(tags, "from "+fu.Source)
		}
		if len(tags) > 0 {
			fmt.Fprintf(b, " (%s)", strings.Join(tags, ", "))
		}
		if fu.Rationale != "" {
			fmt.Fprintf(b, " %s", oneLine(fu.Rationale))
		}
		if fu.ActionHint != "" {
			fmt.Fprintf(b, " Fix: %s", oneLine(fu.ActionHint))
		}
		b.WriteString("\n")
	}
}

func (f *Facts) skipped(b *bytes.Buffer) {
	b.WriteString("\n" + FactHeadings[0] + "\n\n")
	n := 0
	for _, l := range f.Steps {
		if l.Step.Verdict != "skipped" {
			continue
		}
		n++
		why := l.Reason
		if why == "" {
			why = "skipped"
		}
		fmt.Fprintf(b, "- %s: %s\n", l.Step.StepRef, oneLine(why))
	}
	if n == 0 {
		b.WriteString("None.\n")
	}
}

func (f *Facts) fallbacks(b *bytes.Buffer) {
	b.WriteString("\n" + FactHeadings[1] + "\n\n")
	retried := f.retried()
	if len(f.Degradations) == 0 && len(retried) == 0 {
		b.WriteString("None.\n")
		return
	}
	for _, r := range retried {
		b.WriteString("- " + r + "\n")
	}
	for _, d := range f.Degradations {
		fmt.Fprintf(b, "- %s (attempt %d): %s failed (%s); fell back to %s", d.StepRef, d.Attempt, d.Tool, oneLine(d.Error), d.Fallback)
		if d.Note != "" {
			fmt.Fprintf(b, " — %s", oneLine(d.Note))
		}
		b.WriteString("\n")
	}
}

// retried lists the steps whose attempts failed transiently
// (internal/retry): "implementation#1: 3 attempts — 1 on claude failed
// (provider_unavailable), 2 on claude failed (provider_unavailable), 3 on
// codex submitted".
func (f *Facts) retried() []string {
	var out []string
	for _, l := range f.Steps {
		if l.Step.Kind != flow.KindAgent && l.Step.Kind != flow.KindEvaluator || len(l.Attempts) < 2 {
			continue
		}
		var parts []string
		for _, a := range l.Attempts {
			provider := l.Provider(a)
			if provider == "" {
				provider = "-"
			}
			p := fmt.Sprintf("%d on %s %s", a.N, provider, a.Status)
			if a.Class != "" {
				p += " (" + a.Class + ")"
			}
			parts = append(parts, p)
		}
		out = append(out, fmt.Sprintf("%s: %d attempts — %s", l.Step.StepRef, len(l.Attempts), strings.Join(parts, ", ")))
	}
	return out
}

func (f *Facts) cost(b *bytes.Buffer, s Summary) {
	b.WriteString("\n" + FactHeadings[2] + "\n\n")
	defer f.ranFor(b)
	u := s.TaskUsage
	if u == nil {
		b.WriteString("No provider call was made.\n")
		return
	}
	if u.CostUSD != nil {
		fmt.Fprintf(b, "$%.2f over %s", *u.CostUSD, english.Plural(u.Calls, "provider call"))
	} else {
		fmt.Fprintf(b, "No recorded cost over %s", english.Plural(u.Calls, "provider call"))
	}
	fmt.Fprintf(b, " (%s input tokens, %s output tokens).", tokens(u.InputTokens), tokens(u.OutputTokens))
	for p := range u.ByProvider {
		if f.Families[p] == "claude" && u.CostUSD != nil {
			b.WriteString(" Claude's reported cost includes the subagents its attempts ran.")
			break
		}
	}
	for _, c := range s.CostNotAccounted {
		name := c.Provider
		if name == "" {
			name = "unknown provider"
		}
		fmt.Fprintf(b, " %s cost not accounted (%s, %s input tokens).", capitalize(name), english.Plural(c.Attempts, "attempt"), tokens(c.InputTokens))
	}
	if s.SupervisorUsage != nil {
		fmt.Fprintf(b, " The supervisor layer made %s of them.", english.Plural(s.SupervisorUsage.Calls, "call"))
	}
	// README.md § Cost and token caps: the caps the run ran under; a cost cap
	// cannot see the calls whose cost is unknown, and says so.
	if r := f.Run; r.MaxCostUSD > 0 || r.MaxTokens > 0 {
		var caps []string
		if r.MaxCostUSD > 0 {
			caps = append(caps, fmt.Sprintf("$%.2f", r.MaxCostUSD))
		}
		if r.MaxTokens > 0 {
			caps = append(caps, tokens(r.MaxTokens)+" tokens")
		}
		fmt.Fprintf(b, " Capped at %s.", strings.Join(caps, " and "))
		if r.MaxCostUSD > 0 && len(s.CostNotAccounted) > 0 {
			b.WriteString(" The cost cap counts only known costs: the calls above whose cost is not accounted may have passed it.")
		}
	}
	b.WriteString("\n")
}

// ranFor writes how long the run ran: the sum of its active spans (its
// start and each resume, to its stop), the idle time before a resume left
// out (stratus.Run.Duration); nothing for a run not ended.
func (f *Facts) ranFor(b *bytes.Buffer) {
	r := f.Run
	if r.CreatedAt.IsZero() || r.EndedAt.IsZero() {
		return
	}
	fmt.Fprintf(b, "\nThe run ran %s", english.Duration(r.Duration(r.EndedAt)))
	if r.Resumes > 0 && !r.ResumedAt.IsZero() {
		fmt.Fprintf(b, " over %d spans (its start and %s, each to its stop; the time it stood stopped before a resume is not counted)", r.Resumes+1, english.Plural(r.Resumes, "resume"))
	}
	b.WriteString(".\n")
}

func countList(counts map[string]int, order []string) string {
	var parts []string
	for _, k := range order {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// oneLine folds white space so a value cannot break the Markdown around it.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
