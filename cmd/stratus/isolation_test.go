package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/contracts.md § The in-process twin: the in-process worker and a runner
// process per step are the same worker. The demo run (three stages, a review
// loop that reworks once, the supervisor) ends the same in both: its steps
// and their ends, tokens, the ctx files each step left, and each step's
// runner log — the runner's records in the same order, the engine's stderr
// among them.
func TestIsolation_InProcessAndProcessRunTheSame(t *testing.T) {
	t.Parallel()
	type outcome struct {
		steps string
		ctx   map[string]string
		logs  map[string][]string // step log (relative) → its records' messages
	}
	run := func(isolation string) outcome {
		dir := installExample(t, testenv.ModuleRoot(t))
		useIsolation(t, dir, isolation)
		r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
		if r.code != 0 {
			t.Fatalf("%s: run: exit %d\n%s", isolation, r.code, r.stderr)
		}
		s := statusOf(t, dir, decodeRun(t, r.stdout).RunID)
		var steps []string
		for _, st := range s.Steps {
			steps = append(steps, fmt.Sprintf("%s:%s:%s:%d/%d", st.StepRef, st.Status, st.Verdict, st.PromptTokens, st.CompletionTokens))
		}
		slices.Sort(steps) // a supervisor turn runs beside the next stage
		o := outcome{steps: strings.Join(steps, " "), ctx: map[string]string{}, logs: map[string][]string{}}
		ctx := filepath.Join(dir, "workspace/tasks/demo-greeting/ctx")
		filepath.WalkDir(ctx, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() != ".stratus-ctx" { // the marker names its run
				rel, _ := filepath.Rel(ctx, p)
				o.ctx[rel] = stripSubmittedAt(readFile(t, p))
			}
			return nil
		})
		logs := filepath.Join(dir, ".stratus/logs/demo-greeting")
		filepath.WalkDir(logs, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Name() != "runner.log" {
				return nil
			}
			rel, _ := filepath.Rel(logs, p)
			// Up to the engine's end: what a runner does after it is a
			// matter of timing (a supervisor turn's report can come after
			// its run has ended, and is then kept in a spool file).
			for _, line := range strings.Split(readFile(t, p), "\n") {
				var rec struct{ Msg, Component string }
				switch {
				case json.Unmarshal([]byte(line), &rec) == nil:
					o.logs[rel] = append(o.logs[rel], rec.Component+": "+firstWords(rec.Msg))
				case strings.TrimSpace(line) != "":
					o.logs[rel] = append(o.logs[rel], "engine: "+line)
				}
				if rec.Component == "runner" && rec.Msg == "the engine ended" {
					break
				}
			}
			return nil
		})
		return o
	}
	in, proc := run("in-process"), run("process")
	if in.steps != proc.steps {
		t.Errorf("steps differ:\n  in-process %s\n  process    %s", in.steps, proc.steps)
	}
	if !slices.Equal(keys(in.ctx), keys(proc.ctx)) {
		t.Errorf("ctx files differ:\n  in-process %v\n  process    %v", keys(in.ctx), keys(proc.ctx))
	}
	for k, want := range proc.ctx {
		if got := in.ctx[k]; got != want {
			t.Errorf("ctx file %s differs:\n--- in-process\n%s\n--- process\n%s", k, got, want)
		}
	}
	if len(in.logs) == 0 {
		t.Fatal("no runner logs")
	}
	for k, want := range proc.logs {
		if got := in.logs[k]; !slices.Equal(got, want) {
			t.Errorf("runner log %s differs:\n  in-process %q\n  process    %q", k, got, want)
		}
	}
	if len(in.logs) != len(proc.logs) {
		t.Errorf("runner logs: in-process %v, process %v", keys(in.logs), keys(proc.logs))
	}
}

// firstWords is a record's message without what differs from run to run
// (paths, durations): its first four words.
func firstWords(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(len(f), 4)], " ")
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// stripSubmittedAt drops a ctx file's submitted_at line, the one line
// that differs between two runs of the same steps.
func stripSubmittedAt(s string) string { return submittedAt.ReplaceAllString(s, "") }

var submittedAt = regexp.MustCompile(`(?m)^submitted_at: .*\n`)
