package bundlecheck_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/workspace"
	"github.com/stratusflow/stratus/internal/workspace/bundlecheck"
	wt "github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// fixture is a run's workspace as the worker API sees it: a base bundle
// and one step bundle in an fs sink, built by hand in repo.
type fixture struct {
	repo     *wt.Repo
	sink     sink.Sink
	tmp      string
	keys     []string // the run's bundles
	files    []string // the run's bundles as local files, for Materialize
	base, s1 string   // the base commit, the head (step 1)
	s1Tree   []wt.Entry
	big      string // the content of big.txt at s1
}

// lines is a text that deltas compress well.
func lines(n int, tag string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "line %d of a file long enough for git to store its next version as a delta %s\n", i, tag)
	}
	return b.String()
}

func setup(t *testing.T) *fixture {
	t.Helper()
	return setupOn(t, fs.New(t.TempDir()))
}

// setupOn is setup with the run's bundles in sk.
func setupOn(t *testing.T, sk sink.Sink) *fixture {
	t.Helper()
	f := &fixture{repo: wt.NewRepo(t), tmp: t.TempDir(), sink: sk}
	r := f.repo
	src := r.Tree(wt.File("main.go", r.Blob("package main\n")))
	baseTree := r.Tree(wt.File("big.txt", r.Blob(lines(400, ""))), wt.Link("link", r.Blob("src/main.go")), wt.Dir("src", src))
	f.base = r.Commit(baseTree, "base")
	f.big = lines(400, "") + "one more line\n"
	f.s1Tree = []wt.Entry{wt.File("big.txt", r.Blob(f.big)), wt.Link("link", r.Blob("src/main.go")), wt.Dir("src", src)}
	f.s1 = r.Commit(r.Tree(f.s1Tree...), "step 1", f.base)
	f.files = []string{filepath.Join(f.tmp, "base.bundle"), filepath.Join(f.tmp, "s1.bundle")}
	for i, b := range [][]byte{
		r.Bundle(f.files[0], f.base),
		r.Bundle(f.files[1], f.s1, f.base),
	} {
		key := fmt.Sprintf("runs/r1/workspace/%d.bundle", i)
		if err := f.sink.Put(context.Background(), key, b); err != nil {
			t.Fatal(err)
		}
		f.keys = append(f.keys, key)
	}
	return f
}

// advance checks the move from the head to `to`, upload bringing it.
func (f *fixture) advance(upload []byte, to string, max int64) error {
	return bundlecheck.Checker{TempDir: f.tmp}.CheckAdvance(context.Background(), workspace.Advance{
		Sink: f.sink, Bundles: f.keys, Upload: upload, From: f.s1, To: to, MaxBytes: max, Exclude: runExclude})
}

// runExclude is the run's exclude list: its state dir and its ctx dir.
var runExclude = []string{".stratus", "workspace/tasks/t1/ctx"}

// externalDeltas counts the objects of a bundle's pack stored as deltas
// by object id (git bundle create stores a delta on an object of the pack
// by offset): deltas on objects the pack does not hold, what makes it thin.
func externalDeltas(t *testing.T, bundle []byte) int {
	t.Helper()
	i := bytes.Index(bundle, []byte("\n\nPACK"))
	if i < 0 {
		t.Fatal("no pack in the bundle")
	}
	s := packfile.NewScanner(bytes.NewReader(bundle[i+2:]))
	_, n, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	var refs []plumbing.Hash
	for range n {
		oh, err := s.NextObjectHeader()
		if err != nil {
			t.Fatal(err)
		}
		if oh.Type == plumbing.REFDeltaObject {
			refs = append(refs, oh.Reference)
		}
		if _, _, err := s.NextObject(io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	return len(refs)
}

// docs/security.md § Workspace commits: the worker API reads the run's
// bundles without git — a base bundle, then step bundles whose packs are
// thin (deltas on objects of the bundles before them) — and accepts a
// step that keeps the rules.
func TestCheckAdvance_ReadsThinBundlesBuiltOnEarlierOnes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.repo
	s1Bundle, _ := f.sink.Get(context.Background(), f.keys[1])
	if externalDeltas(t, s1Bundle) == 0 {
		t.Fatal("step 1's bundle holds no delta on a base object: the fixture does not test thin packs")
	}
	tree := append([]wt.Entry(nil), f.s1Tree...)
	tree[0] = wt.File("big.txt", r.Blob(f.big+"and another\n"))
	tree = append(tree, wt.Link("zz", r.Blob("src/../big.txt")))
	s2 := r.Commit(r.Tree(tree...), "step 2", f.s1)
	up := r.Bundle(filepath.Join(f.tmp, "s2.bundle"), s2, f.s1)
	if externalDeltas(t, up) == 0 {
		t.Fatal("the uploaded bundle holds no delta on step 1's objects: the fixture does not test thin packs")
	}
	if err := f.advance(up, s2, 0); err != nil {
		t.Fatalf("a step keeping the rules: %v", err)
	}
}

// docs/security.md § Workspace commits: a commit an engine built by hand
// that the runner would refuse is refused where the head moves, with a
// 4xx naming the path and the rule.
func TestCheckAdvance_RefusesTreesThatBreakTheRules(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.repo
	x := r.Blob("x\n")
	hooks := r.Tree(wt.Entry{Mode: "100755", Name: "post-checkout", ID: r.Blob("#!/bin/sh\nid\n")})
	cases := []struct {
		name    string
		entries []wt.Entry
		says    string
	}{
		{"absolute symlink", []wt.Entry{wt.Link("leak", r.Blob("/etc/passwd"))}, "leak -> /etc/passwd: absolute symlink target"},
		{"symlink escaping with ../", []wt.Entry{wt.Link("up", r.Blob("../../etc"))}, "up -> ../../etc: symlink resolves outside the tree"},
		{"symlink escaping through another", []wt.Entry{wt.Link("s", r.Blob(".")), wt.Link("t", r.Blob("s/.."))}, "t -> s/..: symlink resolves outside"},
		{"gitlink", []wt.Entry{{Mode: "160000", Name: "sub", ID: f.base}}, "sub: a submodule or nested git repository (gitlink, mode 160000)"},
		{".git/config", []wt.Entry{wt.Dir(".git", r.Tree(wt.File("config", x)))}, `.git: path component ".git" is a git dir`},
		{".GIT", []wt.Entry{wt.Dir(".GIT", r.Tree(wt.File("config", x)))}, `.GIT: path component ".GIT" is a git dir`},
		{"nested a/.git/hooks/x", []wt.Entry{wt.Dir("a", r.Tree(wt.Dir(".git", r.Tree(wt.Dir("hooks", hooks)))))}, `a/.git: path component ".git"`},
		{"mode git never writes", []wt.Entry{{Mode: "100664", Name: "group-writable", ID: x}}, "group-writable: mode 100664 is not one git writes"},
		{"symlink into .git", []wt.Entry{wt.Link("cfg", r.Blob(".git/config"))}, "cfg -> .git/config: symlink resolves into a .git dir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tree := r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), c.entries...)...)
			bad := r.Commit(tree, "hostile", f.s1)
			up := r.Bundle(filepath.Join(t.TempDir(), "up.bundle"), bad, f.s1)
			err := f.advance(up, bad, 0)
			if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) ||
				!strings.Contains(err.Error(), "docs/security.md § Workspace commits") || !strings.Contains(err.Error(), bad) {
				t.Errorf("advance: %v (code %s); want EUNPROCESSABLE naming commit %s and saying %q", err, stratus.ErrorCode(err), bad, c.says)
			}
		})
	}
	// A bad commit under a good one is found too: every commit of the move.
	tree := r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.Link("leak", r.Blob("/etc/passwd")))...)
	bad := r.Commit(tree, "hostile", f.s1)
	good := r.Commit(r.Tree(f.s1Tree...), "cover", bad)
	up := r.Bundle(filepath.Join(t.TempDir(), "up.bundle"), good, f.s1)
	if err := f.advance(up, good, 0); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), "commit "+bad) {
		t.Errorf("a bad commit under a clean one: %v; want EUNPROCESSABLE naming %s", err, bad)
	}
}

// docs/security.md § Workspace commits: a bundle that is not one, is cut
// short, does not carry the head it claims, or a move that is not a
// descent, is the engine's fault: 4xx, never 5xx.
func TestCheckAdvance_RefusesBadBundlesWith4xx(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.repo
	s2 := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.File("new.txt", r.Blob("new\n")))...), "step 2", f.s1)
	good := r.Bundle(filepath.Join(f.tmp, "s2.bundle"), s2, f.s1)
	if err := f.advance(good, s2, 0); err != nil {
		t.Fatalf("the good bundle: %v", err)
	}
	other := r.Commit(r.Tree(wt.File("other.txt", r.Blob("o\n"))), "unrelated root")
	fromBase := r.Commit(r.Tree(f.s1Tree...), "on the base, not the head", f.base)
	unknown := r.Commit(r.Tree(f.s1Tree...), "a commit in no bundle of the run", f.s1)
	onUnknown := r.Commit(r.Tree(f.s1Tree...), "on it", unknown)
	merge := r.Commit(r.Tree(f.s1Tree...), "merge", f.s1, other)
	zeros := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.File("zeros", r.Blob(strings.Repeat("\x00", 8<<20))))...), "inflates", f.s1)
	header := func(b []byte) int { return bytes.Index(b, []byte("\n\nPACK")) + 2 }
	cases := []struct {
		name   string
		upload []byte
		to     string
		max    int64
		code   string
		says   string
	}{
		{"garbage", []byte("not a bundle at all\n"), s2, 0, stratus.EUNPROCESSABLE, `does not start with "# v2 git bundle"`},
		{"empty", nil, s2, 0, stratus.EUNPROCESSABLE, "not a readable git bundle"},
		{"header only", good[:header(good)], s2, 0, stratus.EUNPROCESSABLE, "not a readable git bundle: its pack"},
		{"truncated pack", good[:header(good)+(len(good)-header(good))/2], s2, 0, stratus.EUNPROCESSABLE, "not a readable git bundle: its pack"},
		{"pack garbled", append(append([]byte(nil), good[:header(good)+12]...), bytes.Repeat([]byte{0xff}, 64)...), s2, 0, stratus.EUNPROCESSABLE, "its pack"},
		{"does not carry the head", good, strings.Repeat("1", 40), 0, stratus.EUNPROCESSABLE, "does not carry commit 1111"},
		{"prerequisite the run lacks", r.Bundle(filepath.Join(f.tmp, "x.bundle"), onUnknown, unknown), onUnknown, 0, stratus.EUNPROCESSABLE, "needs commit " + unknown},
		{"unrelated root", r.Bundle(filepath.Join(f.tmp, "o.bundle"), other), other, 0, stratus.EUNPROCESSABLE, "has 0 parents"},
		{"on the base, not on the head", r.Bundle(filepath.Join(f.tmp, "b.bundle"), fromBase, f.s1), fromBase, 0, stratus.EUNPROCESSABLE, "has 0 parents"},
		{"a merge", r.Bundle(filepath.Join(f.tmp, "m.bundle"), merge, f.s1), merge, 0, stratus.EUNPROCESSABLE, "has 2 parents"},
		{"head already there", good, f.s1, 0, stratus.EINVALID, "is the run's head already"},
		{"inflates past the cap", r.Bundle(filepath.Join(f.tmp, "z.bundle"), zeros, f.s1), zeros, 1 << 20, stratus.ETOOLARGE, "inflates to more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := f.advance(c.upload, c.to, c.max)
			if stratus.ErrorCode(err) != c.code || !strings.Contains(fmt.Sprint(err), c.says) {
				t.Errorf("advance: %v (code %q); want %s saying %q", err, stratus.ErrorCode(err), c.code, c.says)
			}
		})
	}
}

// docs/security.md § Workspace commits: on AWS the worker API runs in a
// Lambda with no git binary and the bundles are objects in S3; the check
// needs neither git nor a disk of the run's (S3 sink on moto, PATH
// without git).
func TestCheckAdvance_OnS3WithoutGit(t *testing.T) {
	c := awss3.NewFromConfig(awstest.Moto(t).Config(), func(o *awss3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("bundlecheck-%d", time.Now().UnixNano())
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	sk, err := s3sink.New(c, bucket, "stratus/")
	if err != nil {
		t.Fatal(err)
	}
	f := setupOn(t, sk)
	r := f.repo
	good := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.File("new.txt", r.Blob("new\n")))...), "step 2", f.s1)
	goodBundle := r.Bundle(filepath.Join(f.tmp, "good.bundle"), good, f.s1)
	bad := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.Link("leak", r.Blob("/etc/passwd")))...), "hostile", f.s1)
	badBundle := r.Bundle(filepath.Join(f.tmp, "bad.bundle"), bad, f.s1)

	t.Setenv("PATH", t.TempDir()) // no git from here on
	if _, err := exec.LookPath("git"); err == nil {
		t.Fatal("git is still on PATH")
	}
	if err := f.advance(goodBundle, good, 0); err != nil {
		t.Errorf("a clean step from S3 without git: %v", err)
	}
	if err := f.advance(badBundle, bad, 0); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), "leak -> /etc/passwd") {
		t.Errorf("a hostile step from S3 without git: %v; want EUNPROCESSABLE naming leak", err)
	}
}

// docs/security.md § Workspace commits (a hardening finding): the head
// check applies the run's exclude list — an engine's commit adding
// .stratus/task/task.md or .stratus/hooks/x, a file of the ctx dir, or a
// symlink notes.txt -> .stratus/config.yaml was accepted, and the next
// worker's checkout held it. Each is refused, naming the path and the rule.
func TestCheckAdvance_RefusesCommitsTouchingStratusOwnPaths(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.repo
	x := r.Blob("x\n")
	state := func(sub string, e wt.Entry) wt.Entry { return wt.Dir(".stratus", r.Tree(wt.Dir(sub, r.Tree(e)))) }
	cases := []struct {
		name  string
		entry wt.Entry
		says  string
	}{
		{"the task file", state("task", wt.File("task.md", x)), `.stratus/task/task.md: inside ".stratus", Stratus's own path`},
		{"a hook", state("hooks", wt.Entry{Mode: "100755", Name: "x", ID: x}), `.stratus/hooks/x: inside ".stratus"`},
		{"the state dir in capitals", wt.Dir(".STRATUS", r.Tree(wt.File("config.yaml", x))), `.STRATUS/config.yaml: inside ".stratus"`},
		{"a file of the ctx dir", wt.Dir("workspace", r.Tree(wt.Dir("tasks", r.Tree(wt.Dir("t1", r.Tree(wt.Dir("ctx", r.Tree(wt.File("plan.md", x))))))))),
			`workspace/tasks/t1/ctx/plan.md: inside "workspace/tasks/t1/ctx"`},
		{"a symlink into the config", wt.Link("notes.txt", r.Blob(".stratus/config.yaml")), `notes.txt -> .stratus/config.yaml: symlink resolves into ".stratus"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bad := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), c.entry)...), "hostile", f.s1)
			err := f.advance(r.Bundle(filepath.Join(t.TempDir(), "up.bundle"), bad, f.s1), bad, 0)
			if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), bad) {
				t.Errorf("advance: %v (code %s); want EUNPROCESSABLE naming commit %s and saying %q", err, stratus.ErrorCode(err), bad, c.says)
			}
		})
	}
}

// docs/security.md § Workspace commits (a hardening finding): the server
// and the workers agree on what a step bundle is. A bundle whose only ref
// is HEAD (git bundle create FILE <from>..HEAD) was accepted, but workers
// fetch refs/* only: the next step failed ("commit … is in none of the 2
// bundles"), and so did pull. The check now takes one shape, what the
// runner makes — one well-formed ref under refs/ naming the new head —
// and refuses the rest, saying what a valid step bundle is: every bundle
// it accepts, the next worker checks out (Materialize, as it runs), and
// every bundle a worker cannot use is refused.
func TestCheckAdvance_TakesOnlyABundleTheWorkersCanFetch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.repo
	s2 := r.Commit(r.Tree(append(append([]wt.Entry(nil), f.s1Tree...), wt.File("new.txt", r.Blob("new\n")))...), "step 2", f.s1)
	good := r.Bundle(filepath.Join(f.tmp, "s2.bundle"), s2, f.s1)
	refLine := s2 + " refs/heads/tip-" + s2 + "\n"
	if !bytes.Contains(good, []byte(refLine)) {
		t.Fatalf("the bundle's header lacks %q", refLine)
	}
	// header rewrites the good bundle's ref lines.
	header := func(lines string) []byte { return bytes.Replace(good, []byte(refLine), []byte(lines), 1) }
	ghost := strings.Repeat("1", 40)
	cases := []struct {
		name     string
		upload   []byte
		says     string // "": accepted
		workerOK bool   // a worker checks the new head out of it
	}{
		{"one ref under refs/", good, "", true},
		{"one ref under refs/stratus", header(s2 + " refs/stratus/head\n"), "", true},
		{"HEAD alone", header(s2 + " HEAD\n"), `names its commit in ref "HEAD", which is not a well-formed name under refs/`, false},
		{"a name git refuses", header(s2 + " refs/heads/a..b\n"), `ref "refs/heads/a..b", which is not a well-formed name`, false},
		{"a second ref of the same name", header(refLine + f.s1 + " refs/heads/tip-" + s2 + "\n"), "lists 2 refs", false},
		{"a ref where the other's dir is", header(refLine + f.s1 + " refs/heads/tip-" + s2 + "/x\n"), "lists 2 refs", false},
		{"a ref to an object no bundle holds", header(refLine + ghost + " refs/heads/ghost\n"), "lists 2 refs", false},
		{"no ref", header(""), "lists no ref", false},
		// Stricter than the workers: one shape, said in one sentence.
		{"HEAD and a ref", header(s2 + " HEAD\n" + refLine), "lists 2 refs", true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := f.advance(c.upload, s2, 0)
			if c.says == "" && err != nil {
				t.Errorf("advance: %v; want it accepted", err)
			} else if c.says != "" && (stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || !strings.Contains(err.Error(), c.says) ||
				!strings.Contains(err.Error(), "a valid step bundle lists exactly one ref")) {
				t.Errorf("advance: %v (code %s); want EUNPROCESSABLE saying %q and what a valid step bundle is", err, stratus.ErrorCode(err), c.says)
			}
			// What the next worker does with the run's bundles and this one.
			up := filepath.Join(t.TempDir(), fmt.Sprintf("up%d.bundle", i))
			if err := os.WriteFile(up, c.upload, 0o600); err != nil {
				t.Fatal(err)
			}
			werr := workspace.Materialize(context.Background(), filepath.Join(t.TempDir(), "w"), append(append([]string(nil), f.files...), up), s2, runExclude)
			if (werr == nil) != c.workerOK {
				t.Errorf("a worker's checkout: %v; want it to work: %v", werr, c.workerOK)
			}
		})
	}
}
