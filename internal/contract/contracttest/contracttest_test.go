package contracttest

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestVectorsSortedAndLoaded(t *testing.T) {
	vs := Vectors(t)
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
		if !strings.HasSuffix(v.Script, "/"+v.Name+".sh") || v.Want.Terminal == "" {
			t.Errorf("vector %+v", v)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("names not sorted: %v", names)
	}
}

func TestCheck(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	raw := func(s string) *json.RawMessage { r := json.RawMessage(s); return &r }
	good := Result{Terminal: "Captured", Report: json.RawMessage(`{"b":1, "a":[2]}`),
		Attempt: Attempt{ID: "cr-1", Steps: 4, PromptTokens: 32, CompletionTokens: 16, CostUSD: f(0.4 + 1e-12)}}
	want := Want{Terminal: "Captured", Report: raw(`{"a":[2],"b":1}`), Steps: 4, PromptTokens: 32, CompletionTokens: 16, CostUSD: f(0.4)}
	if bad := want.Check(good); len(bad) != 0 {
		t.Fatalf("matching result: %q", bad)
	}
	for _, tc := range []struct {
		name string
		edit func(*Result, *Want)
		want string
	}{
		{"terminal", func(r *Result, _ *Want) { r.Terminal = "NoReport" }, "terminal = NoReport"},
		{"report differs", func(r *Result, _ *Want) { r.Report = json.RawMessage(`null`) }, "report = null"},
		{"report absent", func(r *Result, _ *Want) { r.Report = nil }, "report absent"},
		{"report unwanted", func(_ *Result, w *Want) { w.Report = nil }, "want it absent"},
		{"null report is not absent", func(r *Result, w *Want) { r.Report = nil; w.Report = raw("null") }, "report absent"},
		{"failure text", func(r *Result, w *Want) {
			r.Terminal, w.Terminal, w.Report, r.Report, r.Failure = "Failed", "Failed", nil, nil, "exit status 2"
			w.FailureContains = "status 3"
		}, `want it to contain "status 3"`},
		{"failure on Captured", func(r *Result, _ *Want) { r.Failure = "boom" }, "on a Captured terminal"},
		{"attempt id", func(r *Result, _ *Want) { r.Attempt.ID = "x" }, "attempt id"},
		{"steps", func(r *Result, _ *Want) { r.Attempt.Steps = 5 }, "5/32/16, want 4/32/16"},
		{"cost off", func(r *Result, _ *Want) { r.Attempt.CostUSD = f(0.41) }, "cost_usd = 0.41"},
		{"cost unknown", func(r *Result, _ *Want) { r.Attempt.CostUSD = nil }, "cost_usd = null"},
		{"cost known", func(_ *Result, w *Want) { w.CostUSD = nil }, "want null"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := good, want
			tc.edit(&r, &w)
			bad := w.Check(r)
			if len(bad) != 1 || !strings.Contains(bad[0], tc.want) {
				t.Errorf("mismatches %q, want one containing %q", bad, tc.want)
			}
		})
	}
}

// A vector whose script runs a command from outside the shell says so, so
// a machine without it skips the vector naming the command instead of
// failing with "python3: not found".
func TestNeeds_NamesTheCommandsAScriptRuns(t *testing.T) {
	t.Parallel()
	for script, want := range map[string][]string{
		"read line\nprintf '{}'\n":                      nil,
		"printf '%s' \"$line\" | python3 -c 'import x'": {"python3"},
		"timeout 1 sh -c 'read extra'; sleep 2":         {"timeout", "sleep"},
		"# concatenate, python3.11, my-timeout, /x/cat": nil,
	} {
		if got := needs([]byte(script)); !slices.Equal(got, want) {
			t.Errorf("needs(%q) = %q, want %q", script, got, want)
		}
	}
	for name, want := range map[string]string{"envelope_checked": "python3", "stdin_kept_open": "timeout"} {
		if v := Load(t, name); !slices.Contains(v.Needs, want) {
			t.Errorf("vector %s needs %q, want %s among them", name, v.Needs, want)
		}
	}
}
