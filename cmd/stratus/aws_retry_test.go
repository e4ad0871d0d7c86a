//go:build !slim

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
)

// README § Transient failures, on the stand-in: a run whose every
// provider answers 429 parks on Step Functions ("<node>.park", then
// "<node>.wait"), its status reads waiting with when it tries again, and
// it ends done by itself once the providers recover — the same compiled
// machine as embedded, on moto's interpreter.
func TestAWS_EveryProviderRateLimitedParksThenEndsDoneOnMoto(t *testing.T) {
	moto := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	recovered := filepath.Join(t.TempDir(), "recovered")
	dir, task := tinyRun(t, "", rateLimitedEngine, "{RECOVERED: "+recovered+"}", "t-park-aws")
	usePrimaryShellEngineEnv(t, dir, "shy", "{RECOVERED: "+recovered+"}")
	cfgPath := filepath.Join(dir, ".stratus/config.yaml")
	writeTestFile(t, cfgPath, strings.Replace(readFile(t, cfgPath), "primary: shy", "primary: shx", 1))
	retryConfig(t, dir, []string{"shx", "shy"}, "    max_attempts: 1\n    base_delay_s: 1\n    max_delay_s: 2\n    max_blocked_s: 600\n")

	st := deployStack(t, ctx, moto, dir)
	fns := startFunctions(t, ctx, st)
	defer fns.stop()
	stackName := st.createStack(t, ctx) // per-run state machines: the run's own compiled flow
	useAWSForTest(t, ctx, newOpCounter())
	flags := []string{"--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--stack", stackName, "--poll-interval", "200ms"}
	done := make(chan result, 1)
	go func() { done <- mainOut(append([]string{"run", task, "--dir", dir, "--no-pull"}, flags...)...) }()

	var runID string
	var last result
	opFlags := flags[:len(flags)-2] // the reading commands take no --poll-interval
	eventually(t, 90*time.Second, "the run to park waiting", func() bool {
		select {
		case r := <-done:
			t.Fatalf("the run ended before it parked: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		default:
		}
		last = mainOut(append([]string{"runs", "--json"}, opFlags...)...)
		var lines []RunLine
		if last.code != 0 || json.Unmarshal([]byte(last.stdout), &lines) != nil {
			return false
		}
		for _, l := range lines {
			if l.TaskID == "t-park-aws" && l.Status == "waiting" {
				runID = l.RunID
				return true
			}
		}
		return false
	})
	s := mainOut(append([]string{"status", runID}, opFlags...)...)
	if !strings.Contains(s.stdout, "waiting") || !strings.Contains(s.stdout, "tries again at") {
		t.Errorf("status of the parked run on the stand-in:\n%s%s", s.stdout, s.stderr)
	}
	writeTestFile(t, recovered, "")
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		t.Fatal("the parked run did not go on once the providers recovered")
	}
	if r.code != ExitOK {
		t.Fatalf("run --target aws: exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "park  first#1") || !strings.Contains(r.stderr, "retry first#1") {
		t.Errorf("the progress lines do not show the retry and the park:\n%s", r.stderr)
	}
	run, err := st.store.GetRun(ctx, runID)
	if err != nil || run.Status != stratus.RunDone {
		t.Errorf("the store's run: %+v %v; want done", run, err)
	}
	if n, _ := st.store.CountVisits(ctx, runID, "first"); n != 1 {
		t.Errorf("visits of first = %d; want 1 (retries and parks are attempts of one step)", n)
	}
}
