package runenv_test

import (
	"bytes"
	"context"
	"fmt"
	iofs "io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// EnvFunc plugs straight into worker.Service.Env.
var _ = worker.Config{Env: runenv.EnvFunc(nil)}

const taskText = "---\nid: t1\ntitle: A task\n---\n## Description\n\nDo it.\n\n## Acceptance criteria\n\n- done\n"

// workDir lays out a work dir as `stratus install` does (config.yaml, the
// built-in flows with their role files), plus a task file and two tools,
// one executable.
type workDir struct {
	dir, flows, task string
}

func newWorkDir(t *testing.T) workDir {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, worker.StateDirName)
	w := workDir{dir: dir, flows: filepath.Join(state, "flows"), task: filepath.Join(dir, "tasks", "t1.md")}
	cfg, err := config.Marshal(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(state, "config.yaml"), cfg, 0o644)
	err = iofs.WalkDir(builtin.Flows, "flows", func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := builtin.Flows.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("flows", p)
		write(t, filepath.Join(w.flows, rel), data, 0o644)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(state, "tools", "lint"), []byte("#!/bin/sh\necho ok\n"), 0o755)
	write(t, filepath.Join(state, "tools", "lib", "helpers.sh"), []byte("helper() { :; }\n"), 0o644)
	write(t, w.task, []byte(taskText), 0o644)
	return w
}

func write(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// gofakes3Sink is an S3 sink on an in-process gofakes3 server.
func gofakes3Sink(t *testing.T) sink.Sink {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	c := awss3.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
	}, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("runs")}); err != nil {
		t.Fatal(err)
	}
	s, err := s3sink.New(c, "runs", "stratus")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var sinks = map[string]func(t *testing.T) sink.Sink{
	"fs":       func(t *testing.T) sink.Sink { return fs.New(t.TempDir()) },
	"gofakes3": gofakes3Sink,
}

// sameTree fails unless every regular file under src exists under dst with
// the same bytes (and, for executables, still executable).
func sameTree(t *testing.T, src, dst string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(src, func(p string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, _ := os.ReadFile(p)
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil {
			t.Errorf("%s not materialized: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs after the round trip", rel)
		}
		if runtime.GOOS != "windows" {
			wi, _ := os.Stat(p)
			gi, _ := os.Stat(filepath.Join(dst, rel))
			if wi.Mode()&0o100 != 0 && gi.Mode()&0o100 == 0 {
				t.Errorf("%s lost its executable bit", rel)
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// worc configuration.md (prompts and tools are frozen per task): what a run
// reads from DIR/.stratus — config, task, flow, role files, tools — comes
// back from the sink byte for byte, and the RunEnv built from it equals the
// embedded one, with FlowDir a local directory the worker reads role files
// from as in embedded mode.
func TestFreezeLoad_RoundTrip(t *testing.T) {
	for name, newSink := range sinks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWorkDir(t)
			sk := newSink(t)
			m, err := runenv.Freeze(ctx, sk, "run-rt", w.dir, "", w.task, nil)
			if err != nil {
				t.Fatal(err)
			}
			if m.TaskType != "implementation" || m.TaskFile != "task/t1.md" {
				t.Errorf("manifest task_type %q task_file %q, want implementation and task/t1.md", m.TaskType, m.TaskFile)
			}
			b, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, "run-rt")
			if err != nil {
				t.Fatal(err)
			}
			env := b.Env
			if env.FlowDir != filepath.Join(b.Dir, "flows") || !filepath.IsAbs(env.FlowDir) {
				t.Errorf("FlowDir %q, want %q", env.FlowDir, filepath.Join(b.Dir, "flows"))
			}
			if n := sameTree(t, w.flows, env.FlowDir); n < 3 {
				t.Errorf("only %d flow files compared", n)
			}
			sameTree(t, filepath.Join(w.dir, worker.StateDirName, "tools"), b.ToolsDir)
			if env.ToolsDir != b.ToolsDir {
				t.Errorf("Env.ToolsDir %q, want the bundle's %q: tools must run from the frozen copy", env.ToolsDir, b.ToolsDir)
			}

			// The same values embedded mode builds from the work dir.
			cfg, _ := config.Load(filepath.Join(w.dir, worker.StateDirName, "config.yaml"))
			if !reflect.DeepEqual(env.Config, cfg) {
				t.Errorf("Config differs from the work dir's")
			}
			tk, _ := task.Load(w.task)
			tk.Path = b.TaskPath
			if !reflect.DeepEqual(env.Task, tk) {
				t.Errorf("Task = %+v, want %+v", env.Task, tk)
			}
			fl, _ := flow.Load(w.flows, "implementation")
			if env.Flow.TaskType != fl.TaskType || len(env.Flow.Nodes) != len(fl.Nodes) || len(env.Flow.Edges) != len(fl.Edges) {
				t.Errorf("Flow %s (%d nodes, %d edges), want %s (%d nodes, %d edges)",
					env.Flow.TaskType, len(env.Flow.Nodes), len(env.Flow.Edges), fl.TaskType, len(fl.Nodes), len(fl.Edges))
			}
			// Every prompt the flow names resolves under FlowDir, and the
			// flow validates there with the frozen config and tools.
			if miss := flow.MissingRoleFiles(env.Flow, env.FlowDir); len(miss) > 0 {
				t.Errorf("role files missing under FlowDir: %+v", miss)
			}
			for _, p := range flow.Validate(env.Flow, flow.ValidateOptions{RoleFileRoot: env.FlowDir, Config: env.Config, ToolsDir: b.ToolsDir}) {
				if p.Fatal {
					t.Errorf("frozen flow does not validate: %s", p.Message)
				}
			}
		})
	}
}

// A frozen environment is never replaced: freezing the same one again
// returns its manifest, a different one is ECONFLICT and leaves the bundle
// as it was.
func TestFreeze_IdempotentNeverReplaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	m1, err := runenv.Freeze(ctx, sk, "run-idem", w.dir, "", w.task, nil)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := runenv.Freeze(ctx, sk, "run-idem", w.dir, "", w.task, nil)
	if err != nil || !reflect.DeepEqual(m1, m2) {
		t.Fatalf("second Freeze of the same environment = %+v, %v; want the same manifest", m2, err)
	}
	role := filepath.Join(w.flows, "implementation", "review.md")
	orig, _ := os.ReadFile(role)
	write(t, role, append(orig, "\nEdited after the run started.\n"...), 0o644)
	if _, err := runenv.Freeze(ctx, sk, "run-idem", w.dir, "", w.task, nil); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Fatalf("Freeze of a changed environment = %v, want ECONFLICT", err)
	}
	got, err := sk.Get(ctx, runenv.BundlePrefix("run-idem")+"flows/implementation/review.md")
	if err != nil || !bytes.Equal(got, orig) {
		t.Errorf("frozen role file changed by a refused Freeze (err %v)", err)
	}
}

// Freeze parses everything before writing anything: a bad config, task or
// missing flow leaves no bundle behind.
func TestFreeze_ParsesBeforeWriting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(w workDir) ([]byte, string)
		code  string
	}{
		{"bad config", func(w workDir) ([]byte, string) { return []byte("agents: [not, a, mapping]\n"), w.task }, stratus.EINVALID},
		{"missing task", func(w workDir) ([]byte, string) { return nil, filepath.Join(w.dir, "nope.md") }, stratus.ENOTFOUND},
		{"unknown flow", func(w workDir) ([]byte, string) {
			p := filepath.Join(w.dir, "other.md")
			os.WriteFile(p, []byte("---\nid: t2\ntitle: T\ntask_type: nosuchflow\n---\nbody\n"), 0o644)
			return nil, p
		}, stratus.ENOTFOUND},
	} {
		w := newWorkDir(t)
		sk := fs.New(t.TempDir())
		cfg, taskPath := tc.setup(w)
		_, err := runenv.Freeze(ctx, sk, "run-bad", w.dir, "", taskPath, cfg)
		if stratus.ErrorCode(err) != tc.code {
			t.Errorf("%s: Freeze = %v, want %s", tc.name, err, tc.code)
		}
		if entries, _ := os.ReadDir(sk.Root()); len(entries) > 0 {
			t.Errorf("%s: Freeze wrote to the sink before failing", tc.name)
		}
	}
}

// The cfg argument is config.yaml's bytes, frozen as given (the work dir's
// file is not read then).
func TestFreeze_ConfigBytesGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	os.Remove(filepath.Join(w.dir, worker.StateDirName, "config.yaml"))
	c := config.Default()
	c.Worker.TokenTTLSeconds = 777
	cfg, _ := config.Marshal(c)
	sk := fs.New(t.TempDir())
	if _, err := runenv.Freeze(ctx, sk, "run-cfg", w.dir, w.flows, w.task, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, "run-cfg")
	if err != nil {
		t.Fatal(err)
	}
	if b.Env.Config.Worker.TokenTTLSeconds != 777 {
		t.Errorf("Config.Worker.TokenTTLSeconds = %d, want 777 from the given bytes", b.Env.Config.Worker.TokenTTLSeconds)
	}
}

// A run id names a sink prefix and a local directory: one that could escape
// either is refused.
func TestFreezeLoad_RefuseBadRunIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	for _, id := range []string{"", ".", "..", "a/b", `a\b`, "a\nb"} {
		if _, err := runenv.Freeze(ctx, sk, id, w.dir, "", w.task, nil); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("Freeze(run %q) = %v, want EINVALID", id, err)
		}
		if _, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, id); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("Load(run %q) = %v, want EINVALID", id, err)
		}
	}
}

// A symbolic link in the flows dir that leads outside it is refused (the
// operator's other files never reach the bucket); one inside is followed.
func TestFreeze_SymlinkOutsideFlowsDirRefused(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on windows")
	}
	ctx := context.Background()
	w := newWorkDir(t)
	if err := os.Symlink("implementation/review.md", filepath.Join(w.flows, "alias.md")); err != nil {
		t.Fatal(err)
	}
	sk := fs.New(t.TempDir())
	if _, err := runenv.Freeze(ctx, sk, "run-link-in", w.dir, "", w.task, nil); err != nil {
		t.Fatalf("Freeze with a link inside the flows dir: %v", err)
	}
	if _, err := sk.Get(ctx, runenv.BundlePrefix("run-link-in")+"flows/alias.md"); err != nil {
		t.Errorf("linked file not frozen: %v", err)
	}
	secret := filepath.Join(t.TempDir(), "secret.txt")
	write(t, secret, []byte("private"), 0o600)
	if err := os.Symlink(secret, filepath.Join(w.flows, "leak.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := runenv.Freeze(ctx, sk, "run-link-out", w.dir, "", w.task, nil); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Freeze with a link out of the flows dir = %v, want EINVALID", err)
	}
}

// Load refuses what was never frozen (ENOTFOUND), an incomplete bundle
// (files without a manifest), and a bundle whose files do not match their
// digests.
func TestLoad_RefusesMissingIncompleteOrAlteredBundles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	c := runenv.NewCache(t.TempDir(), 0)
	if _, err := c.Load(ctx, sk, "run-never"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("Load of a run never frozen = %v, want ENOTFOUND", err)
	}
	if _, err := runenv.Freeze(ctx, sk, "run-alt", w.dir, "", w.task, nil); err != nil {
		t.Fatal(err)
	}
	// Incomplete: the manifest is what makes a bundle; without it, nothing.
	manifest := filepath.Join(sk.Root(), "runs", "run-alt", "bundle", "manifest.json")
	raw, _ := os.ReadFile(manifest)
	os.Remove(manifest)
	if _, err := c.Load(ctx, sk, "run-alt"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("Load without a manifest = %v, want ENOTFOUND", err)
	}
	os.WriteFile(manifest, raw, 0o644)
	key := runenv.BundlePrefix("run-alt") + "flows/implementation/review.md"
	if err := sk.Put(ctx, key, []byte("tampered")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(ctx, sk, "run-alt"); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Load of an altered bundle = %v, want EINVALID", err)
	}
	os.Remove(sk.Path(key))
	if _, err := c.Load(ctx, sk, "run-alt"); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Load of a bundle missing a file = %v, want EINVALID", err)
	}
}

// counting counts Gets through a sink.
type counting struct {
	sink.Sink
	gets atomic.Int64
}

func (c *counting) Get(ctx context.Context, key string) ([]byte, error) {
	c.gets.Add(1)
	return c.Sink.Get(ctx, key)
}

// The cache reads a run's bundle once, for concurrent and later callers
// alike, and materializes it again when its directory disappeared.
func TestCache_LoadsEachRunOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := &counting{Sink: fs.New(t.TempDir())}
	m, err := runenv.Freeze(ctx, sk, "run-cache", w.dir, "", w.task, nil)
	if err != nil {
		t.Fatal(err)
	}
	sk.gets.Store(0)
	c := runenv.NewCache(t.TempDir(), 0)
	bundles := make([]*runenv.Bundle, 8)
	var wg sync.WaitGroup
	for i := range bundles {
		wg.Go(func() {
			b, err := c.Load(ctx, sk, "run-cache")
			if err != nil {
				t.Error(err)
			}
			bundles[i] = b
		})
	}
	wg.Wait()
	perLoad := int64(len(m.Files) + 1) // the manifest, then each file
	if n := sk.gets.Load(); n != perLoad {
		t.Errorf("8 concurrent Loads made %d Gets, want %d (one read)", n, perLoad)
	}
	for _, b := range bundles[1:] {
		if b != bundles[0] {
			t.Fatalf("concurrent Loads returned different bundles")
		}
	}
	if b, _ := c.Load(ctx, sk, "run-cache"); b != bundles[0] || sk.gets.Load() != perLoad {
		t.Errorf("a later Load read the sink again")
	}
	os.RemoveAll(bundles[0].Dir)
	b, err := c.Load(ctx, sk, "run-cache")
	if err != nil {
		t.Fatal(err)
	}
	if sk.gets.Load() != 2*perLoad {
		t.Errorf("Load after the directory vanished made %d Gets in all, want %d", sk.gets.Load(), 2*perLoad)
	}
	if _, err := os.Stat(filepath.Join(b.Env.FlowDir, "implementation.yaml")); err != nil {
		t.Errorf("bundle not materialized again: %v", err)
	}
}

// Cache.Freeze, how a run that starts here freezes its environment,
// writes the bundle to the sink and materializes it from the bytes it just
// froze: no Get reads it back, the bundle is the one a Load from the sink
// would give (the same files, config, task and flow), and it is cached, so
// the run's next Load is that bundle.
func TestCache_FreezeMaterializesWhatItFroze(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := &counting{Sink: fs.New(t.TempDir())}
	c := runenv.NewCache(t.TempDir(), 0)
	b, err := c.Freeze(ctx, sk, "run-fz", w.dir, "", w.task)
	if err != nil {
		t.Fatal(err)
	}
	if n := sk.gets.Load(); n > 1 { // the manifest's Get: is the run frozen already?
		t.Errorf("Freeze made %d Gets; want none of the files it froze", n)
	}
	loaded, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, "run-fz")
	if err != nil {
		t.Fatal(err)
	}
	if n := sameTree(t, loaded.Dir, b.Dir); n < 3 {
		t.Errorf("only %d bundle files compared", n)
	}
	if !reflect.DeepEqual(b.Env.Config, loaded.Env.Config) || !reflect.DeepEqual(b.Manifest, loaded.Manifest) ||
		b.Env.Flow.TaskType != loaded.Env.Flow.TaskType || len(b.Env.Flow.Nodes) != len(loaded.Env.Flow.Nodes) || b.Env.Task.ID != loaded.Env.Task.ID {
		t.Errorf("the frozen bundle differs from the one Load reads back")
	}
	gets := sk.gets.Load()
	if again, err := c.Load(ctx, sk, "run-fz"); err != nil || again != b || sk.gets.Load() != gets {
		t.Errorf("Load after Freeze: %v, same bundle %v, %d more Gets; want the frozen bundle from the cache", err, again == b, sk.gets.Load()-gets)
	}
}

// A failed load is not cached: once the run is frozen, the next Load
// succeeds.
func TestCache_FailureNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	c := runenv.NewCache(t.TempDir(), 0)
	if _, err := c.Load(ctx, sk, "run-late"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Fatalf("Load before Freeze = %v, want ENOTFOUND", err)
	}
	if _, err := runenv.Freeze(ctx, sk, "run-late", w.dir, "", w.task, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Load(ctx, sk, "run-late"); err != nil {
		t.Errorf("Load after Freeze = %v (was the failure cached?)", err)
	}
}

// The cache keeps at most max bundles; the least recently used is dropped
// and its directory removed, so Lambda's /tmp stays bounded.
func TestCache_EvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	for i := 1; i <= 3; i++ {
		if _, err := runenv.Freeze(ctx, sk, fmt.Sprintf("run-%d", i), w.dir, "", w.task, nil); err != nil {
			t.Fatal(err)
		}
	}
	c := runenv.NewCache(t.TempDir(), 2)
	load := func(id string) *runenv.Bundle {
		b, err := c.Load(ctx, sk, id)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b1, b2 := load("run-1"), load("run-2")
	load("run-1") // run-1 is now the most recently used
	b3 := load("run-3")
	if _, err := os.Stat(b2.Dir); !os.IsNotExist(err) {
		t.Errorf("evicted run-2's directory still exists (stat err %v)", err)
	}
	for _, b := range []*runenv.Bundle{b1, b3} {
		if _, err := os.Stat(b.Dir); err != nil {
			t.Errorf("kept bundle's directory %s: %v", b.Dir, err)
		}
	}
	if load("run-1") != b1 {
		t.Errorf("run-1 was evicted although used more recently than run-2")
	}
}

// Load and EnvFunc go through the process-wide cache: what a Lambda wires
// into worker.Service.Env. A second call returns the same environment.
func TestEnvFunc_LoadsThroughDefaultCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	id := "run-envfunc-" + filepath.Base(w.dir) // unique: Default is process-wide
	if _, err := runenv.Freeze(ctx, sk, id, w.dir, "", w.task, nil); err != nil {
		t.Fatal(err)
	}
	envOf := runenv.EnvFunc(sk)
	env, err := envOf(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(env.FlowDir)) })
	if env.Flow.TaskType != "implementation" || env.Task.ID != "t1" {
		t.Errorf("env of flow %q task %q, want implementation and t1", env.Flow.TaskType, env.Task.ID)
	}
	again, err := runenv.Load(ctx, sk, id)
	if err != nil || again != env {
		t.Errorf("Load after EnvFunc = %p, %v; want the cached %p", again, err, env)
	}
}

// A worker needs nothing from the operator's disk: the files
// a provider's launch spec names — its command when that is a path, an arg,
// an env value — are frozen under engine/ and come back from the sink byte
// for byte, executable bits kept, keyed by the value as config.yaml writes
// it; names looked up in PATH, placeholders and "$VAR" values are not
// files; one over MaxEngineFileBytes is ETOOLARGE naming the provider.
func TestFreeze_EngineFilesTravelWithTheRun(t *testing.T) {
	for name, newSink := range sinks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			w := newWorkDir(t)
			write(t, filepath.Join(w.dir, "engines", "run.sh"), []byte("#!/bin/sh\necho engine\n"), 0o755)
			write(t, filepath.Join(w.dir, "engines", "scenario.json"), []byte(`{"turns":[]}`), 0o644)
			write(t, filepath.Join(w.dir, "abs.txt"), []byte("absolute"), 0o644)
			cfg := config.Default()
			cfg.Agents.Providers["shell"] = config.Provider{Command: "./run.sh", Dir: "engines",
				Args: []string{"scenario.json", "{kind}", "--flag"},
				Env:  map[string]string{"NOTES": filepath.Join(w.dir, "abs.txt"), "KEY": "$SECRET"}}
			cfgBytes, err := config.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			sk := newSink(t)
			m, err := runenv.Freeze(ctx, sk, "run-ef", w.dir, "", w.task, cfgBytes)
			if err != nil {
				t.Fatal(err)
			}
			refs := map[string]bool{}
			for _, f := range m.EngineFiles {
				refs[f.Ref] = true
			}
			want := map[string]bool{"./run.sh": true, "scenario.json": true, filepath.Join(w.dir, "abs.txt"): true}
			if !reflect.DeepEqual(refs, want) {
				t.Errorf("engine files for %v, want %v", refs, want)
			}
			b, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, "run-ef")
			if err != nil {
				t.Fatal(err)
			}
			for ref, src := range map[string]string{
				"./run.sh":                      filepath.Join(w.dir, "engines", "run.sh"),
				"scenario.json":                 filepath.Join(w.dir, "engines", "scenario.json"),
				filepath.Join(w.dir, "abs.txt"): filepath.Join(w.dir, "abs.txt"),
			} {
				got, ok := b.Env.EngineFiles[ref]
				if !ok {
					t.Errorf("RunEnv.EngineFiles has no %q: %v", ref, b.Env.EngineFiles)
					continue
				}
				if !strings.HasPrefix(got, b.Dir) {
					t.Errorf("%q maps to %s, outside the bundle %s", ref, got, b.Dir)
				}
				gb, _ := os.ReadFile(got)
				wb, _ := os.ReadFile(src)
				if !bytes.Equal(gb, wb) {
					t.Errorf("%q: frozen copy %q, want %q", ref, gb, wb)
				}
			}
			if fi, err := os.Stat(b.Env.EngineFiles["./run.sh"]); err != nil || fi.Mode()&0o100 == 0 {
				t.Errorf("the engine script lost its executable bit: %v %v", fi, err)
			}

			// Too large: refused before anything is written, naming the provider.
			big := filepath.Join(w.dir, "engines", "big.bin")
			write(t, big, make([]byte, runenv.MaxEngineFileBytes+1), 0o644)
			cfg.Agents.Providers["shell"] = config.Provider{Command: "sh", Args: []string{big}}
			cfgBytes, _ = config.Marshal(cfg)
			_, err = runenv.Freeze(ctx, sk, "run-ef-big", w.dir, "", w.task, cfgBytes)
			if stratus.ErrorCode(err) != stratus.ETOOLARGE || !strings.Contains(err.Error(), "agents.providers.shell") {
				t.Errorf("a %d-byte engine file: %v, want ETOOLARGE naming agents.providers.shell", runenv.MaxEngineFileBytes+1, err)
			}
			if _, err := runenv.ReadManifest(ctx, sk, "run-ef-big"); err == nil {
				t.Errorf("a refused freeze left a manifest behind")
			}
		})
	}
}

// A task file written straight into a stack's task pool runs with the
// pool's environment (README.md § Task pool): Derive gives the new run the
// same config, flows and tools, with its own task; a task whose flow is
// not among them is refused naming the flows there are; a run that has a
// bundle of its own keeps it.
func TestDerive_TheSameEnvironmentWithAnotherTask(t *testing.T) {
	ctx := context.Background()
	w := newWorkDir(t)
	sk := fs.New(t.TempDir())
	if _, err := runenv.Freeze(ctx, sk, "run-ref", w.dir, "", w.task, nil); err != nil {
		t.Fatal(err)
	}
	body := []byte("---\nid: t9\ntitle: Raw\ntask_type: implementation\n---\nbody\n")
	m, err := runenv.Derive(ctx, sk, "run-ref", "run-raw", "t9.md", body)
	if err != nil {
		t.Fatal(err)
	}
	if m.RunID != "run-raw" || m.TaskFile != "task/t9.md" || slices.ContainsFunc(m.Files, func(f runenv.File) bool { return f.Path == "task/t1.md" }) {
		t.Errorf("derived manifest %+v; want run-raw with task/t9.md alone", m)
	}
	b, err := runenv.NewCache(t.TempDir(), 0).Load(ctx, sk, "run-raw")
	if err != nil {
		t.Fatal(err)
	}
	if b.Env.Task.ID != "t9" || b.Env.Flow.TaskType != "implementation" {
		t.Errorf("derived run's task %s flow %s", b.Env.Task.ID, b.Env.Flow.TaskType)
	}
	sameTree(t, filepath.Join(w.dir, worker.StateDirName, "tools"), b.ToolsDir)
	if n := sameTree(t, w.flows, b.Env.FlowDir); n < 3 {
		t.Errorf("only %d flow files compared", n)
	}
	// Again: the same bundle, nothing replaced.
	if _, err := runenv.Derive(ctx, sk, "run-ref", "run-raw", "t9.md", body); err != nil {
		t.Errorf("deriving the same again: %v", err)
	}
	other := []byte("---\nid: t9\ntitle: Other\ntask_type: implementation\n---\nother\n")
	if _, err := runenv.Derive(ctx, sk, "run-ref", "run-raw", "t9.md", other); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("deriving another task into run-raw: %v; want ECONFLICT", err)
	}
	_, err = runenv.Derive(ctx, sk, "run-ref", "run-x", "x.md", []byte("---\nid: x\ntitle: X\ntask_type: nosuch\n---\nbody\n"))
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || !strings.Contains(err.Error(), `flow "nosuch"`) || !strings.Contains(err.Error(), "implementation") {
		t.Errorf("a task of a flow the pool lacks: %v; want ENOTFOUND naming it and the flows there are", err)
	}
	if keys, _ := sk.List(ctx, "runs/run-x"); len(keys) != 0 {
		t.Errorf("a refused derivation wrote %v", keys)
	}
	if _, err := runenv.Derive(ctx, sk, "run-ref", "run-y", "y.md", []byte("---\nid: [\n")); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("a task that does not parse: %v; want EINVALID", err)
	}
}
