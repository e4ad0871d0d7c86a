package runenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/statedir"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// Bundle is a run's environment materialized on the local disk.
type Bundle struct {
	Env      *worker.RunEnv // FlowDir = Dir/flows
	Dir      string         // absolute: config.yaml, task/, flows/, tools/
	TaskPath string         // Dir/task/<name>
	ToolsDir string         // Dir/tools (may not exist: a run without tools)
	Manifest *Manifest
}

// DefaultCacheEntries is how many runs' bundles a Cache keeps by default.
const DefaultCacheEntries = 16

// Cache loads bundles and keeps the last few, keyed by run id (a run id
// names one run across a deployment, and a frozen bundle never changes).
// Concurrent loads of one run share one read. When it holds more than Max
// bundles, the least recently used is dropped and its directory removed, so
// a long-lived Lambda's /tmp stays bounded. The zero value is not usable:
// use NewCache.
type Cache struct {
	dir string
	max int

	mu      sync.Mutex
	entries map[string]*cacheEntry
	order   []string // least recently used first
}

type cacheEntry struct {
	done   chan struct{}
	bundle *Bundle
	err    error
}

// NewCache returns a cache materializing bundles under dir ("" =
// os.TempDir(), /tmp on Lambda) keeping at most max of them (0 =
// DefaultCacheEntries).
func NewCache(dir string, max int) *Cache {
	if max <= 0 {
		max = DefaultCacheEntries
	}
	return &Cache{dir: dir, max: max, entries: map[string]*cacheEntry{}}
}

// Default is the process-wide cache Load and EnvFunc use.
var Default = NewCache("", 0)

// Load returns run runID's environment from sk through Default.
func Load(ctx context.Context, sk sink.Sink, runID string) (*worker.RunEnv, error) {
	b, err := Default.Load(ctx, sk, runID)
	if err != nil {
		return nil, err
	}
	return b.Env, nil
}

// EnvFunc adapts Default to worker.Service.Env: the run's environment is
// loaded from sk on first use and cached.
func EnvFunc(sk sink.Sink) func(ctx context.Context, runID string) (*worker.RunEnv, error) {
	return func(ctx context.Context, runID string) (*worker.RunEnv, error) { return Load(ctx, sk, runID) }
}

// Load returns run runID's bundle: from the cache when it holds the run
// and its directory still exists, otherwise read from sk (ReadManifest,
// then every file, each checked against its digest), written to a fresh
// directory and parsed (config.Load, task.Load, flow.Load of the
// manifest's task_type). A failed load is not cached.
//
// Errors: ReadManifest's (ENOTFOUND when the run was never frozen);
// EINVALID when a file is missing from the bundle, differs from its
// digest, or no longer parses; the sink's and the local disk's errors.
func (c *Cache) Load(ctx context.Context, sk sink.Sink, runID string) (*Bundle, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	for {
		c.mu.Lock()
		e, ok := c.entries[runID]
		if !ok {
			e = &cacheEntry{done: make(chan struct{})}
			c.entries[runID] = e
			c.mu.Unlock()
			e.bundle, e.err = c.read(ctx, sk, runID)
			c.settle(runID, e)
			return e.bundle, e.err
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			continue // the failed loader removed its entry: try again
		}
		if _, err := os.Stat(e.bundle.Env.FlowDir); err != nil {
			c.drop(runID, e) // someone cleaned the temp dir: materialize again
			continue
		}
		c.touch(runID)
		return e.bundle, nil
	}
}

// settle publishes a finished load: a failure is forgotten, a success is
// recorded as most recently used and the oldest bundles beyond max evicted.
func (c *Cache) settle(runID string, e *cacheEntry) {
	c.mu.Lock()
	var evicted []*cacheEntry
	if e.err != nil {
		delete(c.entries, runID)
	} else {
		c.order = append(slices.DeleteFunc(c.order, func(id string) bool { return id == runID }), runID)
		for len(c.order) > c.max {
			old := c.order[0]
			c.order = c.order[1:]
			if oe := c.entries[old]; oe != nil {
				evicted = append(evicted, oe)
				delete(c.entries, old)
			}
		}
	}
	c.mu.Unlock()
	close(e.done)
	for _, oe := range evicted {
		os.RemoveAll(oe.bundle.Dir)
	}
}

func (c *Cache) touch(runID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.order, runID); i >= 0 {
		c.order = append(slices.Delete(c.order, i, i+1), runID)
	}
}

func (c *Cache) drop(runID string, e *cacheEntry) {
	c.mu.Lock()
	if c.entries[runID] == e {
		delete(c.entries, runID)
		c.order = slices.DeleteFunc(c.order, func(id string) bool { return id == runID })
	}
	c.mu.Unlock()
	os.RemoveAll(e.bundle.Dir)
}

// fetchers bounds the concurrent sink reads of one load.
const fetchers = 8

// read reads run runID's bundle from sk into a fresh local directory.
func (c *Cache) read(ctx context.Context, sk sink.Sink, runID string) (*Bundle, error) {
	m, err := ReadManifest(ctx, sk, runID)
	if err != nil {
		return nil, err
	}
	prefix := BundlePrefix(m.RunID)
	return c.write(m, func(p string) ([]byte, error) { return sk.Get(ctx, prefix+p) })
}

// write materializes bundle m, each file's bytes read by get (by manifest
// path), into a fresh local directory.
func (c *Cache) write(m *Manifest, get func(path string) ([]byte, error)) (*Bundle, error) {
	parent := c.dir
	if parent == "" {
		parent = os.TempDir()
	}
	// In the state dir embedded (runs/<run_id>/): the owner's alone, as
	// MkdirTemp makes dir (docs/security.md § Files under .stratus).
	if err := os.MkdirAll(parent, statedir.DirPerm); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "stratus-run-"+m.RunID+"-")
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	b, err := materialize(m, get, dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return b, nil
}

// Freeze freezes run runID's environment to sk as the package's Freeze
// does (with the work dir's config.yaml) and returns its bundle,
// materialized from the bytes it just froze rather than read back from sk,
// and cached as Load caches it: what a run that starts here needs.
// Errors: Freeze's; the local disk's.
func (c *Cache) Freeze(ctx context.Context, sk sink.Sink, runID, workDir, flowsDir, taskPath string) (*Bundle, error) {
	m, data, err := freeze(ctx, sk, runID, workDir, flowsDir, taskPath, nil)
	if err != nil {
		return nil, err
	}
	e := &cacheEntry{done: make(chan struct{})}
	c.mu.Lock()
	if _, loaded := c.entries[runID]; loaded {
		c.mu.Unlock()
		return c.Load(ctx, sk, runID) // already loaded (or loading): that bundle
	}
	c.entries[runID] = e
	c.mu.Unlock()
	e.bundle, e.err = c.write(m, func(p string) ([]byte, error) {
		if d, ok := data[p]; ok {
			return d, nil
		}
		return nil, stratus.Errorf(stratus.EINVALID, "bundle file %s is listed in the manifest but was not frozen", p)
	})
	c.settle(runID, e)
	return e.bundle, e.err
}

func materialize(m *Manifest, get func(path string) ([]byte, error), dir string) (*Bundle, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	errs := make([]error, len(m.Files))
	sem := make(chan struct{}, fetchers)
	var wg sync.WaitGroup
	for i, f := range m.Files {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = fetch(get, root, BundlePrefix(m.RunID), f)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	local := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	cfg, err := config.Load(local(ConfigFile))
	if err != nil {
		return nil, err
	}
	tk, err := task.Load(local(m.TaskFile))
	if err != nil {
		return nil, err
	}
	if tk.TaskType != m.TaskType {
		return nil, stratus.Errorf(stratus.EINVALID, "the bundle of run %s: task file %s has task_type %q, the manifest %q", m.RunID, m.TaskFile, tk.TaskType, m.TaskType)
	}
	fl, err := flow.Load(local(FlowsDir), m.TaskType)
	if err != nil {
		return nil, err
	}
	var engineFiles map[string]string
	for _, f := range m.EngineFiles {
		if engineFiles == nil {
			engineFiles = map[string]string{}
		}
		engineFiles[f.Ref] = local(f.Path)
	}
	return &Bundle{
		Env:      &worker.RunEnv{Flow: fl, FlowDir: local(FlowsDir), Task: tk, Config: cfg, ToolsDir: local(ToolsDir), EngineFiles: engineFiles},
		Dir:      dir,
		TaskPath: local(m.TaskFile),
		ToolsDir: local(ToolsDir),
		Manifest: m,
	}, nil
}

// fetch reads one bundle file, checks it against the manifest and writes
// it under root, the owner's alone (0700 for an executable, 0600
// otherwise: docs/security.md § Files under .stratus).
func fetch(get func(path string) ([]byte, error), root *os.Root, prefix string, f File) error {
	data, err := get(f.Path)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return stratus.Errorf(stratus.EINVALID, "bundle file %s%s is listed in the manifest but missing", prefix, f.Path)
	} else if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if int64(len(data)) != f.Size || hex.EncodeToString(sum[:]) != f.SHA256 {
		return stratus.Errorf(stratus.EINVALID, "bundle file %s%s (%d bytes) does not match its manifest entry (%d bytes, sha256 %s)", prefix, f.Path, len(data), f.Size, f.SHA256)
	}
	rel := filepath.FromSlash(f.Path)
	if err := root.MkdirAll(filepath.Dir(rel), statedir.DirPerm); err != nil {
		return fmt.Errorf("materialize %s: %w", f.Path, err)
	}
	mode := statedir.FilePerm
	if f.Executable {
		mode = statedir.ExecPerm
	}
	if err := root.WriteFile(rel, data, mode); err != nil {
		return fmt.Errorf("materialize %s: %w", f.Path, err)
	}
	// WriteFile's mode is filtered by the umask; a tool must stay executable.
	return root.Chmod(rel, mode)
}
