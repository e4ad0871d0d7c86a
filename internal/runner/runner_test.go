package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/contract"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/worker"
)

// fakeAPI is a worker API that serves one payload and records what the
// runner sends.
type fakeAPI struct {
	mu        sync.Mutex
	engine    worker.EngineSpec
	submitted []string
	failed    []string
	stats     []worker.Stats
	auth      []string
	submitErr int // status to answer submit with (0 = 200)
	statsErr  int // status to answer stats with after the first (0 = 204)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, r.Header.Get("Authorization"))
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/v1/worker/prompt":
		json.NewEncoder(w).Encode(worker.Payload{TaskID: "t1", Attempt: 1, Agent: "a", Prompt: "p", StepRef: "a#1", Engine: &f.engine})
	case "/v1/worker/submit":
		if f.submitErr != 0 {
			w.WriteHeader(f.submitErr)
			w.Write([]byte(`{"error":{"code":"internal","message":"boom"}}`))
			return
		}
		f.submitted = append(f.submitted, string(body))
		w.Write([]byte(`{}`))
	case "/v1/worker/result":
		f.failed = append(f.failed, string(body))
		w.Write([]byte(`{}`))
	case "/v1/worker/stats":
		var s worker.Stats
		json.Unmarshal(body, &s)
		f.stats = append(f.stats, s)
		if f.statsErr != 0 && len(f.stats) > 1 {
			w.WriteHeader(f.statsErr)
			w.Write([]byte(`{"error":{"code":"conflict","message":"step a#1: its state no longer waits for it"}}`))
			return
		}
		w.WriteHeader(204)
	default:
		w.WriteHeader(404)
	}
}

func setup(t *testing.T, script string) (*fakeAPI, Options) {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "engine.sh"), []byte(script), 0o755)
	f := &fakeAPI{engine: worker.EngineSpec{Command: "sh", Args: []string{filepath.Join(dir, "engine.sh")}, Dir: dir, DeadlineMS: 5000, Kind: "agent", Input: json.RawMessage(`{"query":"p"}`)}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, Options{APIURL: srv.URL, Handle: "wh-abcdefgh", SpoolDir: filepath.Join(dir, "spool")}
}

// A string report is submitted as its raw text; any other report as its
// JSON text; counters are relayed as stats (docs/architecture.md § The path of one step).
func TestRun_SubmitsReportAndStats(t *testing.T) {
	t.Parallel()
	for script, want := range map[string]string{
		`read l; printf '{"event":"usage","usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":7}}\n{"subrun_report":"plain text"}\n'`: "plain text",
		`read l; printf '{"subrun_report":{"a":[1,2]}}\n'`: `{"a":[1,2]}`,
	} {
		f, o := setup(t, script)
		if err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if len(f.submitted) != 1 || f.submitted[0] != want {
			t.Errorf("submitted %q, want %q", f.submitted, want)
		}
		for _, a := range f.auth {
			if a != "Bearer wh-abcdefgh" {
				t.Errorf("Authorization = %q", a)
			}
		}
		last := f.stats[len(f.stats)-1]
		if f.stats[0].EngineStartedAt == nil || last.Steps == nil {
			t.Errorf("stats = %+v", f.stats)
		}
	}
}

// Every terminal but Captured posts ok=false with the terminal and reason.
func TestRun_NonCapturedPostsFailedResult(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; printf '{"event":"turn_failed","error":"model refused"}\n'`)
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.submitted) != 0 || len(f.failed) != 1 || !strings.Contains(f.failed[0], `"ok":false`) ||
		!strings.Contains(f.failed[0], `"terminal":"Failed"`) || !strings.Contains(f.failed[0], "model refused") {
		t.Errorf("submitted %q failed %q", f.submitted, f.failed)
	}
}

// The runner never loses a report: when submit keeps failing, the report
// goes to a spool file and Run returns ErrSpooled.
func TestRun_UndeliverableReportIsSpooled(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; printf '{"subrun_report":"precious"}\n'`)
	f.submitErr = 503
	start := time.Now()
	err := Run(context.Background(), o)
	if !errors.Is(err, ErrSpooled) {
		t.Fatalf("err = %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(o.SpoolDir, "stratus-spool-*"))
	if len(files) != 1 {
		t.Fatalf("spool files: %v", files)
	}
	if b, _ := os.ReadFile(files[0]); string(b) != "precious" {
		t.Errorf("spooled %q", b)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("retries took %s", time.Since(start))
	}
}

// A silent engine still heartbeats (HeartbeatSeconds must not lapse).
func TestRun_HeartbeatsWhileEngineIsSilent(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; sleep 1; printf '{"subrun_report":"ok"}\n'`)
	o.HeartbeatInterval = 100 * time.Millisecond
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	// engine start + at least 3 heartbeats + final
	if len(f.stats) < 5 {
		t.Errorf("%d stats posts during a 1 s silent engine", len(f.stats))
	}
}

// docs/contracts.md § Output is a tool call: a string report that is
// exactly @file:<abs-path> is submitted as the file's bytes (resolved
// worker-side); a relative or unreadable sentinel fails the attempt
// through a failed result naming the rule, and nothing is submitted.
func TestRun_FileSentinelReportIsResolvedBeforeSubmit(t *testing.T) {
	t.Parallel()
	body := filepath.Join(t.TempDir(), "report.md")
	if err := os.WriteFile(body, []byte("# Report\n\nfrom the file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, o := setup(t, `read l; printf '{"subrun_report":"@file:`+body+`\\n"}\n'`)
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.submitted) != 1 || f.submitted[0] != "# Report\n\nfrom the file\n" || len(f.failed) != 0 {
		t.Errorf("submitted %q failed %q", f.submitted, f.failed)
	}

	for report, want := range map[string]string{
		"@file:report.md":            `"report.md" is relative; the sentinel is @file:<absolute path>`,
		"@file:" + body + ".missing": "no such file",
	} {
		f, o := setup(t, `read l; printf '{"subrun_report":"`+report+`"}\n'`)
		if err := Run(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		var rb struct {
			OK    *bool
			Value struct{ Terminal, Reason string }
		}
		if len(f.failed) == 1 {
			json.Unmarshal([]byte(f.failed[0]), &rb)
		}
		if len(f.submitted) != 0 || rb.OK == nil || *rb.OK || rb.Value.Terminal != "Failed" || !strings.Contains(rb.Value.Reason, want) {
			t.Errorf("%s: submitted %q failed %q, want a failure containing %q", report, f.submitted, f.failed, want)
		}
	}
}

// Every terminal but Captured is reported with a reason a person can act on.
func TestReason_SaysWhatTheTerminalMeans(t *testing.T) {
	t.Parallel()
	for term, want := range map[contract.Terminal]string{
		contract.TimedOut:     "within its deadline of 500 ms",
		contract.NoReport:     "exited without a report",
		contract.MaxSteps:     "ran out of steps",
		contract.ContextYield: "yielded its context",
	} {
		if got := Reason(contract.Result{Terminal: term}, 500); !strings.Contains(got, want) {
			t.Errorf("%s: %q", term, got)
		}
	}
	if got := Reason(contract.Result{Terminal: contract.Failed, Failure: "model refused"}, 0); got != "model refused" {
		t.Errorf("Failed: %q", got)
	}
	// A NoReport after an overlong line says the report may be it.
	res := contract.Result{Terminal: contract.NoReport, Attempt: contract.Attempt{DroppedLines: 1, DroppedMaxBytes: 70 << 20}}
	if got := Reason(res, 0); !strings.Contains(got, "1 stdout line(s) over the 67108864-byte line limit were skipped (the longest 73400320 bytes)") {
		t.Errorf("NoReport after a dropped line: %q", got)
	}
}

// With an output_schema the report is validated; a mismatch fails the
// attempt with the validation errors in its reason, and the schema
// travels in the envelope (docs/contracts.md § The request line).
func TestRun_OutputSchemaMismatchFailsTheAttempt(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; case "$l" in *'"schema"'*) ;; *) printf '{"event":"turn_failed","error":"no schema in envelope"}\n'; exit 0;; esac; printf '{"subrun_report":{"steps":"not a list"}}\n'`)
	f.engine.Schema = json.RawMessage(`{"type":"object","required":["steps"],"properties":{"steps":{"type":"array"}}}`)
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.submitted) != 0 || len(f.failed) != 1 || !strings.Contains(f.failed[0], "does not match output_schema") {
		t.Errorf("submitted %q failed %q", f.submitted, f.failed)
	}
	f2, o2 := setup(t, `read l; printf '{"subrun_report":{"steps":["a"]}}\n'`)
	f2.engine.Schema = f.engine.Schema
	if err := Run(context.Background(), o2); err != nil || len(f2.submitted) != 1 {
		t.Errorf("matching report: %v %q %q", err, f2.submitted, f2.failed)
	}
}

// docs/contracts.md § Per-node overrides: the runner always hands the
// engine the attempt's resolved model, reasoning, permission profile and
// network grant, over the provider's env overlay and its own environment;
// an unset model is an empty variable, not an inherited one.
func TestLaunchSpec_ResolvedOverridesAlwaysInEngineEnv(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mod  func(e *worker.EngineSpec)
		want map[string]string
	}{
		{"AllSet", func(e *worker.EngineSpec) {
			e.Model, e.Reasoning, e.PermissionProfile, e.NetworkAccess = "m1", "high", "workspace-write", true
		}, map[string]string{"STRATUS_MODEL": "m1", "STRATUS_REASONING": "high", "STRATUS_PERMISSION_PROFILE": "workspace-write", "STRATUS_NETWORK_ACCESS": "true", "KEEP": "1"}},
		{"NoneSet_EmptyModelReadOnlyOffline", func(e *worker.EngineSpec) {},
			map[string]string{"STRATUS_MODEL": "", "STRATUS_REASONING": "", "STRATUS_PERMISSION_PROFILE": "read-only", "STRATUS_NETWORK_ACCESS": "false", "KEEP": "1"}},
	} {
		e := worker.EngineSpec{Command: "sh", Env: map[string]string{"STRATUS_MODEL": "from-provider-env", "KEEP": "1"}}
		tc.mod(&e)
		spec, err := launchSpec(&e, Options{APIURL: "http://x", Handle: "wh-abcdefgh"})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for k, v := range tc.want {
			if got, ok := spec.Env[k]; !ok || got != v {
				t.Errorf("%s: env %s = %q (set %v), want %q", tc.name, k, got, ok, v)
			}
		}
	}
}

// A worker whose step is gone — the server answers its stats
// with 409 (its run cancelled, its execution aborted or timed out) — stops
// its engine and exits, rather than run on and spend.
func TestRun_AStepGoneStopsTheEngine(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l
i=0
while [ $i -lt 600 ]; do
  printf '{"event":"agent_step","step":%d}\n' $((i+1))
  i=$((i+1)); sleep 0.1
done
printf '{"subrun_report":"too late"}\n'
`)
	f.statsErr = 409
	o.StatsInterval, o.HeartbeatInterval = 50*time.Millisecond, time.Hour
	err := Run(context.Background(), o)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v; want the engine's run cancelled", err)
	}
	if len(f.submitted) != 0 {
		t.Errorf("a gone step's report was submitted: %q", f.submitted)
	}
}

// The files a launch spec names arrive in the payload; the
// runner writes them to a directory of its own, runs the engine with its
// copies in their place (command, args and env alike), and removes them
// when the attempt ends. Nothing is read from where config.yaml said.
func TestRun_EngineFilesArePlacedAndNamed(t *testing.T) {
	t.Parallel()
	f, o := setup(t, "")
	engine := "#!/bin/sh\nread l\nprintf '{\"subrun_report\":\"%s|%s|%s\"}\\n' \"$0\" \"$(cat \"$1\")\" \"$(cat \"$NOTES\")\"\n"
	f.engine.Command = "./missing/engine.sh"
	f.engine.Args = []string{"scenario.txt"}
	f.engine.Env = map[string]string{"NOTES": "/nowhere/notes.txt"}
	f.engine.Files = []worker.EngineFile{
		{Ref: "./missing/engine.sh", Name: "engine.sh", Body: []byte(engine), Executable: true},
		{Ref: "scenario.txt", Name: "scenario.txt", Body: []byte("the scenario")},
		{Ref: "/nowhere/notes.txt", Name: "notes.txt", Body: []byte("the notes")},
	}
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err, f.failed)
	}
	if len(f.submitted) != 1 {
		t.Fatalf("submitted %q failed %q", f.submitted, f.failed)
	}
	parts := strings.Split(f.submitted[0], "|")
	if len(parts) != 3 || parts[1] != "the scenario" || parts[2] != "the notes" {
		t.Fatalf("engine saw %q, want its $0|the scenario|the notes", f.submitted[0])
	}
	self := parts[0]
	if !strings.HasSuffix(self, "engine.sh") || strings.HasPrefix(self, "./missing") {
		t.Errorf("engine ran as %q, want the runner's copy", self)
	}
	if _, err := os.Stat(filepath.Dir(self)); !os.IsNotExist(err) {
		t.Errorf("the engine files' dir %s outlived the attempt: %v", filepath.Dir(self), err)
	}
}

// With a cache (the in-process launcher's: InProcess), two steps of
// the same engine run the same read-only copies, written once and kept
// after the steps; Close removes them. Other bytes get another copy.
func TestRun_EngineFilesSharedThroughTheCache(t *testing.T) {
	t.Parallel()
	var cache EngineFileCache
	engine := "#!/bin/sh\nread l\nprintf '{\"subrun_report\":\"%s\"}\\n' \"$0\"\n"
	run := func(body string) string {
		f, o := setup(t, "")
		o.EngineFiles = &cache
		f.engine.Command = "./missing/engine.sh"
		f.engine.Files = []worker.EngineFile{{Ref: "./missing/engine.sh", Name: "engine.sh", Body: []byte(body), Executable: true}}
		if err := Run(context.Background(), o); err != nil {
			t.Fatal(err, f.failed)
		}
		if len(f.submitted) != 1 {
			t.Fatalf("submitted %q failed %q", f.submitted, f.failed)
		}
		return f.submitted[0]
	}
	first, second := run(engine), run(engine)
	if first != second || !strings.HasSuffix(first, "/engine.sh") || strings.HasPrefix(first, "./missing") {
		t.Fatalf("the two steps ran %q and %q; want one cached copy", first, second)
	}
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatalf("the cached copy is gone after its steps: %v", err)
	}
	if fi.Mode().Perm() != 0o555 {
		t.Errorf("cached engine mode %v; want read-only 0555", fi.Mode().Perm())
	}
	if other := run(engine + "# changed\n"); other == first {
		t.Errorf("other bytes ran the same copy %s", other)
	}
	if err := cache.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(filepath.Dir(first))); !os.IsNotExist(err) {
		t.Errorf("Close left the cache dir: %v", err)
	}
}

// Counters that arrive within the stats interval are posted
// when it is up, not held until the heartbeat: an engine that reports two
// steps and then works silently shows both steps while it works.
func TestRun_LatestCountersPostedWhenTheIntervalIsUp(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"agent_step","step":2}\n'
sleep 1.5
printf '{"subrun_report":"done"}\n'
`)
	o.StatsInterval, o.HeartbeatInterval = 300*time.Millisecond, time.Hour
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	twos := 0
	for _, s := range f.stats {
		if s.Steps != nil && *s.Steps == 2 {
			twos++
		}
	}
	if twos != 2 {
		t.Errorf("%d stats posts carried steps=2, want 2 (one while the engine worked, the final one): %+v", twos, f.stats)
	}
}

// An engine reporting a cost the worker API refuses (over 1e9 US dollars)
// still has its tokens posted, its cost as the 1e9 ceiling (which any cap
// stops at), instead of the whole post refused and its tokens lost.
func TestRun_ImplausibleCostClampedTokensKept(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l
printf '{"event":"usage","usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":100,"cost_usd":2e9}}\n'
printf '{"subrun_report":"done"}\n'
`)
	log := &lockedLog{}
	o.Log = logging.JSON(log, "runner")
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	last := f.stats[len(f.stats)-1]
	if last.PromptTokens == nil || *last.PromptTokens != 100 || last.CostUSD == nil || *last.CostUSD != worker.MaxCostUSD {
		t.Errorf("final stats %+v; want the tokens and the cost at the 1e9 ceiling", last)
	}
	// The runner's log is JSON records, each naming its step.
	var said bool
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var r struct{ Level, Msg, Component string }
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Component != "runner" {
			t.Errorf("runner log line %q is not a runner record (%v)", l, err)
			continue
		}
		if strings.Contains(r.Msg, "over the 1e+09 US dollars one attempt may cost") {
			said = r.Level == "WARN" && strings.Contains(l, `"step_ref":"`)
		}
	}
	if !said {
		t.Errorf("runner log does not warn, naming the step, why the cost was dropped:\n%s", log.String())
	}
}

// lockedLog is a runner log written from the relay's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A late report the API refuses with 409 (the step moved on) is
// ErrRefused — not spooled, not ErrSpooled — so `stratus runner` exits 4
// for it and 5 for a report it could not deliver.
func TestRun_RefusedReportIsErrRefused(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; printf '{"subrun_report":"late"}\n'`)
	f.submitErr = 409
	err := Run(context.Background(), o)
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrSpooled) {
		t.Fatalf("err = %v; want ErrRefused", err)
	}
	if files, _ := filepath.Glob(filepath.Join(o.SpoolDir, "stratus-spool-*")); len(files) != 0 {
		t.Errorf("a refused report was spooled: %v", files)
	}
}

// With the default pacing (one post per 10 s) the first
// progress is still posted at once (within FirstStatsDelay), not 10 s
// later: a one-second step shows its step while it runs.
func TestRun_FirstStatsAtOnceThenPaced(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l
printf '{"event":"agent_step","step":1}\n'
printf '{"event":"agent_step","step":1}\n'
sleep 1
printf '{"subrun_report":"done"}\n'
`)
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ones := 0
	for _, s := range f.stats {
		if s.Steps != nil && *s.Steps == 1 {
			ones++
		}
	}
	if ones != 2 {
		t.Errorf("%d stats posts with steps=1, want 2 (one while the engine worked, the final one): %+v", ones, f.stats)
	}
}

// internal/failclass: the runner classifies a terminal other than Captured
// from what its engine left — the failure event's text, its exit, the
// tail of its stderr — and a report it refuses as quality, and posts the
// class and the reset with the failed result.
func TestRun_FailedResultCarriesItsClass(t *testing.T) {
	t.Parallel()
	dec7 := time.Date(2026, 12, 7, 17, 0, 0, 0, time.Local).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, script string
		schema       string
		deadlineMS   int
		class, retry string
	}{
		{"a usage limit with its reset", `read l; printf '{"event":"turn_failed","error":"codex turn failed: You’ve hit your usage limit. Visit https://chatgpt.com/settings/usage to purchase more credits or try again at Dec 7th, 2026 5:00 PM."}\n'`,
			"", 0, "rate_limited", dec7},
		{"a crash whose stderr names the network", `read l; echo 'Error: connect ECONNREFUSED 127.0.0.1:443' >&2; exit 1`, "", 0, "network_unavailable", ""},
		{"a crash that says nothing", `read l; exit 3`, "", 0, "infrastructure", ""},
		{"a deadline while the CLI waits for the network", `read l; echo 'codex: Reconnecting... waiting for network (Connection failed: error sending request)' >&2; cat >/dev/null`,
			"", 300, "network_unavailable", ""},
		{"a deadline", `read l; cat >/dev/null`, "", 300, "timeout", ""},
		{"the engine's own words", `read l; printf '{"event":"turn_failed","error":"the model refused"}\n'`, "", 0, "quality", ""},
		{"a report its schema refuses", `read l; printf '{"subrun_report":{"steps":"not a list"}}\n'`,
			`{"type":"object","required":["steps"],"properties":{"steps":{"type":"array"}}}`, 0, "quality", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, o := setup(t, tc.script)
			o.EngineStderr = io.Discard
			if tc.schema != "" {
				f.engine.Schema = json.RawMessage(tc.schema)
			}
			if tc.deadlineMS != 0 {
				f.engine.DeadlineMS = tc.deadlineMS
			}
			if err := Run(context.Background(), o); err != nil {
				t.Fatal(err)
			}
			if len(f.failed) != 1 {
				t.Fatalf("failed results %q, want one", f.failed)
			}
			var rb struct {
				OK    bool                `json:"ok"`
				Value worker.FailureValue `json:"value"`
			}
			if err := json.Unmarshal([]byte(f.failed[0]), &rb); err != nil {
				t.Fatal(err)
			}
			if rb.OK || rb.Value.Class != tc.class || rb.Value.RetryAt != tc.retry {
				t.Errorf("posted %s; want class %q, retry_at %q", f.failed[0], tc.class, tc.retry)
			}
		})
	}
}

// A report the worker API refuses (422: its verdict contract, its output
// slots) fails the attempt as quality.
func TestRun_RefusedReportIsQuality(t *testing.T) {
	t.Parallel()
	f, o := setup(t, `read l; printf '{"subrun_report":"verdict: maybe"}\n'`)
	f.submitErr = 422
	if err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if len(f.failed) != 1 || !strings.Contains(f.failed[0], `"class":"quality"`) || !strings.Contains(f.failed[0], "report refused") {
		t.Errorf("failed %q; want one, class quality", f.failed)
	}
}
