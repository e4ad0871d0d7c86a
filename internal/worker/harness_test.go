package worker

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/testenv"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker/vars"
	"github.com/stratusflow/stratus/internal/worker/workertest"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
	"github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// rig is a worker service over SQLite and an fs sink rooted at the run's
// work dir, with one running run "r1" of task "t1".
type rig struct {
	svc      *Service
	env      *RunEnv
	run      stratus.Run
	dir      string // the work dir (the sink root)
	tokens   *workertest.FakeTokens
	launcher *workertest.FakeLauncher
	n        int // dispatches so far (task tokens)

	mu       sync.Mutex
	warnings logging.Recorder

	// repo holds the objects of the run's workspace (rigOptions.workspace):
	// base is its base commit, baseTree the base's entries.
	repo     *workspacetest.Repo
	base     string
	baseTree []workspacetest.Entry
}

// rigOptions shape a rig: the flow YAML (role files are generated for every
// role_file it names), the task file, a config mutation, a git work dir.
type rigOptions struct {
	flow   string
	task   string
	config func(*config.Config)
	git    bool
	roles  map[string]string // role_file → template; default "Role of {stage}."
	// workspace gives the run a workspace (issue 12): base = head = the
	// commit of a README (rig.base), its base bundle in the sink.
	workspace bool
}

func newRig(t *testing.T, o rigOptions) *rig {
	t.Helper()
	dir := t.TempDir()
	flowsDir := filepath.Join(t.TempDir(), "flows")
	write(t, filepath.Join(flowsDir, "f.yaml"), o.flow)
	fl, err := flow.Load(flowsDir, "f")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fl.Nodes {
		if n.RoleFile != "" {
			body, ok := o.roles[n.RoleFile]
			if !ok {
				body = "Role of {stage}.\n"
			}
			write(t, filepath.Join(flowsDir, n.RoleFile), body)
		}
	}
	if o.task == "" {
		o.task = "---\nid: t1\ntitle: A task\n---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n"
	}
	write(t, filepath.Join(dir, "task.md"), o.task)
	tk, err := task.Parse(filepath.Join(dir, "task.md"), []byte(o.task))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Supervisor.Enabled = new(bool) // no supervisor turns unless a test turns the layer on (supervisor_test.go)
	if o.config != nil {
		o.config(cfg)
	}
	if o.git {
		gitInit(t, dir)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &rig{dir: dir, tokens: &workertest.FakeTokens{}, launcher: &workertest.FakeLauncher{}}
	r.env = &RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	r.svc = New(Config{Store: st, Sink: fs.New(dir), Tokens: r.tokens, Launcher: r.launcher,
		Minter:  &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		Env:     func(context.Context, string) (*RunEnv, error) { return r.env, nil },
		Log:     r.warnings.Logger(),
		Commits: bundlecheck.Checker{TempDir: t.TempDir()}})
	r.launcher.Exchange = func(ctx context.Context, v string) (string, error) { // the runner's exchange
		b, err := r.svc.ExchangeBootstrap(ctx, "Bearer "+v)
		return b.Handle, err
	}
	r.run = stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "A task", Flow: fl.Name, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: filepath.Join(dir, "task.md"), CreatedAt: time.Now()}
	if o.workspace {
		key := WorkspaceKeys(StateDirName, "r1") + "/base.bundle"
		r.repo = workspacetest.NewRepo(t)
		r.baseTree = []workspacetest.Entry{workspacetest.File("README.md", r.repo.Blob("readme\n"))}
		r.base = r.repo.Commit(r.repo.Tree(r.baseTree...), "stratus: workspace base")
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(path.Dir(key))), 0o755); err != nil {
			t.Fatal(err)
		}
		r.repo.Bundle(filepath.Join(dir, filepath.FromSlash(key)), r.base)
		r.run.Workspace = &stratus.Workspace{Root: WorkspaceRoot("r1"), Base: r.base, Head: r.base, Bundles: []string{key},
			Exclude: []string{StateDirName, "workspace/tasks/t1/ctx"}}
	}
	if err := st.CreateRun(context.Background(), r.run); err != nil {
		t.Fatal(err)
	}
	return r
}

func write(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// git runs git in dir with the extra environment env (gitwork.Run).
func git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, err := gitwork.Run(ctx, dir, env, args...)
	return string(out), err
}

// gitInit makes dir a git work tree with one commit of a tracked file.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	write(t, filepath.Join(dir, "README.md"), "one\ntwo\n")
	write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "README.md", ".gitignore"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"},
	} {
		if _, err := git(context.Background(), dir, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// dispatch dispatches node and returns its step.
func (r *rig) dispatch(t *testing.T, node string) stratus.Step {
	t.Helper()
	r.n++
	tok := fmt.Sprintf("tok-%d", r.n)
	if err := r.svc.Dispatch(context.Background(), Message{RunID: r.run.ID, Node: node, Kind: r.env.Flow.Node(node).Kind, TaskToken: tok}); err != nil {
		t.Fatal(err)
	}
	steps, err := r.svc.Store.ListSteps(context.Background(), r.run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return steps[len(steps)-1]
}

// submit submits body as the final of the latest launched attempt.
func (r *rig) submit(t *testing.T, body string) (*StepValue, error) {
	t.Helper()
	specs := r.launcher.Launched()
	if len(specs) == 0 {
		t.Fatal("no worker launched")
	}
	sp := specs[len(specs)-1]
	return r.svc.Submit(context.Background(), "Bearer "+sp.Handle, sp.TaskID, []byte(body), true)
}

// visit dispatches node and submits body for it; it fails the test on a
// refused submit.
func (r *rig) visit(t *testing.T, node, body string) *StepValue {
	t.Helper()
	r.dispatch(t, node)
	sv, err := r.submit(t, body)
	if err != nil {
		t.Fatalf("submit %s: %v", node, err)
	}
	return sv
}

// vars renders the variables a fresh visit of node would get.
func (r *rig) vars(t *testing.T, node string) map[string]string {
	t.Helper()
	st := stratus.Step{TID: "probe." + node, RunID: r.run.ID, Node: node}
	v, err := vars.TemplateVars(context.Background(), r.svc.Service, r.run, r.env, st)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ctx is the absolute ctx dir.
func (r *rig) ctx(name string) string {
	return filepath.Join(r.dir, "workspace", "tasks", "t1", "ctx", filepath.FromSlash(name))
}

func (r *rig) warned(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.ContainsFunc(r.warnings.Messages(), func(w string) bool { return strings.Contains(w, sub) })
}

func (r *rig) lastPrompt(t *testing.T) string {
	t.Helper()
	specs := r.launcher.Launched()
	sp := specs[len(specs)-1]
	att, err := r.svc.Store.GetAttempt(context.Background(), sp.TaskID, sp.Attempt)
	if err != nil {
		t.Fatal(err)
	}
	return att.Prompt
}
