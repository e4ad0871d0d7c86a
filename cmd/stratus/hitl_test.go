package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/captoken"
)

// background is a `stratus run` left running while the test replies.
type background struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	lines  chan string
	done   chan struct{}
	code   int
}

// startRun starts `stratus run TASK --dir DIR` and streams its progress.
func startRun(t *testing.T, dir, task string) *background {
	t.Helper()
	return startCLI(t, "run", task, "--dir", dir)
}

// startCLI starts `stratus ARGS…` and streams what it writes on stderr.
func startCLI(t *testing.T, args ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(stratusBin, args...), lines: make(chan string, 256), done: make(chan struct{})}
	pipe, err := b.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			b.cmd.Process.Kill()
			<-b.done
		}
	})
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			b.mu.Lock()
			b.stderr.WriteString(sc.Text() + "\n")
			b.mu.Unlock()
			select {
			case b.lines <- sc.Text():
			default:
			}
		}
		err := b.cmd.Wait()
		b.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			b.code = ee.ExitCode()
		}
	}()
	return b
}

// waitLine is a run's wait line; started elsewhere than its work dir (as
// startRun does), its reply commands carry --dir.
var waitLine = regexp.MustCompile(`^stratus: wait\s+(\S+)\s+node=(\S+) .*reply with: stratus \w+ (\S+) \S+ --dir /`)

// waiting blocks until the run says a step waits for a human; it returns
// the run id and the step ref.
func (b *background) waiting(t *testing.T) (runID, stepRef string) {
	t.Helper()
	return b.waitingOn(t, waitLine)
}

// waitingOn is waiting with the wait line's pattern (submatches: step
// ref, node, run id).
func (b *background) waitingOn(t *testing.T, line *regexp.Regexp) (runID, stepRef string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-b.lines:
			if m := line.FindStringSubmatch(l); m != nil {
				return m[3], m[1]
			}
		case <-b.done:
			t.Fatalf("the run ended (exit %d) without waiting for a human:\n%s", b.code, b.log())
		case <-timeout:
			t.Fatalf("no waiting line within 60 s:\n%s", b.log())
		}
	}
}

// wait waits for the run to end and returns its exit status.
func (b *background) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-b.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("the run did not end within 120 s:\n%s", b.log())
	}
	return b.code
}

func (b *background) log() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stderr.String()
}

const approvalFlow = `flow:
  name: gated
  task_type: gated
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: draft, kind: agent, role_file: gated/draft.md }
    - { id: gate, kind: hitl, signal: approval GATE_TIMEOUT}
    - { id: ask, kind: hitl, signal: question }
    - { id: revise, kind: agent, role_file: gated/revise.md }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: draft, to: gate }
    - { from: gate, to: ask, outcome: route:approve }
    - { from: gate, to: revise, outcome: route:deny }
    - { from: ask, to: publish }
    - { from: revise, to: publish }
`

// setupHITLRun installs a work dir whose task runs flow (its role files
// generated) with the script engine answering from scenario.
func setupHITLRun(t *testing.T, flowName, flowYAML, scenario string) (dir, task string) {
	t.Helper()
	dir = t.TempDir()
	writeTestFile(t, filepath.Join(dir, "scenario.yaml"), scenario)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", filepath.Join(dir, "scenario.yaml")); r.code != 0 {
		t.Fatalf("install: %s", r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows", flowName+".yaml"), flowYAML)
	for _, m := range regexp.MustCompile(`role_file: ([^\s,}]+)`).FindAllStringSubmatch(flowYAML, -1) {
		writeTestFile(t, filepath.Join(dir, ".stratus/flows", m[1]), "Work on {task_id} as "+m[1]+".\n")
	}
	task = filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-"+flowName+"\ntitle: Human in the loop\ntask_type: "+flowName+"\n---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n")
	return dir, task
}

// A hitl approval node waits for `stratus approve|reject`; the reply picks
// its route (worc reference.md § hitl node;
// README.md § A human gate, step by step), and a question node waits for
// `stratus answer` and then proceeds.
func TestHITL_ApproveRejectAnswerResumeTheRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		reply []string // after RUN NODE
		want  string
	}{
		{"approve", []string{"approve"}, "draft#1:done gate#1:route:approve ask#1:done publish#1:done"},
		{"reject takes the deny route", []string{"reject", "--reason", "not yet"}, "draft#1:done gate#1:route:deny revise#1:done publish#1:done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1), "default:\n  report: ok\n")
			run := startRun(t, dir, task)
			runID, ref := run.waiting(t)
			if ref != "gate#1" {
				t.Fatalf("waiting step %s, want gate#1", ref)
			}
			addr := filepath.Join(dir, ".stratus/runs", runID+".json")
			if fi, err := os.Stat(addr); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("run address file %s: %v (mode %v), want 0600", addr, err, fi)
			}
			// A reply the request does not take is refused and changes nothing.
			if r := runCLI(t, "answer", runID, "gate", "yes", "--dir", dir); r.code != ExitUsage || !strings.Contains(r.stderr, "approve or reject") {
				t.Errorf("answer to an approval: exit %d %s", r.code, r.stderr)
			}
			args := append([]string{c.reply[0], runID, "gate"}, c.reply[1:]...)
			if r := runCLI(t, append(args, "--dir", dir)...); r.code != ExitOK || !strings.Contains(r.stdout, "gate#1 → route:") {
				t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
			}
			if c.reply[0] == "approve" {
				if _, ref := run.waiting(t); ref != "ask#1" {
					t.Fatalf("second wait %s, want ask#1", ref)
				}
				if r := runCLI(t, "answer", runID, "ask", "the blue one", "--dir", dir); r.code != ExitOK {
					t.Fatalf("answer: exit %d %s", r.code, r.stderr)
				}
			}
			if code := run.wait(t); code != ExitOK {
				t.Fatalf("run exit %d\n%s", code, run.log())
			}
			if got := join(steps(run.log())); got != c.want {
				t.Errorf("steps\n got %s\nwant %s", got, c.want)
			}
			if _, err := os.Stat(addr); !os.IsNotExist(err) {
				t.Errorf("the run address file outlives the run: %v", err)
			}
			if c.reply[0] == "approve" {
				if body := readFile(t, filepath.Join(dir, "workspace/tasks/t-gated/ctx/ask.md")); !strings.Contains(body, "the blue one") {
					t.Errorf("ask.md lacks the answer:\n%s", body)
				}
			}
			// The run is over: nothing to reply to.
			if r := runCLI(t, "approve", runID, "gate", "--dir", dir); r.code != ExitFailed || !strings.Contains(r.stderr, "is not running") {
				t.Errorf("approve after the end: exit %d %s", r.code, r.stderr)
			}
		})
	}
}

// A human who does not reply in time parks the run (reference.md § hitl
// node: a timeout is fail-closed → manual_action_required, exit 3).
func TestHITL_TimeoutIsManualActionRequired(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", ", timeout_s: 1", 1), "default:\n  report: ok\n")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d, want %d\n%s", r.code, ExitManual, r.stderr)
	}
	if got := join(steps(r.stderr)); got != "draft#1:done gate#1:failed" {
		t.Errorf("steps %s", got)
	}
	if !strings.Contains(r.stderr, "no human reply within 1 s") {
		t.Errorf("progress does not say why:\n%s", r.stderr)
	}
}

// An agent with `hitl: {allow_question: true}` asks through its report's
// human_input; `stratus answer` resumes it, and its second visit's prompt
// carries the answer (README.md § A human gate, step by step).
func TestHITL_AgentQuestionAnsweredReRunsTheAgent(t *testing.T) {
	t.Parallel()
	const asking = askingFlow
	dir, task := setupHITLRun(t, "asking", asking, `
nodes:
  draft:
    - report: {content: "need a color", human_input: {kind: question, text: "Which color should the button be?"}}
    - report: "Painted it teal."
default:
  report: ok
`)
	run := startRun(t, dir, task)
	runID, ref := run.waiting(t)
	if ref != "draft.hitl#1" {
		t.Fatalf("waiting step %s, want draft.hitl#1", ref)
	}
	if !strings.Contains(run.log(), "Which color should the button be?") {
		t.Errorf("the waiting line does not show the question:\n%s", run.log())
	}
	if r := runCLI(t, "answer", runID, "draft", "teal, please", "--dir", dir); r.code != ExitOK {
		t.Fatalf("answer: exit %d %s", r.code, r.stderr)
	}
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("run exit %d\n%s", code, run.log())
	}
	if got, want := join(steps(run.log())), "draft#1:human_input draft.hitl#1:answered draft#2:done publish#1:done"; got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	p := readFile(t, filepath.Join(dir, ".stratus/logs/t-asking/stages/draft/run-000002/rendered-prompt.md"))
	if !strings.Contains(p, "## Human answer") || !strings.Contains(p, "Which color should the button be?") || !strings.Contains(p, "teal, please") {
		t.Errorf("the re-run's prompt lacks the answer:\n%s", p)
	}
}

// A run that is not running cannot be replied to: a clear error, exit 1;
// a run that was never made is unknown, exit 2 as for every command.
func TestHITL_ReplyToARunThatIsNotRunning(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	r := runCLI(t, "approve", "r-20260101T000000-abcdef", "gate", "--dir", dir)
	if r.code != ExitUsage || !strings.Contains(r.stderr, `run "r-20260101T000000-abcdef" not found`) {
		t.Errorf("exit %d %s", r.code, r.stderr)
	}
	// A stale address file (its process gone) says so.
	writeTestFile(t, filepath.Join(dir, ".stratus/runs/r-stale.json"), `{"api_url":"http://127.0.0.1:1","pid":999999999}`)
	r = runCLI(t, "reject", "r-stale", "gate", "--reason", "not yet", "--dir", dir)
	if r.code != ExitFailed || !strings.Contains(r.stderr, "is not running") {
		t.Errorf("stale: exit %d %s", r.code, r.stderr)
	}
}

// replyCode runs `stratus VERB RUN NODE ARGS… --dir DIR` and checks its exit
// status and that stderr says want.
func replyCode(t *testing.T, dir, runID string, code int, want string, args ...string) {
	t.Helper()
	args = append([]string{args[0], runID}, args[1:]...)
	r := runCLI(t, append(args, "--dir", dir)...)
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Errorf("%v: exit %d, want %d with %q\n%s%s", args, r.code, code, want, r.stdout, r.stderr)
	}
}

// Approve, reject and answer exit as their help says — 2 for bad input or a
// node that does not wait for this reply (one case each), 1 for a run that is
// not running — and a refused reply changes nothing: the run still takes the
// right one.
func TestHITL_ExitStatusesMatchTheHelp(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1), "default:\n  report: ok\n")
	run := startRun(t, dir, task)
	runID, ref := run.waiting(t)
	if ref != "gate#1" {
		t.Fatalf("waiting step %s, want gate#1", ref)
	}
	replyCode(t, dir, runID, ExitUsage, `flow gated has no node "nope" that waits for a human`, "approve", "nope")
	replyCode(t, dir, runID, ExitUsage, `no node "draft" that waits for a human`, "approve", "draft")
	replyCode(t, dir, runID, ExitUsage, "it has not asked yet", "answer", "ask", "blue")
	replyCode(t, dir, runID, ExitUsage, "asks for an approval; approve or reject it", "answer", "gate", "yes")
	replyCode(t, dir, runID, ExitUsage, "a rejection needs its reason: stratus reject "+runID+" gate --reason TEXT", "reject", "gate")
	replyCode(t, dir, runID, ExitUsage, "a rejection needs its reason", "reject", "gate", "--reason", "  ")
	replyCode(t, dir, runID, ExitOK, "", "approve", "gate")
	if _, ref := run.waiting(t); ref != "ask#1" {
		t.Fatalf("second wait %s, want ask#1", ref)
	}
	replyCode(t, dir, runID, ExitUsage, "node ask asks a question; answer it with stratus answer "+runID+" ask TEXT", "approve", "ask")
	replyCode(t, dir, runID, ExitUsage, "the answer is empty", "answer", "ask", " ")
	replyCode(t, dir, runID, ExitUsage, "at most 65536 (64 KiB)", "answer", "ask", strings.Repeat("b", 65537))
	replyCode(t, dir, runID, ExitUsage, "its latest request gate#1 is completed", "approve", "gate")
	replyCode(t, dir, runID, ExitOK, "", "answer", "ask", "blue")
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("run exit %d\n%s", code, run.log())
	}
	if got, want := join(steps(run.log())), "draft#1:done gate#1:route:approve ask#1:done publish#1:done"; got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	replyCode(t, dir, runID, ExitFailed, "is not running", "approve", "gate")
	// Every verb's help states the one mapping.
	for _, verb := range []string{"approve", "reject", "answer"} {
		if r := runCLI(t, verb, "--help"); !strings.Contains(r.stdout, hitlExitHelp) {
			t.Errorf("%s --help lacks the exit statuses:\n%s", verb, r.stdout)
		}
	}
}

// The API's refusals map to the exit statuses by what they are about: the
// node (2) or the run and the server (1).
func TestHITL_APIRefusalsMapToExitStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		field  string
		code   int
	}{
		{"the run has ended", http.StatusConflict, "run_id", ExitFailed},
		{"no such run", http.StatusNotFound, "run_id", ExitFailed},
		{"the server failed", http.StatusInternalServerError, "", ExitFailed},
		{"the node does not wait", http.StatusConflict, "node", ExitUsage},
		{"no such node", http.StatusNotFound, "node", ExitUsage},
		{"a reply the request does not take", http.StatusUnprocessableEntity, "decision", ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, `{"error":{"code":"x","message":"refused: %s","field":%q}}`, tc.name, tc.field)
			}))
			defer srv.Close()
			dir := t.TempDir()
			if _, err := captoken.LoadOrCreateKey(filepath.Join(dir, ".stratus/hmac.key")); err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, filepath.Join(dir, ".stratus/runs/r-fake.json"), fmt.Sprintf(`{"api_url":%q,"pid":%d}`, srv.URL, os.Getpid()))
			replyCode(t, dir, "r-fake", tc.code, "refused: "+tc.name, "approve", "gate")
		})
	}
}

// A hitl timeout parks the run, the summary says why right after its lead,
// and the step shows how long it waited.
func TestHITL_TimeoutSummarySaysWhyAndTheWait(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", ", timeout_s: 1", 1), "default:\n  report: ok\n")
	r := runCLI(t, "run", task, "--dir", dir)
	if r.code != ExitManual {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	const why = "gate#1: no human reply within 1 s (hitl timeout)"
	if !strings.Contains(r.stdout, why) {
		t.Errorf("stdout does not say why:\n%s", r.stdout)
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-gated/summary.md"))
	if !strings.Contains(md, "**manual_action_required**.\n\n## Why the run stopped\n\nGate#1: no human reply within 1 s (hitl timeout).\n") {
		t.Errorf("summary.md does not say why after its lead:\n%s", md)
	}
	if m := regexp.MustCompile(`\| gate#1 \| failed \| 0 \| - \| (\S+) \|`).FindStringSubmatch(md); m == nil || m[1] == "0ms" {
		t.Errorf("the timed-out hitl step does not show its wait:\n%s", md)
	}
	var wait string
	for _, m := range endLine.FindAllStringSubmatch(r.stderr, -1) {
		if m[1] == "gate#1" {
			wait = m[6]
		}
	}
	if wait == "" || wait == "0ms" {
		t.Errorf("the progress line of the timed-out hitl step shows no wait (%q):\n%s", wait, r.stderr)
	}
}

// An interrupted run says "interrupted" in its summary, and what it was
// doing.
func TestHITL_InterruptedRunSummarySaysInterrupted(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1), "default:\n  report: ok\n")
	run := startRun(t, dir, task)
	runID, _ := run.waiting(t)
	if err := run.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := run.wait(t); code != ExitInterrupted {
		t.Fatalf("exit %d\n%s", code, run.log())
	}
	md := readFile(t, filepath.Join(dir, ".stratus/logs/t-gated/summary.md"))
	for _, s := range []string{"run `" + runID + "`: **interrupted**.", "## Why the run stopped\n\nInterrupted (SIGINT or SIGTERM) while gate#1 was waiting for a human.\n"} {
		if !strings.Contains(md, s) {
			t.Errorf("summary.md lacks %q:\n%s", s, md)
		}
	}
	if !strings.Contains(run.log(), "why:      interrupted (SIGINT or SIGTERM) while gate#1 was waiting for a human") {
		t.Errorf("stderr does not say why:\n%s", run.log())
	}
}

// docs/security.md § Operator replies on AWS: a running embedded run's
// API never takes the IAM-authorised reply route, even with the run's own
// operator token — it is not behind API Gateway's authorizer; the 403
// names the route that takes the token, and the gate still waits for
// `stratus approve`.
func TestHITL_EmbeddedRunRefusesTheIAMRoute(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1), "default:\n  report: ok\n")
	run := startRun(t, dir, task)
	runID, _ := run.waiting(t)
	var addr struct {
		APIURL string `json:"api_url"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ".stratus/runs", runID+".json"))), &addr); err != nil || addr.APIURL == "" {
		t.Fatalf("run address: %v %+v", err, addr)
	}
	key, err := captoken.LoadOrCreateKey(filepath.Join(dir, ".stratus/hmac.key"))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, _ := (&captoken.Minter{Key: key}).MintOperator(runID)
	req, _ := http.NewRequest("POST", addr.APIURL+"/v1/operator/runs/"+runID+"/nodes/gate/hitl", strings.NewReader(`{"decision":"approve"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "AWS_IAM") || !strings.Contains(string(body), "/v1/runs/{run_id}/nodes/{node}/hitl") {
		t.Fatalf("the IAM route on an embedded run: %d %s; want 403 naming the authorizer and the token route", resp.StatusCode, body)
	}
	if r := runCLI(t, "approve", runID, "gate", "--dir", dir); r.code != ExitOK || !strings.Contains(r.stdout, "gate#1 → route:approve") {
		t.Fatalf("approve after the refusal: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	if _, ref := run.waiting(t); ref != "ask#1" {
		t.Fatalf("second wait %s, want ask#1", ref)
	}
	if r := runCLI(t, "answer", runID, "ask", "blue", "--dir", dir); r.code != ExitOK {
		t.Fatalf("answer: exit %d %s", r.code, r.stderr)
	}
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("run exit %d\n%s", code, run.log())
	}
}

// askingFlow is a flow whose one agent may ask a question (hitl), then
// publishes.
const askingFlow = `flow:
  name: asking
  task_type: asking
  permission_ceiling: workspace-write
  output_policy: code_change
  publishing: local_artifact
  nodes:
    - { id: draft, kind: agent, role_file: asking/draft.md, hitl: { allow_question: true, allow_approval: false } }
    - { id: publish, kind: publish, policy: local_artifact }
  edges:
    - { from: draft, to: publish }
`
