package conform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/stratusflow/stratus/internal/contract"
)

// Status is the verdict of one check.
type Status string

// The verdicts. Only Fail makes an engine non-conforming; Skip means the
// check could not be run generically.
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Defaults of [Target].
const (
	// DefaultKind is the request's kind when Target.Kind is empty.
	DefaultKind = "conform"
	// DefaultInput is the request's input when Target.Input is empty.
	DefaultInput = `{"query":"stratus engine conform"}`
	// DefaultTimeoutMS bounds, in milliseconds, each launch that is expected
	// to finish on its own (every check but stops-on-stdin-eof).
	DefaultTimeoutMS = 10_000
	// EOFSettleMS is how long, in milliseconds, the stops-on-stdin-eof
	// launch lets the engine read its request before it closes stdin; the
	// engine's first stdout line cuts the wait short.
	EOFSettleMS = 300
)

// Target is the engine under test and the request it is sent.
type Target struct {
	// Command is the engine executable (looked up in PATH when it has no
	// slash); Args follow it.
	Command string
	Args    []string
	// Kind is the request's kind (docs/contracts.md § The request line); ""
	// means DefaultKind.
	Kind string
	// Input is the request's input JSON; empty means DefaultInput.
	Input json.RawMessage
	// GraceMS is the cancel grace in milliseconds
	// (docs/contracts.md § Process lifecycle): how long an engine may take to
	// end after stdin closed before it is killed. 0 (or negative) means
	// contract.DefaultCancelGraceMS.
	GraceMS int
	// TimeoutMS bounds, in milliseconds, a launch expected to finish on its
	// own; when it elapses stdin is closed and, after GraceMS, the engine is
	// killed. 0 (or negative) means DefaultTimeoutMS.
	TimeoutMS int
	// Dir is the scratch root: each launch runs in a fresh directory of its
	// own under it, never in the caller's working directory, so an engine
	// that edits its working directory edits nothing of the caller's
	// (docs/child-contract.md § Checking an engine). "" means a temporary
	// directory that Run removes when it returns. A relative Command or
	// argument naming a file is resolved against the caller's working
	// directory before the launches move elsewhere.
	Dir string
}

func (t Target) kind() string {
	if t.Kind == "" {
		return DefaultKind
	}
	return t.Kind
}

func (t Target) input() json.RawMessage {
	if len(t.Input) == 0 {
		return json.RawMessage(DefaultInput)
	}
	return t.Input
}

func (t Target) graceMS() int {
	if t.GraceMS <= 0 {
		return contract.DefaultCancelGraceMS
	}
	return t.GraceMS
}

func (t Target) timeoutMS() int {
	if t.TimeoutMS <= 0 {
		return DefaultTimeoutMS
	}
	return t.TimeoutMS
}

// request returns the v1 request line (docs/contracts.md § The request line)
// with its workflow_contract replaced by major.
func (t Target) request(major int) ([]byte, error) {
	line, err := contract.Envelope("conform-1", contract.Request{Kind: t.kind(), Input: t.input()})
	if err != nil {
		return nil, err
	}
	// contract.Envelope documents its line as starting with this prefix.
	prefix := fmt.Sprintf(`{"workflow_contract":%d`, contract.ContractVersion)
	if major == contract.ContractVersion {
		return line, nil
	}
	return append([]byte(fmt.Sprintf(`{"workflow_contract":%d`, major)), line[len(prefix):]...), nil
}

// Validate reports a Target that cannot be run: no command, or an input that
// is not JSON.
func (t Target) Validate() error {
	if t.Command == "" {
		return errors.New("no engine command: name the executable to check")
	}
	if _, err := t.request(contract.ContractVersion); err != nil {
		return fmt.Errorf("input %q: %w", t.Input, err)
	}
	return nil
}

// Result is the verdict of one check.
type Result struct {
	// Check is the check's name, e.g. "rejects-other-major".
	Check string `json:"check"`
	// Section is the docs/child-contract.md section it enforces, e.g.
	// "§ Versions".
	Section string `json:"section"`
	Status  Status `json:"status"`
	// Detail says what was sent, observed and measured.
	Detail string `json:"detail"`
}

// Check is one item of the checklist.
type Check struct {
	Name    string
	Section string
	run     func(ctx context.Context, s *session) (Status, string)
	// afterAll: the check judges what the other checks' launches printed,
	// so it runs once they are done.
	afterAll bool
}

// session is one Run: the target, the normal run that several checks
// share, and every raw launch made so far.
type session struct {
	t          Target
	scratch    string // the root the launches' directories are made under
	normalOnce sync.Once
	normal     capture
	normalErr  error // the request could not be built
	mu         sync.Mutex
	raws       []capture
}

// launch runs launchRaw and records its capture for the checks that look
// at every run.
func (s *session) launch(ctx context.Context, name string, request []byte, early bool) capture {
	t := s.t
	dir, err := s.launchDir()
	if err != nil {
		c := capture{name: name, closedMS: -1, exitMS: -1, eofMS: -1, endMS: -1, err: err}
		s.mu.Lock()
		s.raws = append(s.raws, c)
		s.mu.Unlock()
		return c
	}
	t.Dir = dir
	c := launchRaw(ctx, t, name, request, early)
	s.mu.Lock()
	s.raws = append(s.raws, c)
	s.mu.Unlock()
	return c
}

// launchDir makes a fresh directory for one launch under the scratch root.
func (s *session) launchDir() (string, error) {
	dir, err := os.MkdirTemp(s.scratch, "launch-")
	if err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	return dir, nil
}

// normalRun is the raw launch with the v1 request and stdin kept open,
// made once per session and shared by every check that reads its stdout.
func (s *session) normalRun(ctx context.Context) (capture, error) {
	s.normalOnce.Do(func() {
		req, err := s.t.request(contract.ContractVersion)
		if err != nil {
			s.normalErr = err
			return
		}
		s.normal = s.launch(ctx, "the normal run", req, false)
	})
	return s.normal, s.normalErr
}

// Checks returns the checklist of docs/contracts.md § Conformance checklist
// in table order (see the package documentation).
func Checks() []Check {
	return []Check{
		{"rejects-other-major", "§ Versions", checkRejectsOtherMajor, false},
		{"tolerates-open-stdin", "§ Input", checkToleratesOpenStdin, false},
		{"stops-on-stdin-eof", "§ Ending", checkStopsOnStdinEOF, false},
		{"json-only-stdout", "§ Output", checkJSONOnlyStdout, false},
		{"one-report-last", "§ Output", checkOneReportLast, false},
		{"well-formed-usage", "§ Output", checkWellFormedUsage, false},
		{Name: "failure-explained", Section: "§ Ending", run: checkFailureExplained, afterAll: true},
	}
}

// Run runs every check of [Checks] against t concurrently and returns their
// results in table order. The engine is launched four times, concurrently:
// with workflow_contract 2, through the runner with stdin open, with stdin
// closed once the request is read, and once more raw for the checks that
// read a normal run's stdout. A ctx cancelled by the caller kills the
// launches; their checks then fail with the context's error. Run returns an
// error only for an invalid Target.
func Run(ctx context.Context, t Target) ([]Result, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	t.Command, t.Args = absolute(t.Command, t.Args)
	scratch := t.Dir
	if scratch == "" {
		var err error
		if scratch, err = os.MkdirTemp("", "stratus-conform-"); err != nil {
			return nil, fmt.Errorf("scratch directory: %w", err)
		}
		defer os.RemoveAll(scratch)
	}
	s := &session{t: t, scratch: scratch}
	checks := Checks()
	results := make([]Result, len(checks))
	run := func(i int, c Check) {
		status, detail := c.run(ctx, s)
		results[i] = Result{Check: c.Name, Section: c.Section, Status: status, Detail: detail}
	}
	for _, last := range []bool{false, true} {
		var wg sync.WaitGroup
		for i, c := range checks {
			if c.afterAll == last {
				wg.Go(func() { run(i, c) })
			}
		}
		wg.Wait()
	}
	return results, nil
}

// absolute resolves, against the current working directory, a relative
// command with a path separator and every relative argument naming an
// existing regular file, so that they name the same files from a launch's
// scratch directory (`conform -- python3 engine.py`).
func absolute(command string, args []string) (string, []string) {
	if !filepath.IsAbs(command) && strings.ContainsRune(command, filepath.Separator) {
		if a, err := filepath.Abs(command); err == nil {
			command = a
		}
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || filepath.IsAbs(a) || strings.HasPrefix(a, "-") {
			continue
		}
		if st, err := os.Stat(a); err == nil && st.Mode().IsRegular() {
			if abs, err := filepath.Abs(a); err == nil {
				out[i] = abs
			}
		}
	}
	return command, out
}

// Passed reports whether no result is a Fail.
func Passed(results []Result) bool {
	for _, r := range results {
		if r.Status == Fail {
			return false
		}
	}
	return true
}
