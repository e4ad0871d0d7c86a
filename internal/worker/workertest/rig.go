package workertest

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/logging"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store/sqlite"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/vars"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
	"github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// Rig is a worker service (worker.New, the facade, so a test drives a
// whole step: dispatch → fetch → submit) over SQLite and an fs sink
// rooted at the run's work dir, with one running run "r1" of task "t1".
// Tests of the operation packages under internal/worker share it; make
// one with NewRig.
type Rig struct {
	Svc      *worker.Service
	Env      *core.RunEnv
	Run      stratus.Run
	Dir      string // the work dir (the sink root)
	Tokens   *FakeTokens
	Launcher *FakeLauncher
	// N counts the dispatches so far: Dispatch names the task token of
	// its N-th "tok-N".
	N int
	// Warnings keeps what the service logged.
	Warnings logging.Recorder

	// Repo holds the objects of the run's workspace (RigOptions.Workspace):
	// Base is its base commit, BaseTree the base's entries.
	Repo     *workspacetest.Repo
	Base     string
	BaseTree []workspacetest.Entry
}

// RigOptions shape a Rig: the flow YAML (role files are generated for
// every role_file it names), the task file, a config mutation, a git work
// dir.
type RigOptions struct {
	Flow   string
	Task   string // default: task t1 "A task", with a description and acceptance criteria
	Config func(*config.Config)
	Git    bool
	Roles  map[string]string // role_file → template; default "Role of {stage}."
	// Workspace gives the run a workspace (docs/architecture.md §
	// Workspaces): base = head = the commit of a README (Rig.Base), its
	// base bundle in the sink.
	Workspace bool
	// Supervisor turns the supervisor layer on (off otherwise: no
	// supervisor turns), with the embedded orchestrator's publish: collect
	// the facts, write the report. Config runs after it.
	Supervisor bool
}

// NewRig returns a Rig shaped by o; everything it makes is removed when t
// ends.
func NewRig(t *testing.T, o RigOptions) *Rig {
	t.Helper()
	dir := t.TempDir()
	flowsDir := filepath.Join(t.TempDir(), "flows")
	Write(t, filepath.Join(flowsDir, "f.yaml"), o.Flow)
	fl, err := flow.Load(flowsDir, "f")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range fl.Nodes {
		if n.RoleFile != "" {
			body, ok := o.Roles[n.RoleFile]
			if !ok {
				body = "Role of {stage}.\n"
			}
			Write(t, filepath.Join(flowsDir, n.RoleFile), body)
		}
	}
	if o.Task == "" {
		o.Task = "---\nid: t1\ntitle: A task\n---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n"
	}
	Write(t, filepath.Join(dir, "task.md"), o.Task)
	tk, err := task.Parse(filepath.Join(dir, "task.md"), []byte(o.Task))
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	if !o.Supervisor {
		cfg.Supervisor.Enabled = new(bool)
	}
	if o.Config != nil {
		o.Config(cfg)
	}
	if o.Git {
		GitInit(t, dir)
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &Rig{Dir: dir, Tokens: &FakeTokens{}, Launcher: &FakeLauncher{}}
	r.Env = &core.RunEnv{Flow: fl, FlowDir: flowsDir, Task: tk, Config: cfg}
	r.Svc = worker.New(worker.Config{Store: st, Sink: fs.New(dir), Tokens: r.Tokens, Launcher: r.Launcher,
		Minter:  &captoken.Minter{Key: []byte("0123456789abcdef0123456789abcdef")},
		Env:     func(context.Context, string) (*core.RunEnv, error) { return r.Env, nil },
		Log:     r.Warnings.Logger(),
		Commits: bundlecheck.Checker{TempDir: t.TempDir()}})
	r.Launcher.Exchange = func(ctx context.Context, v string) (string, error) { // the runner's exchange
		b, err := r.Svc.ExchangeBootstrap(ctx, "Bearer "+v)
		return b.Handle, err
	}
	if o.Supervisor {
		r.Svc.Publish = func(ctx context.Context, run stratus.Run, env *core.RunEnv) ([]string, error) {
			f, err := report.Collect(ctx, r.Svc.Store, run, stratus.RunDone, core.ReportEnv(env))
			if err != nil {
				return nil, err
			}
			return report.Write(ctx, r.Svc.Sink, f)
		}
	}
	r.Run = stratus.Run{ID: "r1", TaskID: "t1", TaskTitle: "A task", Flow: fl.Name, Status: stratus.RunRunning,
		WorkDir: dir, TaskPath: filepath.Join(dir, "task.md"), CreatedAt: time.Now()}
	if o.Workspace {
		key := core.WorkspaceKeys(core.StateDirName, "r1") + "/base.bundle"
		r.Repo = workspacetest.NewRepo(t)
		r.BaseTree = []workspacetest.Entry{workspacetest.File("README.md", r.Repo.Blob("readme\n"))}
		r.Base = r.Repo.Commit(r.Repo.Tree(r.BaseTree...), "stratus: workspace base")
		if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(path.Dir(key))), 0o755); err != nil {
			t.Fatal(err)
		}
		r.Repo.Bundle(filepath.Join(dir, filepath.FromSlash(key)), r.Base)
		r.Run.Workspace = &stratus.Workspace{Root: core.WorkspaceRoot("r1"), Base: r.Base, Head: r.Base, Bundles: []string{key},
			Exclude: []string{core.StateDirName, "workspace/tasks/t1/ctx"}}
	}
	if err := st.CreateRun(context.Background(), r.Run); err != nil {
		t.Fatal(err)
	}
	return r
}

// Write writes body to p, making the directories it needs.
func Write(t *testing.T, p, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Read returns the text of the file at p.
func Read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Git runs git in dir with the extra environment env (gitwork.Run).
func Git(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	out, err := gitwork.Run(ctx, dir, env, args...)
	return string(out), err
}

// GitInit makes dir a git work tree with one commit of a tracked file
// (README.md) and a .gitignore ignoring *.log.
func GitInit(t *testing.T, dir string) {
	t.Helper()
	testenv.MustHaveCommand(t, "git", "the work dir's git status and diff")
	Write(t, filepath.Join(dir, "README.md"), "one\ntwo\n")
	Write(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	for _, args := range [][]string{
		{"init", "-q"}, {"add", "README.md", ".gitignore"},
		{"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "base"},
	} {
		if _, err := Git(context.Background(), dir, nil, args...); err != nil {
			t.Fatal(err)
		}
	}
}

// Dispatch dispatches node (its task token "tok-N") and returns its step.
func (r *Rig) Dispatch(t *testing.T, node string) stratus.Step {
	t.Helper()
	r.N++
	tok := fmt.Sprintf("tok-%d", r.N)
	if err := r.Svc.Dispatch(context.Background(), core.Message{RunID: r.Run.ID, Node: node, Kind: r.Env.Flow.Node(node).Kind, TaskToken: tok}); err != nil {
		t.Fatal(err)
	}
	steps, err := r.Svc.Store.ListSteps(context.Background(), r.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return steps[len(steps)-1]
}

// Submit submits body as the final of the latest launched attempt.
func (r *Rig) Submit(t *testing.T, body string) (*core.StepValue, error) {
	t.Helper()
	specs := r.Launcher.Launched()
	if len(specs) == 0 {
		t.Fatal("no worker launched")
	}
	sp := specs[len(specs)-1]
	return r.Svc.Submit(context.Background(), "Bearer "+sp.Handle, sp.TaskID, []byte(body), true)
}

// Visit dispatches node and submits body for it; it fails the test on a
// refused submit.
func (r *Rig) Visit(t *testing.T, node, body string) *core.StepValue {
	t.Helper()
	r.Dispatch(t, node)
	sv, err := r.Submit(t, body)
	if err != nil {
		t.Fatalf("submit %s: %v", node, err)
	}
	return sv
}

// Vars renders the variables a fresh visit of node would get.
func (r *Rig) Vars(t *testing.T, node string) map[string]string {
	t.Helper()
	st := stratus.Step{TID: "probe." + node, RunID: r.Run.ID, Node: node}
	v, err := vars.TemplateVars(context.Background(), r.Svc.Service, r.Run, r.Env, st)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Ctx is the absolute path of name in the task's ctx dir.
func (r *Rig) Ctx(name string) string {
	return filepath.Join(r.Dir, "workspace", "tasks", "t1", "ctx", filepath.FromSlash(name))
}

// Warned reports whether the service logged a message containing sub.
func (r *Rig) Warned(sub string) bool {
	return slices.ContainsFunc(r.Warnings.Messages(), func(w string) bool { return strings.Contains(w, sub) })
}

// LastPrompt is the prompt of the latest launched attempt.
func (r *Rig) LastPrompt(t *testing.T) string {
	t.Helper()
	specs := r.Launcher.Launched()
	sp := specs[len(specs)-1]
	att, err := r.Svc.Store.GetAttempt(context.Background(), sp.TaskID, sp.Attempt)
	if err != nil {
		t.Fatal(err)
	}
	return att.Prompt
}
