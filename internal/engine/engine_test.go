package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		got = append(got, m)
	}
	return got
}

// docs/contracts.md § The reference engine: echo emits one agent_step (step
// 1), one usage (7/3/10, all five fields), then the input echoed back as the
// last line (compact, its number literals as sent: reference_test.go pins the
// bytes).
func TestEcho_StepUsageThenInput(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	Echo(strings.NewReader(`{"workflow_contract":1,"id":"cr-1","kind":"echo","input":{"q": [1, 2.50]}}`+"\n"), &out)
	got := lines(t, out.String())
	if len(got) != 3 || got[0]["event"] != "agent_step" || got[0]["step"] != float64(1) {
		t.Fatalf("events = %v", got)
	}
	u, _ := got[1]["usage"].(map[string]any)
	want := map[string]float64{"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10, "prompt_cache_hit_tokens": 0, "prompt_cache_miss_tokens": 7}
	for k, v := range want {
		if u[k] != v {
			t.Errorf("usage.%s = %v, want %v", k, u[k], v)
		}
	}
	if last := strings.TrimSpace(out.String()[strings.LastIndex(strings.TrimSpace(out.String()), "\n")+1:]); last != `{"subrun_report":{"q":[1,2.50]}}` {
		t.Errorf("report line = %s (the input must be echoed, compact, literals as sent)", last)
	}
}

// docs/contracts.md § The reference engine, § Versioning: any other major is
// a command_error and no report; a bare input line without the envelope is
// accepted.
func TestEcho_EnvelopeVersions(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"workflow_contract":2,"id":"cr-1","kind":"echo","input":{}}`: "unsupported workflow_contract version 2",
		`{"workflow_contract":"1","input":{}}`:                         `unsupported workflow_contract version "1"`,
		"not json":                                                     "request line is not JSON",
		"":                                                             "read request line",
	} {
		var out bytes.Buffer
		Echo(strings.NewReader(in), &out)
		got := lines(t, out.String())
		if len(got) != 1 || got[0]["event"] != "command_error" || !strings.Contains(got[0]["error"].(string), want) {
			t.Errorf("%q: %v", in, got)
		}
		if strings.Contains(out.String(), "subrun_report") {
			t.Errorf("%q: a refused request must get no report", in)
		}
	}
	var out bytes.Buffer
	Echo(strings.NewReader(`{"query":"bare"}`+"\n"), &out)
	if !strings.HasSuffix(strings.TrimSpace(out.String()), `{"subrun_report":{"query":"bare"}}`) {
		t.Errorf("bare input: %s", out.String())
	}
}

func TestScript_AnswersPerNodeAndVisit(t *testing.T) {
	t.Parallel()
	s := &Scenario{
		Nodes: map[string][]Answer{
			"review": {{Report: map[string]any{"findings": []any{map[string]any{"severity": "high"}}}}, {Report: map[string]any{"findings": []any{}}}},
		},
		Default: &Answer{Report: "ok", Steps: 2, PromptTokens: 5, CompletionTokens: 1},
	}
	run := func(node string, visit int) string {
		var out bytes.Buffer
		in, _ := json.Marshal(map[string]any{"workflow_contract": 1, "id": "cr-1", "kind": "agent", "input": map[string]any{"node": node, "visit": visit}})
		if err := Script(context.Background(), s, bytes.NewReader(append(in, '\n')), &out); err != nil {
			t.Fatal(err)
		}
		all := strings.Split(strings.TrimSpace(out.String()), "\n")
		return all[len(all)-1]
	}
	for _, tc := range []struct {
		node  string
		visit int
		want  string
	}{
		{"review", 1, `{"subrun_report":{"findings":[{"severity":"high"}]}}`},
		{"review", 2, `{"subrun_report":{"findings":[]}}`},
		{"review", 7, `{"subrun_report":{"findings":[]}}`}, // the last answer repeats
		{"planning", 1, `{"subrun_report":"ok"}`},
	} {
		if got := run(tc.node, tc.visit); got != tc.want {
			t.Errorf("%s visit %d: %s, want %s", tc.node, tc.visit, got, tc.want)
		}
	}
}

func TestScript_FailEmitsTurnFailedWithoutReport(t *testing.T) {
	t.Parallel()
	s := &Scenario{Default: &Answer{Fail: "model refused"}}
	var out bytes.Buffer
	Script(context.Background(), s, strings.NewReader(`{"workflow_contract":1,"input":{"node":"x","visit":1}}`+"\n"), &out)
	if !strings.Contains(out.String(), `"event":"turn_failed"`) || strings.Contains(out.String(), "subrun_report") {
		t.Errorf("out = %s", out.String())
	}
	s = &Scenario{}
	out.Reset()
	Script(context.Background(), s, strings.NewReader(`{"workflow_contract":1,"input":{"node":"x","visit":1}}`+"\n"), &out)
	if !strings.Contains(out.String(), `no answer for node \"x\"`) {
		t.Errorf("no answer: %s", out.String())
	}
}

// A supervisor turn the scenario has neither an entry nor a default for
// gets a built-in answer, never a command_error: the finalize prose is over
// the layer's 120-character floor and says where it comes from
// (docs/script-engine.md § Supervisor turns). An entry or a default wins.
func TestScript_SupervisorTurnsHaveABuiltInAnswer(t *testing.T) {
	t.Parallel()
	s := &Scenario{Nodes: map[string][]Answer{"planning": {{Report: "p"}}}}
	for _, node := range []string{SupervisorObserve, SupervisorFinalize} {
		a, ok := s.Pick(node, 1)
		text, _ := a.Report.(string)
		if !ok || a.Fail != "" || a.NoReport || !strings.Contains(text, "script engine") {
			t.Errorf("%s: %+v %v", node, a, ok)
		}
		if node == SupervisorFinalize && len(text) < 120 {
			t.Errorf("finalize prose is %d characters, under the layer's 120 floor", len(text))
		}
	}
	if _, ok := s.Pick("implementation", 1); ok {
		t.Error("a flow node without an entry or a default got an answer")
	}
	s.Nodes[SupervisorObserve] = []Answer{{Report: "mine"}}
	s.Default = &Answer{Report: "default"}
	if a, _ := s.Pick(SupervisorObserve, 1); a.Report != "mine" {
		t.Errorf("observe: %v, want the scenario's entry", a.Report)
	}
	if a, _ := s.Pick(SupervisorFinalize, 1); a.Report != "default" {
		t.Errorf("finalize: %v, want the scenario's default", a.Report)
	}
}

// A scenario's files are written, relative to the engine's working
// directory, before the report: the change a coding agent makes (what a
// run's workspace carries to the next step). A path leaving the directory
// is refused when the scenario is read.
func TestScript_FilesAreWrittenInTheWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	s := &Scenario{Default: &Answer{Report: "ok", Files: map[string]string{"cmd/hello/main.go": "package main\n", "README.md": "hi\n"}}}
	var out bytes.Buffer
	Script(context.Background(), s, strings.NewReader(`{"workflow_contract":1,"input":{"node":"x","visit":1}}`+"\n"), &out)
	for f, want := range s.Default.Files {
		if got, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", f, got, err, want)
		}
	}
	if !strings.Contains(out.String(), `"subrun_report":"ok"`) {
		t.Errorf("out = %s", out.String())
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("default:\n  report: ok\n  files: {../escape.txt: x}\n"), 0o644)
	if _, err := LoadScenario(bad); err == nil || !strings.Contains(err.Error(), "../escape.txt") {
		t.Errorf("LoadScenario of a file leaving the dir: %v", err)
	}
}

// sleep_ms is cut short by stdin EOF, the runner's cancel
// (docs/script-engine.md § Answers): the engine ends at once, no report.
func TestScript_SleepEndsOnStdinEOF(t *testing.T) {
	t.Parallel()
	s := &Scenario{Default: &Answer{SleepMS: 60_000, Report: "late"}}
	r, w := io.Pipe()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		Script(context.Background(), s, r, &out)
		close(done)
	}()
	w.Write([]byte(`{"workflow_contract":1,"input":{"node":"x","visit":1}}` + "\n"))
	time.Sleep(50 * time.Millisecond)
	w.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine slept on after stdin closed")
	}
	if strings.Contains(out.String(), "subrun_report") {
		t.Errorf("a cancelled engine reported: %s", out.String())
	}
}

// docs/script-engine.md documents every key a scenario file may hold: the
// yaml names of Scenario and Answer.
func TestScript_EveryScenarioKeyIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "script-engine.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[Scenario](), reflect.TypeFor[Answer]()} {
		for f := range typ.Fields() {
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if key != "" && !strings.Contains(string(doc), "`"+key+"`") {
				t.Errorf("docs/script-engine.md does not document %s (%s.%s)", key, typ.Name(), f.Name)
			}
		}
	}
}
