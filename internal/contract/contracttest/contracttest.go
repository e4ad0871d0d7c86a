package contracttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// Vector is one pair of testdata/cases/contract.
type Vector struct {
	// Name is the file name without .sh or .expect.json.
	Name string `json:"-"`
	// Script is the absolute path of NAME.sh, run as `sh Script`.
	Script string `json:"-"`
	// Needs lists the commands from outside the shell that Script runs
	// (python3, timeout, …); see [Vector.MustHaveCommands].
	Needs  []string `json:"-"`
	Launch Launch   `json:"launch"`
	Want   Want     `json:"want"`
}

// Launch is how the vector's engine is launched.
type Launch struct {
	Kind          string          `json:"kind"`
	Input         json.RawMessage `json:"input"`
	MaxSteps      *int            `json:"max_steps"`
	DeadlineMS    int             `json:"deadline_ms"`
	CancelGraceMS int             `json:"cancel_grace_ms"`
}

// Want is what the launch must resolve to.
type Want struct {
	Terminal string `json:"terminal"`
	// Report is nil when the key is absent; a JSON null is the literal null.
	Report           *json.RawMessage `json:"report"`
	FailureContains  string           `json:"failure_contains"`
	Steps            int              `json:"steps"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	// CostUSD is nil for null: the cost must be unknown.
	CostUSD *float64 `json:"cost_usd"`
	// MaxWallMS bounds the wall time of the call; [Want.Check] leaves it to
	// the caller, which alone knows what it timed.
	MaxWallMS int64 `json:"max_wall_ms"`
}

// Result is the outcome checked against [Want]: the JSON shape of
// contract.Result and of the object `stratus contract run` prints.
type Result struct {
	Terminal string `json:"terminal"`
	// Report is nil when absent; a null report is the literal null.
	Report  json.RawMessage `json:"report,omitempty"`
	Failure string          `json:"failure,omitempty"`
	Attempt Attempt         `json:"attempt"`
}

// Attempt is the part of contract.Attempt that [Want.Check] compares.
type Attempt struct {
	ID               string   `json:"id"`
	Steps            int      `json:"steps"`
	PromptTokens     int64    `json:"prompt_tokens"`
	CompletionTokens int64    `json:"completion_tokens"`
	CostUSD          *float64 `json:"cost_usd"`
}

// Dir returns the absolute path of testdata/cases/contract.
func Dir(tb testing.TB) string {
	tb.Helper()
	return testenv.Cases(tb, "contract")
}

// Vectors loads every pair of [Dir], sorted by name. It fails tb when there
// are none, when a script has no expectation or the other way round, or
// when an expectation does not decode.
func Vectors(tb testing.TB) []Vector {
	tb.Helper()
	dir := Dir(tb)
	scripts, err := filepath.Glob(filepath.Join(dir, "*.sh"))
	if err != nil {
		tb.Fatal(err)
	}
	expects, err := filepath.Glob(filepath.Join(dir, "*.expect.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(scripts) == 0 || len(scripts) != len(expects) {
		tb.Fatalf("%d scripts, %d expectations in %s", len(scripts), len(expects), dir)
	}
	sort.Strings(scripts)
	vs := make([]Vector, 0, len(scripts))
	for _, s := range scripts {
		vs = append(vs, Load(tb, strings.TrimSuffix(filepath.Base(s), ".sh")))
	}
	return vs
}

// Load decodes NAME.expect.json of [Dir], strictly; it fails tb when the
// file is missing or does not decode, or when NAME.sh is missing.
func Load(tb testing.TB, name string) Vector {
	tb.Helper()
	dir := Dir(tb)
	v := Vector{Name: name, Script: filepath.Join(dir, name+".sh")}
	script, err := os.ReadFile(v.Script)
	if err != nil {
		tb.Fatalf("vector %s: %v", name, err)
	}
	v.Needs = needs(script)
	raw, err := os.ReadFile(filepath.Join(dir, name+".expect.json"))
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("%s.expect.json: %v", name, err)
	}
	// "report": null decodes to a nil pointer; tell it apart from absence.
	var keys struct {
		Want map[string]json.RawMessage `json:"want"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		tb.Fatalf("%s.expect.json: %v", name, err)
	}
	if r, ok := keys.Want["report"]; ok {
		v.Want.Report = &r
	}
	return v
}

// Check compares got with w and returns one line per mismatch; none means
// got satisfies w. MaxWallMS is not checked.
func (w Want) Check(got Result) []string {
	var bad []string
	if got.Terminal != w.Terminal {
		bad = append(bad, fmt.Sprintf("terminal = %s (failure %q), want %s", got.Terminal, got.Failure, w.Terminal))
	}
	switch {
	case w.Report == nil && got.Report != nil:
		bad = append(bad, fmt.Sprintf("report = %s, want it absent", got.Report))
	case w.Report != nil && got.Report == nil:
		bad = append(bad, fmt.Sprintf("report absent, want %s", *w.Report))
	case w.Report != nil:
		if ok, err := JSONEqual(got.Report, *w.Report); err != nil {
			bad = append(bad, fmt.Sprintf("report = %s: %v", got.Report, err))
		} else if !ok {
			bad = append(bad, fmt.Sprintf("report = %s, want %s", got.Report, *w.Report))
		}
	}
	if w.FailureContains != "" && !strings.Contains(got.Failure, w.FailureContains) {
		bad = append(bad, fmt.Sprintf("failure = %q, want it to contain %q", got.Failure, w.FailureContains))
	}
	if w.Terminal != "Failed" && got.Failure != "" {
		bad = append(bad, fmt.Sprintf("failure = %q on a %s terminal", got.Failure, got.Terminal))
	}
	a := got.Attempt
	if !strings.HasPrefix(a.ID, "cr-") {
		bad = append(bad, fmt.Sprintf("attempt id = %q, want cr-N", a.ID))
	}
	if a.Steps != w.Steps || a.PromptTokens != w.PromptTokens || a.CompletionTokens != w.CompletionTokens {
		bad = append(bad, fmt.Sprintf("attempt steps/prompt/completion = %d/%d/%d, want %d/%d/%d",
			a.Steps, a.PromptTokens, a.CompletionTokens, w.Steps, w.PromptTokens, w.CompletionTokens))
	}
	if m := CostMismatch(a.CostUSD, w.CostUSD); m != "" {
		bad = append(bad, m)
	}
	return bad
}

// CostMismatch compares a cost_usd with the one wanted, nil meaning
// unknown (null): equal within 1e-9, or both nil. It returns "" when they
// match, else the mismatch.
func CostMismatch(got, want *float64) string {
	switch {
	case want == nil && got != nil:
		return fmt.Sprintf("cost_usd = %v, want null (unknown)", *got)
	case want != nil && got == nil:
		return fmt.Sprintf("cost_usd = null (unknown), want %v", *want)
	case want != nil && math.Abs(*got-*want) > 1e-9:
		return fmt.Sprintf("cost_usd = %v, want %v", *got, *want)
	}
	return ""
}

// JSONEqual reports whether a and b are the same JSON value, ignoring
// layout and key order; the error names a side that is not valid JSON.
func JSONEqual(a, b []byte) (bool, error) {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return false, fmt.Errorf("invalid JSON %q: %w", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return false, fmt.Errorf("invalid JSON %q: %w", b, err)
	}
	return reflect.DeepEqual(x, y), nil
}

// outsideCommands are the commands a vector script may run that are not
// part of sh itself; a script's [Vector.Needs] are those it names.
var outsideCommands = []string{"python3", "timeout", "sleep", "cat", "jq", "node", "perl"}

// needs returns the outsideCommands named as a word in script.
func needs(script []byte) []string {
	var out []string
	for _, c := range outsideCommands {
		if regexp.MustCompile(`(^|[^A-Za-z0-9_./-])` + regexp.QuoteMeta(c) + `($|[^A-Za-z0-9_.-])`).Match(script) {
			out = append(out, c)
		}
	}
	return out
}

// MustHaveCommands skips tb, naming the command, when one of v.Needs is
// not on PATH (a failure under STRATUS_REQUIRE_ALL=1: internal/testenv).
// Every test that runs a vector's script calls it first.
func (v Vector) MustHaveCommands(tb testing.TB) {
	tb.Helper()
	for _, c := range v.Needs {
		testenv.MustHaveCommand(tb, c, "the contract vector "+v.Name+" runs it")
	}
}
