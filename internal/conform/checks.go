package conform

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/stratusflow/stratus/internal/contract"
)

// usageFields are the five token fields every usage event carries
// (docs/contracts.md § The event stream).
var usageFields = [...]string{
	"prompt_tokens",
	"completion_tokens",
	"total_tokens",
	"prompt_cache_hit_tokens",
	"prompt_cache_miss_tokens",
}

// object decodes line as a JSON object, numbers kept as written.
func object(line string) (map[string]any, bool) {
	if !json.Valid([]byte(line)) {
		return nil, false
	}
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var obj map[string]any
	if d.Decode(&obj) != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// event returns the event tag of a stdout line, "" when it has none.
func event(line string) (map[string]any, string) {
	obj, ok := object(line)
	if !ok {
		return nil, ""
	}
	tag, _ := obj["event"].(string)
	return obj, tag
}

func isReport(line string) bool {
	obj, ok := object(line)
	if !ok {
		return false
	}
	_, has := obj["subrun_report"]
	return has
}

// quote shortens s for a detail.
func quote(s string) string { return quoteN(s, 60) }

// quoteN quotes s for a detail, cut after max bytes.
func quoteN(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}

// failureTags are the failure events and the field holding their reason
// (docs/contracts.md § The event stream).
var failureTags = map[string]string{
	"turn_failed":        "error",
	"agent_setup_failed": "error",
	"command_error":      "error",
	"agent_aborted":      "reason",
}

// failure is the first failure event of a run's stdout as the runner takes
// it (one with a string reason), and the first report line.
type failure struct {
	tag, reason string
	line        int // 1-based; 0: no failure event
	report      int // 1-based; 0: no report
}

func failureOf(lines []string) failure {
	var f failure
	for i, line := range lines {
		obj, tag := event(line)
		if field, ok := failureTags[tag]; ok && f.line == 0 {
			if reason, ok := obj[field].(string); ok {
				f.tag, f.reason, f.line = tag, reason, i+1
			}
		}
		if f.report == 0 && isReport(line) {
			f.report = i + 1
		}
	}
	return f
}

// insteadOfReport is the detail of a check that needs a report when the
// normal run ended with a failure event and none.
func (f failure) insteadOfReport() string {
	return fmt.Sprintf("the engine reported a failure instead of a report: %s %s; pass --input the engine accepts", f.tag, quoteN(f.reason, 200))
}

// checkRejectsOtherMajor sends workflow_contract 2 and expects a
// command_error event and no report
// (docs/contracts.md § Versioning, § Conformance checklist).
func checkRejectsOtherMajor(ctx context.Context, s *session) (Status, string) {
	t := s.t
	req, err := t.request(contract.ContractVersion + 1)
	if err != nil {
		return Fail, err.Error()
	}
	c := s.launch(ctx, fmt.Sprintf("the workflow_contract %d run", contract.ContractVersion+1), req, false)
	if c.err != nil {
		return Fail, c.err.Error()
	}
	var reason string
	errorLine, reportLine := 0, 0
	for i, line := range c.lines {
		obj, tag := event(line)
		if tag == "command_error" && errorLine == 0 {
			if s, ok := obj["error"].(string); ok {
				errorLine, reason = i+1, s
			}
		}
		if isReport(line) && reportLine == 0 {
			reportLine = i + 1
		}
	}
	sent := fmt.Sprintf("sent workflow_contract %d: ", contract.ContractVersion+1)
	switch {
	case errorLine == 0 && reportLine != 0:
		return Fail, sent + fmt.Sprintf("no command_error event, and a report on line %d", reportLine) + c.note(t)
	case errorLine == 0:
		return Fail, sent + "no command_error event (with a string error)" + c.note(t)
	case reportLine != 0:
		return Fail, sent + fmt.Sprintf("command_error %s, but also a report on line %d", quote(reason), reportLine) + c.note(t)
	}
	return Pass, sent + fmt.Sprintf("command_error %s, no report", quote(reason)) + c.note(t)
}

// checkToleratesOpenStdin runs the engine through the contract runner,
// which keeps stdin open after the request, with a wall deadline of
// t.TimeoutMS; the engine must report and end before the deadline closes
// stdin (docs/contracts.md § The request line, § Conformance checklist). When
// it ends early with the runner's Failed terminal and the normal run shows a
// failure event and no report, the engine refused the request: the detail
// says so rather than blaming stdin.
func checkToleratesOpenStdin(ctx context.Context, s *session) (Status, string) {
	t := s.t
	dir, err := s.launchDir()
	if err != nil {
		return Fail, err.Error()
	}
	spec := contract.LaunchSpec{Command: t.Command, Args: t.Args, Dir: dir, DeadlineMS: t.timeoutMS(), CancelGraceMS: t.graceMS()}
	res, err := contract.NewRunner().Run(ctx, spec, contract.Request{Kind: t.kind(), Input: t.input()}, nil)
	if err != nil {
		return Fail, err.Error()
	}
	timedOut := res.Attempt.WallMS >= int64(spec.DeadlineMS)
	var note string
	if !timedOut {
		// The raw normal run explains a Failed terminal, and says whether a
		// grandchild held stdout (the runner's WallMS then includes its
		// post-exit drain).
		if c, err := s.normalRun(ctx); err == nil && c.err == nil {
			if f := failureOf(c.lines); res.Terminal == contract.Failed && f.line != 0 && f.report == 0 {
				return Fail, f.insteadOfReport()
			}
			if c.held() {
				note = " (in the normal run, " + c.heldNote() + ")"
			}
		}
	}
	switch {
	case timedOut:
		return Fail, fmt.Sprintf("still running with stdin open after %d ms (waiting for more input?); terminal %s once the deadline closed stdin. "+
			"An engine reads one line and must not wait for EOF: stdin stays open while it works and closes only to cancel it (docs/child-contract.md § Input)", spec.DeadlineMS, describe(res))
	case res.Terminal != contract.Captured:
		return Fail, fmt.Sprintf("ended after %d ms without a report: terminal %s", res.Attempt.WallMS, describe(res)) + note
	}
	return Pass, fmt.Sprintf("reported and ended after %d ms with stdin still open", res.Attempt.WallMS) + note
}

// describe names a terminal with its reason.
func describe(res contract.Result) string {
	if res.Terminal == contract.Failed {
		return fmt.Sprintf("Failed(%s)", quote(res.Failure))
	}
	return string(res.Terminal)
}

// checkStopsOnStdinEOF sends the v1 request, lets the engine read it (the
// request is written, then EOFSettleMS pass or the engine prints its first
// stdout line), closes stdin and gives the engine t.GraceMS to end
// (docs/contracts.md § Process lifecycle, § Conformance checklist). It passes
// only when the engine exits and its stdout reaches EOF within the grace,
// with or without a report; an engine still running at the end of the grace
// is killed and fails, and so does one whose stdout another process holds
// open past the grace. An engine that ends on its own before stdin is closed
// passes: it had nothing left to cancel.
func checkStopsOnStdinEOF(ctx context.Context, s *session) (Status, string) {
	t := s.t
	req, err := t.request(contract.ContractVersion)
	if err != nil {
		return Fail, err.Error()
	}
	c := s.launch(ctx, "the stdin-EOF run", req, true)
	if c.err != nil {
		return Fail, c.err.Error()
	}
	report := "no report"
	if failureOf(c.lines).report != 0 {
		report = "a report"
	}
	grace := t.graceMS()
	if c.closedMS < 0 {
		return Pass, fmt.Sprintf("ended on its own after %d ms (%s, %s) before stdin was closed; grace %d ms", c.endMS, c.exitText(), report, grace)
	}
	closed := fmt.Sprintf("stdin closed at %d ms (%s), grace %d ms", c.closedMS, c.closedWhy, grace)
	switch {
	case c.killed && c.exitMS >= 0:
		return Fail, fmt.Sprintf("not stopped within the grace: %s; %s", closed, c.heldNote())
	case c.killed:
		return Fail, fmt.Sprintf("not stopped within the grace: %s; still running %d ms after stdin closed: killed", closed, c.endMS-c.closedMS)
	}
	detail := fmt.Sprintf("%s; ended %d ms after stdin closed (%s, %s)", closed, c.endMS-c.closedMS, c.exitText(), report)
	if c.held() {
		detail += "; " + c.heldNote()
	}
	return Pass, detail
}

// checkJSONOnlyStdout expects every stdout line of a normal run to be a
// JSON object
// (docs/contracts.md § The event stream, § Conformance checklist). A blank
// line is not one.
func checkJSONOnlyStdout(ctx context.Context, s *session) (Status, string) {
	t := s.t
	c, status, detail := normalRun(ctx, s)
	if status == Fail {
		return status, detail
	}
	for i, line := range c.lines {
		if _, ok := object(line); !ok {
			return Fail, fmt.Sprintf("line %d of %d is not a JSON object: %s", i+1, len(c.lines), quote(line)) + c.note(t)
		}
	}
	if len(c.lines) == 0 {
		return Pass, "no stdout at all" + c.note(t)
	}
	return Pass, fmt.Sprintf("%d lines, all JSON objects", len(c.lines)) + c.note(t)
}

// checkOneReportLast expects exactly one stdout line with a top-level
// subrun_report key in a normal run, and nothing but blank lines after it
// (docs/contracts.md § The report line, § Conformance checklist).
func checkOneReportLast(ctx context.Context, s *session) (Status, string) {
	t := s.t
	c, status, detail := normalRun(ctx, s)
	if status == Fail {
		return status, detail
	}
	var reports []int
	last := 0 // the last non-blank line, 1-based
	for i, line := range c.lines {
		if strings.TrimSpace(line) != "" {
			last = i + 1
		}
		if isReport(line) {
			reports = append(reports, i+1)
		}
	}
	switch {
	case len(reports) == 0:
		if f := failureOf(c.lines); f.line != 0 {
			return Fail, f.insteadOfReport() + c.note(t)
		}
		return Fail, fmt.Sprintf("no subrun_report line in %d lines", len(c.lines)) + c.note(t)
	case len(reports) > 1:
		return Fail, fmt.Sprintf("%d subrun_report lines (lines %s)", len(reports), joinInts(reports)) + c.note(t)
	case reports[0] != last:
		return Fail, fmt.Sprintf("the report is line %d but line %d follows it: %s", reports[0], last, quote(c.lines[last-1])) + c.note(t)
	}
	return Pass, fmt.Sprintf("one report, line %d of %d", reports[0], last) + c.note(t)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// checkWellFormedUsage expects every usage event of a normal run to carry
// the five token fields as integral numbers and, when present, a finite
// non-negative cost_usd
// (docs/contracts.md § The event stream, § Conformance checklist). An engine
// without token counters emits no usage event and passes.
func checkWellFormedUsage(ctx context.Context, s *session) (Status, string) {
	t := s.t
	c, status, detail := normalRun(ctx, s)
	if status == Fail {
		return status, detail
	}
	n := 0
	for i, line := range c.lines {
		obj, tag := event(line)
		if tag != "usage" {
			continue
		}
		n++
		if problem := usageProblem(obj["usage"]); problem != "" {
			return Fail, fmt.Sprintf("line %d: %s (the runner ignores the whole line)", i+1, problem) + c.note(t)
		}
	}
	if n == 0 {
		return Pass, "no usage events (optional: the engine reports no token counts)" + c.note(t)
	}
	return Pass, fmt.Sprintf("%d usage event(s), all well-formed", n) + c.note(t)
}

// usageProblem says what is wrong with a usage object, "" when nothing is.
func usageProblem(v any) string {
	u, ok := v.(map[string]any)
	if !ok {
		return "usage is not an object"
	}
	for _, f := range usageFields {
		raw, present := u[f]
		if !present {
			return "usage." + f + " is missing"
		}
		if !integral(raw) {
			return fmt.Sprintf("usage.%s is %s, not an integral number", f, jsonText(raw))
		}
	}
	if raw, present := u["cost_usd"]; present {
		n, ok := raw.(json.Number)
		f, err := strconv.ParseFloat(string(n), 64)
		if !ok || err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 {
			return fmt.Sprintf("usage.cost_usd is %s, not a finite non-negative number", jsonText(raw))
		}
	}
	return ""
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// integral reports whether v is a JSON number whose value is a whole
// integer that fits in int64 (docs/contracts.md § The event stream: 2.0 and
// 1e2 are integral, 1.5 is not), decided exactly, without float rounding.
func integral(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	s := string(n)
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(s[i+1:])
		mant = s[:i]
		if err != nil || e > 400 || e < -400 {
			// Far out of int64 range unless the mantissa is zero.
			return strings.Trim(mant, "-0.") == ""
		}
		exp = e
	}
	r, ok := new(big.Rat).SetString(mant)
	if !ok {
		return false
	}
	scale := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(exp))), nil))
	if exp >= 0 {
		r.Mul(r, scale)
	} else {
		r.Quo(r, scale)
	}
	return r.IsInt() && r.Num().IsInt64()
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// checkFailureExplained flags the violation every run can show of
// docs/child-contract.md § Ending: when to exit, and what the runner concludes
// (item 5 of docs/contracts.md § Conformance checklist): a failure event and
// a report on the same stdout
// (docs/contracts.md § Terminal classification, § Conformance checklist). It
// runs after the other checks and reads every raw launch they made. Otherwise
// it is skipped: docs/contracts.md § Conformance checklist asks that an
// engine that degraded says why with a failure event and sends no report, but
// no request makes every engine degrade.
func checkFailureExplained(_ context.Context, s *session) (Status, string) {
	s.mu.Lock()
	raws := append([]capture(nil), s.raws...)
	s.mu.Unlock()
	// Judge the runs in a fixed order: the normal run first, whatever
	// order the launches ended in.
	sort.SliceStable(raws, func(i, j int) bool { return runOrder(raws[i].name) < runOrder(raws[j].name) })
	for _, c := range raws {
		f := failureOf(c.lines)
		switch {
		case f.line == 0 || f.report == 0:
			continue
		case f.line < f.report:
			return Fail, fmt.Sprintf("%s: emitted %s and then a report; § Ending: never a report after a failure (line %d: %s; report on line %d)", c.name, f.tag, f.line, quote(f.reason), f.report)
		default:
			return Fail, fmt.Sprintf("%s: emitted a report and then %s; § Ending: a failed run sends no report (report on line %d; line %d: %s)", c.name, f.tag, f.report, f.line, quote(f.reason))
		}
	}
	return Skip, "no generic way to make an engine fail; check 1 covers the command_error path"
}

// runOrder ranks a raw launch for checkFailureExplained.
func runOrder(name string) int {
	switch name {
	case "the normal run":
		return 0
	case "the stdin-EOF run":
		return 2
	}
	return 1
}

// normalRun returns the session's shared normal run. A spawn or pipe
// failure fails the check.
func normalRun(ctx context.Context, s *session) (capture, Status, string) {
	c, err := s.normalRun(ctx)
	if err != nil {
		return capture{}, Fail, err.Error()
	}
	if c.err != nil {
		return c, Fail, c.err.Error()
	}
	return c, Pass, ""
}
