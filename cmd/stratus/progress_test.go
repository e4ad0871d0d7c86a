package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// README.md § Live progress: a long step is never silent. While an engine
// works without a word, `stratus run` (stderr not a terminal) prints a busy
// line for its step every STRATUS_PROGRESS_INTERVAL with the elapsed time and
// the counters its runner posted; `--json` streams one JSON object per event
// on stdout — step start, progress with the engine's steps and tokens as they
// stream, end — and the run's end last.
func TestRun_ProgressOfALongStep(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", `read line
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"usage","usage":{"prompt_tokens":1200,"completion_tokens":34,"total_tokens":1234,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1200,"cost_usd":0.02}}\n'
case "$line" in *first*) sleep 4 ;; esac
printf '{"subrun_report": "ok"}\n'
`, "", "t-progress")

	r := runWorkerCLI(t, map[string]string{EnvProgressInterval: "1s"}, "", "run", task, "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	busy := regexp.MustCompile(`(?m)^stratus: busy  first#1 +node=first attempt=1 elapsed=(\d+(?:\.\d)?s) 1 step, 1200/34 tokens, \$0\.0200$`).FindAllStringSubmatch(r.stderr, -1)
	if len(busy) < 2 {
		t.Errorf("%d busy lines for first#1 during its 4 s of silence, want at least 2 (one per second):\n%s", len(busy), r.stderr)
	}

	evs := jsonLines(t, r.stdout)
	var seq []string
	for _, e := range evs {
		if e["step_ref"] == "first#1" || e["event"] == "run_ended" {
			seq = append(seq, e["event"].(string))
		}
	}
	if got := strings.Join(seq, " "); !strings.HasPrefix(got, "step_started step_progress") || !strings.HasSuffix(got, "step_ended run_ended") {
		t.Errorf("first#1's events: %s; want step_started, step_progress…, step_ended, and run_ended last\n%s", got, r.stdout)
	}
	for _, e := range evs {
		if e["event"] == "step_progress" && e["step_ref"] == "first#1" {
			if e["steps"] != float64(1) || e["prompt_tokens"] != float64(1200) || e["completion_tokens"] != float64(34) || e["cost_usd"] != 0.02 || e["run_id"] == "" {
				t.Errorf("progress event %v; want the engine's step, tokens and cost", e)
			}
			break
		}
	}
	if res := decodeRun(t, r.stdout); res.Status != "done" {
		t.Errorf("run ended %s", res.Status)
	}
}

// README.md § Live progress: an interrupted run's --json stream closes each
// open step with its step_ended (canceled) before run_ended, as status
// --follow shows it.
func TestRun_JSONOfAnInterruptedRunEndsItsOpenStep(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", "read line\nsleep 300\n", "", "t-int")

	cmd := exec.Command(stratusBin, "run", task, "--dir", dir, "--json")
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), `"event":"step_started"`) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no step started:\n%s%s", out.String(), errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	var seq []string
	for _, e := range jsonLines(t, out.String()) {
		seq = append(seq, fmt.Sprint(e["event"], ":", e["step_ref"], ":", e["outcome"]))
	}
	if got := strings.Join(seq, " "); !strings.HasSuffix(got, "step_ended:first#1:canceled run_ended:<nil>:<nil>") {
		t.Errorf("events: %s\nwant first#1's step_ended (canceled), then run_ended", got)
	}
	if res := decodeRun(t, out.String()); res.Status != "interrupted" {
		t.Errorf("run_ended status %s, want interrupted", res.Status)
	}
}

// A run interrupted before its execution started (while it was frozen or
// recorded) exits 130, as any interrupted run does, and --json still ends
// with run_ended (a newcomer saw exit 1 and no run_ended).
func TestEndRun_InterruptedBeforeTheRunStarted(t *testing.T) {
	t.Parallel()
	var out, errb syncBuffer
	io := IO{Out: &out, Err: &errb}
	d := newDisplay(io, true)
	err := endRun(io, d, true, nil, fmt.Errorf("freeze the run's flow: %w", context.Canceled))
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitInterrupted {
		t.Fatalf("endRun = %v; want exit %d", err, ExitInterrupted)
	}
	evs := jsonLines(t, out.String())
	if last := evs[len(evs)-1]; last["event"] != "run_ended" || last["status"] != "interrupted" {
		t.Errorf("stdout %s; want run_ended interrupted", out.String())
	}
	if !strings.Contains(errb.String(), "interrupted before the run started") {
		t.Errorf("stderr %q", errb.String())
	}
}
