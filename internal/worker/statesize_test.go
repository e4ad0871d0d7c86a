package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/nodeexec"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// stateLimit is Step Functions' payload limit on a state's input and output
// (docs/architecture.md § Limits).
const stateLimit = 256 << 10

// bigBody is the size of every body a worker sends in the state-size test.
const bigBody = 200 << 10

// largestPeerFlow picks the peer flow with the most nodes (ties: the one
// that compiles to more states, then the name) and returns its file.
func largestPeerFlow(t *testing.T) (string, *flow.Flow) {
	t.Helper()
	dir := testenv.Peers(t, "worc", "flows")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	type cand struct {
		file          string
		f             *flow.Flow
		nodes, states int
	}
	var all []cand
	for _, file := range files {
		f, err := flow.Load(dir, strings.TrimSuffix(filepath.Base(file), ".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		def, err := compiler.Compile(f, compiler.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var m struct{ States map[string]json.RawMessage }
		json.Unmarshal(def, &m)
		all = append(all, cand{file, f, len(f.Nodes), len(m.States)})
	}
	if len(all) == 0 {
		t.Fatalf("no peer flows in %s", dir)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.nodes != b.nodes {
			return a.nodes > b.nodes
		}
		if a.states != b.states {
			return a.states > b.states
		}
		return a.file < b.file
	})
	return all[0].file, all[0].f
}

// sizeWatch records the largest state input and output an execution's
// history shows (the embedded executor's OnEvent hook).
type sizeWatch struct {
	mu    sync.Mutex
	max   int
	where string
	over  []string
}

func (w *sizeWatch) event(e executor.HistoryEvent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range []struct {
		what string
		b    json.RawMessage
	}{{"input", e.Input}, {"output", e.Output}} {
		n := len(p.b)
		if n > w.max {
			w.max, w.where = n, fmt.Sprintf("%s %s of %s", e.Type, p.what, e.State)
		}
		if n > stateLimit {
			w.over = append(w.over, fmt.Sprintf("%s %s of %q: %d bytes", e.Type, p.what, e.State, n))
		}
	}
}

// pad returns n bytes of Markdown text.
func pad(n int) string {
	line := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n"
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// playWorker is a launcher whose workers do their node's job with
// 200 KiB bodies through the worker API's service calls: an agent stages a
// 200 KiB part and submits a 200 KiB report; an evaluator asks for one
// rework with 200 KiB of findings, then accepts with a 200 KiB report; a
// checks node fails once with 200 KiB of output, then passes with as
// much. ok=false bodies (failNode) are 200 KiB too.
type playWorker struct {
	svc      *worker.Service
	env      *core.RunEnv
	failNode string // this node's worker reports failure (ok=false)

	mu   sync.Mutex
	seen map[string]int // node → visits played
	errs []error
}

func (p *playWorker) Launch(_ context.Context, s launch.Spec) (string, error) {
	go p.play(s)
	return "play-" + s.TaskID, nil
}

func (p *playWorker) Stop(context.Context, string) error { return nil }

func (p *playWorker) play(s launch.Spec) {
	ctx := context.Background()
	parts := strings.Split(s.TaskID, ".") // run.node.visit
	node := p.env.Flow.Node(parts[1])
	p.mu.Lock()
	p.seen[node.ID]++
	visit := p.seen[node.ID]
	p.mu.Unlock()
	b, err := p.svc.ExchangeBootstrap(ctx, "Bearer "+s.Handle) // as its runner does first
	if err != nil {
		p.mu.Lock()
		p.errs = append(p.errs, err)
		p.mu.Unlock()
		return
	}
	auth := "Bearer " + b.Handle
	var body []byte
	ok := true
	switch {
	case node.ID == p.failNode:
		body, ok = []byte("engine crashed:\n"+pad(bigBody)), false
	case node.Kind == flow.KindEvaluator && visit == 1:
		body, _ = json.Marshal(map[string]any{"findings": []map[string]any{{
			"severity": "high", "path": "a.go", "what": "the loop is wrong: " + pad(bigBody/2), "fix": pad(bigBody / 2)}}})
	case node.Kind == flow.KindEvaluator:
		body, _ = json.Marshal(map[string]any{"findings": []any{}, "summary": pad(bigBody)})
	case node.Kind == flow.KindChecks:
		code := 0
		if visit == 1 {
			code = 1
		}
		body, _ = json.Marshal(nodeexec.Result{Kind: flow.KindChecks, Checks: &nodeexec.ChecksResult{
			Checker: nodeexec.CommandProfile, Selection: nodeexec.SelectedAll, Runs: []nodeexec.CheckRun{{
				Set: "go", Name: "test", Argv: []string{"go", "test", "./..."}, Status: nodeexec.StatusExited, ExitCode: code,
				Output: pad(bigBody), OutputBytes: bigBody}}}})
	default:
		if err := p.svc.Artifact(ctx, auth, "notes-"+node.ID+".md", []byte(pad(bigBody))); err != nil {
			p.fail(fmt.Errorf("%s: artifact: %w", s.TaskID, err))
		}
		body = []byte("# " + node.ID + "\n\n" + pad(bigBody))
	}
	if _, err := p.svc.Submit(ctx, auth, s.TaskID, body, ok); err != nil {
		p.fail(fmt.Errorf("%s: submit: %w", s.TaskID, err))
	}
}

func (p *playWorker) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, err)
}

// runLargestPeerFlow runs the largest peer flow on the embedded executor
// with playWorker workers; it returns the execution, the sizes seen, the
// steps in order and the rig.
func runLargestPeerFlow(t *testing.T, failNode string) (executor.Execution, *sizeWatch, []string, *workertest.Rig) {
	t.Helper()
	file, fl := largestPeerFlow(t)
	yaml, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The rig loads its flow as f.yaml, whose task_type must be "f"; the
	// flow is otherwise the peer's, unchanged.
	text := regexp.MustCompile(`(?m)^(\s+task_type:\s*)`+regexp.QuoteMeta(fl.TaskType)+`\s*$`).ReplaceAllString(string(yaml), "${1}f")
	r := workertest.NewRig(t, workertest.RigOptions{Flow: text})
	if len(r.Env.Flow.Nodes) != len(fl.Nodes) {
		t.Fatalf("the rig's flow has %d nodes, the peer flow %d", len(r.Env.Flow.Nodes), len(fl.Nodes))
	}
	r.Svc.Publish = func(context.Context, stratus.Run, *core.RunEnv) ([]string, error) { return nil, nil }
	player := &playWorker{svc: r.Svc, env: r.Env, failNode: failNode, seen: map[string]int{}}
	r.Svc.Launcher = player
	watch := &sizeWatch{}
	var exec *embedded.Executor
	var dispatches sync.WaitGroup
	exec = embedded.New(embedded.Options{
		OnEvent:       watch.event,
		Substitutions: map[string]string{"DispatchQueueUrl": "embedded://dispatch"},
		Resources: map[string]embedded.TaskHandler{
			"arn:aws:states:::sqs:sendMessage": workertest.SendToDispatch(r.Svc, &dispatches, func(m core.Message, err error) {
				player.fail(fmt.Errorf("dispatch %s: %w", m.Node, err))
				exec.SendTaskFailure(context.Background(), m.TaskToken, core.ErrDispatch, err.Error())
			}),
		},
	})
	r.Svc.Tokens = exec
	def, err := compiler.Compile(r.Env.Flow, compiler.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	input, _ := json.Marshal(map[string]string{"run_id": r.Run.ID, "task_id": "t1"})
	x, err := exec.StartExecution(ctx, executor.StartInput{StateMachine: "f", Definition: def, Name: r.Run.ID, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	if x, err = exec.WaitExecution(ctx, x.ARN); err != nil {
		t.Fatalf("execution did not end: %v", err)
	}
	dispatches.Wait()
	player.mu.Lock()
	for _, err := range player.errs {
		t.Errorf("worker: %v", err)
	}
	player.mu.Unlock()
	steps, err := r.Svc.Store.ListSteps(context.Background(), r.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, s := range steps {
		refs = append(refs, s.StepRef)
	}
	return x, watch, refs, r
}

// docs/architecture.md § Limits: a state's input or output is at most 256
// KiB; "the state and every dispatch message carry references and small
// scalars (ids, node, kind, outcome, verdict, attempt, sizes, part names),
// never bodies". The largest peer flow, compiled, runs on the embedded
// executor through both of its fix loops; every worker stages a 200 KiB part
// and submits a 200 KiB body; every state input and output the history shows
// stays under the limit — far under: the bodies stay in the store and the
// sink.
func TestRun_LargestPeerFlowStateStaysUnder256KiB(t *testing.T) {
	x, watch, steps, r := runLargestPeerFlow(t, "")
	if x.Status != executor.StatusSucceeded {
		t.Fatalf("execution %s %s %s; steps %v", x.Status, x.Error, x.Cause, steps)
	}
	if got := strings.Join(steps, " "); !strings.Contains(got, "fixing#2") || !strings.Contains(got, "review#2") || !strings.Contains(got, "testing#3") {
		t.Errorf("steps %s: want both fix loops taken (testing fails once, review reworks once)", got)
	}
	// The bodies were real: the projected report of a step holds 200 KiB.
	if b, err := os.ReadFile(r.Ctx("implementation.md")); err != nil || len(b) < bigBody {
		t.Errorf("implementation.md: %d bytes (%v), want the 200 KiB body projected", len(b), err)
	}
	for _, o := range watch.over {
		t.Errorf("over 256 KiB: %s", o)
	}
	t.Logf("flow %s; largest state payload: %d bytes (%s)", r.Env.Flow.Name, watch.max, watch.where)
	if watch.max == 0 || watch.max > 16<<10 {
		t.Errorf("largest state payload %d bytes (%s): the state should hold references and small scalars only", watch.max, watch.where)
	}
}

// The same with a worker that fails with a 200 KiB reason: the failure
// travels as the caught error ($.error), still under the limit. (On AWS
// the cause is also cut to SendTaskFailure's 32768 characters by
// internal/executor/sfn; the embedded executor keeps it whole.)
func TestRun_LargestPeerFlowFailureStaysUnder256KiB(t *testing.T) {
	x, watch, steps, _ := runLargestPeerFlow(t, "implementation")
	if x.Status != executor.StatusFailed || x.Error != compiler.ErrFailed {
		t.Fatalf("execution %s %s; steps %v: want FAILED %s", x.Status, x.Error, steps, compiler.ErrFailed)
	}
	for _, o := range watch.over {
		t.Errorf("over 256 KiB: %s", o)
	}
	t.Logf("largest state payload: %d bytes (%s)", watch.max, watch.where)
}
