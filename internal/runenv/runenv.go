package runenv

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/task"
	"github.com/stratusflow/stratus/internal/worker"
)

// Paths inside a bundle (relative to BundlePrefix) and inside a work dir.
const (
	ManifestFile = "manifest.json"
	ConfigFile   = "config.yaml"
	TaskDir      = "task"
	FlowsDir     = "flows"
	ToolsDir     = "tools"
	EngineDir    = "engine" // the files providers' launch specs name
)

// Limits on what Freeze uploads: a run's environment is prompts, YAML and
// small scripts, and every Lambda cold start reads it whole.
const (
	MaxBundleBytes = 64 << 20
	MaxBundleFiles = 4096
)

// ManifestVersion is the bundle format Freeze writes and Load reads.
const ManifestVersion = 1

// Manifest lists a bundle's files. It holds no timestamps: freezing the
// same environment twice gives the same manifest.
type Manifest struct {
	Version  int    `json:"version"`
	RunID    string `json:"run_id"`
	TaskType string `json:"task_type"` // the flow: flows/<task_type>.yaml
	TaskFile string `json:"task_file"` // bundle path of the task file: task/<name>
	Files    []File `json:"files"`     // sorted by Path
	// EngineFiles are the files providers' launch specs name (an arg or an
	// env value that is the path of a regular file: the script engine's
	// scenario, a shell engine's script), frozen under engine/ so that a
	// worker needs nothing from the operator's disk
	// (docs/architecture.md § The run lifecycle).
	EngineFiles []EngineFile `json:"engine_files,omitempty"`
}

// EngineFile is one file a provider's launch spec names.
type EngineFile struct {
	Ref  string `json:"ref"`  // the arg or env value as config.yaml writes it
	Path string `json:"path"` // its bundle path: engine/<n>-<base name>
}

// File is one file of a bundle.
type File struct {
	Path       string `json:"path"` // relative to the bundle: config.yaml, task/..., flows/..., tools/...
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"` // lower-case hex
	Executable bool   `json:"executable,omitempty"`
}

// BundlePrefix returns the sink key prefix of a run's bundle:
// "runs/<run_id>/bundle/".
func BundlePrefix(runID string) string { return RunPrefix(runID) + "bundle/" }

// RunPrefix is the sink prefix under which every file of run runID is
// kept on a stack: its bundle, definition, workspace bundles and work-dir
// files ("runs/<run_id>/"; docs/security.md § Retention).
func RunPrefix(runID string) string { return "runs/" + runID + "/" }

// RemoveRun deletes, best effort, every file under run runID's prefix
// (RunPrefix): what a start or a claim froze for a run that was then
// refused, never recorded.
func RemoveRun(ctx context.Context, sk sink.Sink, runID string) {
	keys, err := sk.List(ctx, strings.TrimSuffix(RunPrefix(runID), "/"))
	if err != nil {
		return
	}
	for _, k := range keys {
		sk.Delete(ctx, k)
	}
}

// checkRunID refuses a run id that is not one sink-key segment: it names a
// sink prefix and a local directory.
func checkRunID(runID string) error {
	if runID == "" || strings.Contains(runID, "/") || sink.CheckKey("runs/"+runID) != nil || len(runID) > 128 {
		return stratus.FieldErrorf(stratus.EINVALID, "run_id",
			"run id %q cannot name a bundle; valid: one path segment of at most 128 printable characters, not \".\" or \"..\", without '/' or '\\'", runID)
	}
	return nil
}

// Freeze writes the environment of run runID to sk under
// BundlePrefix(runID) and returns its manifest. workDir is the work dir
// (its .stratus/tools is frozen as the tools); flowsDir the flows dir
// ("" = workDir/.stratus/flows); taskPath the task file; cfg the bytes of
// config.yaml (nil = read workDir/.stratus/config.yaml). Everything is
// parsed the way Load will parse it (config.Parse, task.Parse, flow.Load
// of the task's task_type) before anything is written, so a bundle that
// freezes loads.
//
// Freezing is idempotent: when the run already has a manifest equal to
// the one Freeze would write, Freeze returns it; a different one is
// ECONFLICT (prompts and tools are frozen per run, never replaced).
//
// Errors: EINVALID (Field "run_id") for a run id that cannot name a
// bundle; the parsers' errors (EINVALID, ENOTFOUND for a missing task file,
// config or flow); EINVALID for a file whose relative path is not a valid
// sink key or a symbolic link that leads outside its directory; ETOOLARGE
// past MaxBundleBytes or MaxBundleFiles; the sink's errors.
func Freeze(ctx context.Context, sk sink.Sink, runID, workDir, flowsDir, taskPath string, cfg []byte) (*Manifest, error) {
	m, _, err := freeze(ctx, sk, runID, workDir, flowsDir, taskPath, cfg)
	return m, err
}

// freeze is Freeze, also returning each file's bytes by manifest path.
func freeze(ctx context.Context, sk sink.Sink, runID, workDir, flowsDir, taskPath string, cfg []byte) (*Manifest, map[string][]byte, error) {
	if err := checkRunID(runID); err != nil {
		return nil, nil, err
	}
	state := filepath.Join(workDir, worker.StateDirName)
	if flowsDir == "" {
		flowsDir = filepath.Join(state, FlowsDir)
	}
	if cfg == nil {
		b, err := inputfile.ReadFile("config", filepath.Join(state, ConfigFile))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, stratus.Errorf(stratus.ENOTFOUND, "no config at %s; run `stratus install` first", filepath.Join(state, ConfigFile))
		} else if stratus.ErrorCode(err) == stratus.EINVALID {
			return nil, nil, err // not a regular file
		} else if err != nil {
			return nil, nil, fmt.Errorf("read config: %w", err)
		}
		cfg = b
	}
	parsed, err := config.Parse(filepath.Join(state, ConfigFile), cfg)
	if err != nil {
		return nil, nil, err
	}
	tk, err := task.Load(taskPath)
	if err != nil {
		return nil, nil, err
	}
	taskBytes, err := inputfile.ReadFile("task file", taskPath)
	if stratus.ErrorCode(err) == stratus.EINVALID {
		return nil, nil, err // swapped for what is not a regular file since Load
	} else if err != nil {
		return nil, nil, fmt.Errorf("read task file: %w", err)
	}
	if _, err := flow.Load(flowsDir, tk.TaskType); err != nil {
		return nil, nil, err
	}

	b := &builder{files: map[string]entry{}}
	if err := b.add(ConfigFile, cfg, false); err != nil {
		return nil, nil, err
	}
	taskKey := TaskDir + "/" + filepath.Base(taskPath)
	if err := b.add(taskKey, taskBytes, false); err != nil {
		return nil, nil, err
	}
	if err := b.addDir(FlowsDir, flowsDir, true); err != nil {
		return nil, nil, err
	}
	if err := b.addDir(ToolsDir, filepath.Join(state, ToolsDir), false); err != nil {
		return nil, nil, err
	}
	engineFiles, err := b.addEngineFiles(workDir, parsed)
	if err != nil {
		return nil, nil, err
	}
	m := &Manifest{Version: ManifestVersion, RunID: runID, TaskType: tk.TaskType, TaskFile: taskKey, Files: b.manifestFiles(), EngineFiles: engineFiles}
	data := make(map[string][]byte, len(b.files))
	for p, e := range b.files {
		data[p] = e.data
	}
	m, err = store(ctx, sk, m, func(path string) ([]byte, error) { return data[path], nil })
	return m, data, err
}

// store writes bundle m to sk under BundlePrefix(m.RunID): each file's
// bytes (data), then the manifest, which makes it whole. The same manifest
// there already is m's bundle (returned as it is); another is ECONFLICT
// (Field "run_id"): a run's prompts and tools are never replaced.
func store(ctx context.Context, sk sink.Sink, m *Manifest, data func(path string) ([]byte, error)) (*Manifest, error) {
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	mb = append(mb, '\n')
	prefix := BundlePrefix(m.RunID)
	switch old, err := sk.Get(ctx, prefix+ManifestFile); {
	case err == nil && bytes.Equal(old, mb):
		return m, nil
	case err == nil:
		return nil, stratus.FieldErrorf(stratus.ECONFLICT, "run_id",
			"run %s already has a frozen environment that differs from this one (%s%s); a run's prompts and tools are never replaced", m.RunID, prefix, ManifestFile)
	case stratus.ErrorCode(err) != stratus.ENOTFOUND:
		return nil, err
	}
	for _, f := range m.Files {
		body, err := data(f.Path)
		if err != nil {
			return nil, err
		}
		if err := sk.Put(ctx, prefix+f.Path, body); err != nil {
			return nil, err
		}
	}
	if err := sk.Put(ctx, prefix+ManifestFile, mb); err != nil {
		return nil, err
	}
	return m, nil
}

type entry struct {
	data []byte
	exec bool
}

// builder collects a bundle's files and enforces the limits.
type builder struct {
	files map[string]entry
	total int64
}

func (b *builder) add(rel string, data []byte, exec bool) error {
	if err := sink.CheckKey(rel); err != nil {
		return stratus.FieldErrorf(stratus.EINVALID, "path",
			"file %q cannot be frozen: its path is not a portable relative path (%s)", rel, err.(*stratus.Error).Message)
	}
	b.total += int64(len(data))
	if len(b.files) >= MaxBundleFiles || b.total > MaxBundleBytes {
		return stratus.Errorf(stratus.ETOOLARGE,
			"the run environment is over %d files or %d bytes at %s; valid: flows and tools dirs holding only prompts, YAML and scripts", MaxBundleFiles, MaxBundleBytes, rel)
	}
	b.files[rel] = entry{data: data, exec: exec}
	return nil
}

// addDir adds every regular file under dir as <under>/<relative path>.
// A symbolic link is followed when it stays inside dir (os.Root refuses
// the rest); a link to a directory is not walked. A missing dir adds
// nothing unless required.
func (b *builder) addDir(under, dir string, required bool) error {
	r, err := os.OpenRoot(dir)
	if errors.Is(err, os.ErrNotExist) && !required {
		return nil
	} else if err != nil {
		return fmt.Errorf("freeze %s: %w", dir, err)
	}
	defer r.Close()
	return iofs.WalkDir(r.FS(), ".", func(p string, d iofs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("freeze %s: %w", dir, err)
		}
		if d.IsDir() {
			return nil
		}
		fi, err := r.Stat(p)
		if err != nil {
			if d.Type()&iofs.ModeSymlink != 0 {
				return stratus.FieldErrorf(stratus.EINVALID, "path",
					"%s is a symbolic link that does not resolve inside %s (%v); valid: links to files inside that directory", filepath.Join(dir, p), dir, err)
			}
			return fmt.Errorf("freeze %s: %w", filepath.Join(dir, p), err)
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		data, err := r.ReadFile(p)
		if err != nil {
			return fmt.Errorf("freeze %s: %w", filepath.Join(dir, p), err)
		}
		return b.add(under+"/"+p, data, fi.Mode().Perm()&0o111 != 0)
	})
}

func (b *builder) manifestFiles() []File {
	files := make([]File, 0, len(b.files))
	for p, e := range b.files {
		sum := sha256.Sum256(e.data)
		files = append(files, File{Path: p, Size: int64(len(e.data)), SHA256: hex.EncodeToString(sum[:]), Executable: e.exec})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files
}

// ReadManifest returns the manifest of run runID's bundle. Errors:
// EINVALID for a bad run id; ENOTFOUND (Field "run_id") when the run has
// no complete bundle; EINVALID for a manifest this version cannot read;
// the sink's errors.
func ReadManifest(ctx context.Context, sk sink.Sink, runID string) (*Manifest, error) {
	if err := checkRunID(runID); err != nil {
		return nil, err
	}
	key := BundlePrefix(runID) + ManifestFile
	raw, err := sk.Get(ctx, key)
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "run_id", "run %s has no frozen environment (no %s in the sink)", runID, key)
	} else if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "%s is not a bundle manifest: %v", key, err)
	}
	if m.Version != ManifestVersion {
		return nil, stratus.Errorf(stratus.EINVALID, "%s has version %d; this stratus reads version %d", key, m.Version, ManifestVersion)
	}
	if m.RunID != runID {
		return nil, stratus.Errorf(stratus.EINVALID, "%s belongs to run %q, not %q", key, m.RunID, runID)
	}
	for _, f := range m.Files {
		top, _, _ := strings.Cut(f.Path, "/")
		if sink.CheckKey(f.Path) != nil || !(f.Path == ConfigFile || top == TaskDir || top == FlowsDir || top == ToolsDir || top == EngineDir) {
			return nil, stratus.Errorf(stratus.EINVALID, "%s lists %q, which is not a bundle path (config.yaml, task/, flows/, tools/, engine/)", key, f.Path)
		}
	}
	for _, e := range m.EngineFiles {
		if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == e.Path }) || path.Dir(e.Path) != EngineDir {
			return nil, stratus.Errorf(stratus.EINVALID, "%s names engine file %q for %q, which it does not list under %s/", key, e.Path, e.Ref, EngineDir)
		}
	}
	if path.Dir(m.TaskFile) != TaskDir {
		return nil, stratus.Errorf(stratus.EINVALID, "%s names task file %q; valid: task/<name>", key, m.TaskFile)
	}
	for _, want := range []string{ConfigFile, m.TaskFile, FlowsDir + "/" + m.TaskType + ".yaml"} {
		if !slices.ContainsFunc(m.Files, func(f File) bool { return f.Path == want }) {
			return nil, stratus.Errorf(stratus.EINVALID, "%s does not list %s; a bundle holds config.yaml, the task file and the flow", key, want)
		}
	}
	return &m, nil
}

// MaxEngineFileBytes bounds one file a provider's launch spec names (it
// travels to every worker in its prompt payload).
const MaxEngineFileBytes = 1 << 20

// addEngineFiles freezes the files the providers' launch specs name: the
// command when it is a path, and every arg and env value of every provider
// that is the path of a regular file,
// absolute or relative to the provider's dir (the engine's working
// directory: dir under the work dir, else the work dir), up to
// MaxEngineFileBytes each. Placeholders and "$VAR" values name no file.
func (b *builder) addEngineFiles(workDir string, cfg *config.Config) ([]EngineFile, error) {
	var out []EngineFile
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents.Providers)) {
		p := cfg.Agents.Providers[name]
		var refs []string
		if strings.Contains(p.Command, "/") {
			refs = append(refs, p.Command) // a path, not a name looked up in PATH
		}
		refs = append(refs, p.Args...)
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			refs = append(refs, p.Env[k])
		}
		for _, ref := range refs {
			if ref == "" || seen[ref] || strings.ContainsAny(ref, "{}$") {
				continue
			}
			path := ref
			if !filepath.IsAbs(path) {
				path = filepath.Join(workDir, p.Dir, path)
			}
			fi, err := os.Stat(path)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if fi.Size() > MaxEngineFileBytes {
				return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "agents.providers."+name, "%s names %s, %d bytes; a file a launch spec names travels to every worker and may be at most %d bytes", ref, path, fi.Size(), MaxEngineFileBytes)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("read %s (named by provider %s): %w", path, name, err)
			}
			seen[ref] = true
			rel := fmt.Sprintf("%s/%d-%s", EngineDir, len(out)+1, filepath.Base(path))
			if err := b.add(rel, data, fi.Mode()&0o111 != 0); err != nil {
				return nil, err
			}
			out = append(out, EngineFile{Ref: ref, Path: rel})
		}
	}
	return out, nil
}

// Derive freezes the environment of run to from run from's bundle: the same
// config, flows, tools and engine files, copied under BundlePrefix(to), with
// the task file name holding body in place of from's task — what a task
// file written straight into a stack's task pool runs with (README.md §
// Task pool). The task is parsed and its flow must be among from's flows;
// Load of to then parses everything as it would any bundle. Errors:
// EINVALID for a bad run id or a task that does not parse; ENOTFOUND
// (Field "task_type") naming the flows there are when the task's flow is
// not one of them; ReadManifest's of from; ECONFLICT when to has another
// bundle already; the sink's.
func Derive(ctx context.Context, sk sink.Sink, from, to, name string, body []byte) (*Manifest, error) {
	if err := checkRunID(to); err != nil {
		return nil, err
	}
	m, err := ReadManifest(ctx, sk, from)
	if err != nil {
		return nil, err
	}
	tk, err := task.Parse(name, body)
	if err != nil {
		return nil, err
	}
	var flows []string
	for _, f := range m.Files {
		if dir, file := path.Split(f.Path); dir == FlowsDir+"/" && strings.HasSuffix(file, ".yaml") {
			flows = append(flows, strings.TrimSuffix(file, ".yaml"))
		}
	}
	if !slices.Contains(flows, tk.TaskType) {
		return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "task_type", "flow %q is not among the flows frozen with the pool (%s); valid: %s", tk.TaskType, from, strings.Join(flows, ", "))
	}
	taskKey := TaskDir + "/" + path.Base(filepath.ToSlash(name))
	if err := sink.CheckKey(taskKey); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	out := &Manifest{Version: ManifestVersion, RunID: to, TaskType: tk.TaskType, TaskFile: taskKey, EngineFiles: m.EngineFiles,
		Files: []File{{Path: taskKey, Size: int64(len(body)), SHA256: hex.EncodeToString(sum[:])}}}
	for _, f := range m.Files {
		if f.Path != m.TaskFile && f.Path != taskKey {
			out.Files = append(out.Files, f)
		}
	}
	slices.SortFunc(out.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return store(ctx, sk, out, func(p string) ([]byte, error) {
		if p == taskKey {
			return body, nil
		}
		return sk.Get(ctx, BundlePrefix(from)+p)
	})
}
