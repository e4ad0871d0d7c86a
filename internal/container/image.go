package container

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
)

// BuildSpec is one build of a Dockerfile target.
type BuildSpec struct {
	Context    io.Reader         // a tar of the build context
	Dockerfile string            // its path inside Context; "" = "Dockerfile"
	Target     string            // the stage to build; "" = the last
	Tag        string            // the name given to the image, e.g. "stratus-runner:claude"
	Args       map[string]string // build arguments (ARG)
	// NetworkMode of the build's RUN steps; "" = "host", which needs no
	// bridge network set up on the machine.
	NetworkMode string
	// Progress receives the builder's output, line by line as it comes;
	// nil discards it (a failure's message still names the step).
	Progress io.Writer
}

// BuildImage builds spec.Target of spec.Dockerfile in spec.Context and
// names it spec.Tag. Its error carries the builder's message and the last
// lines of its output.
func (e *Engine) BuildImage(ctx context.Context, spec BuildSpec) error {
	args := make(map[string]*string, len(spec.Args))
	for k, v := range spec.Args {
		args[k] = &v
	}
	network := spec.NetworkMode
	if network == "" {
		network = "host"
	}
	res, err := e.cli.ImageBuild(ctx, spec.Context, build.ImageBuildOptions{
		Tags:        []string{spec.Tag},
		Dockerfile:  spec.Dockerfile,
		Target:      spec.Target,
		BuildArgs:   args,
		NetworkMode: network,
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return fmt.Errorf("build %s (target %q): %w", spec.Tag, spec.Target, err)
	}
	defer res.Body.Close()
	tail := &tailWriter{max: 20}
	out := io.Writer(tail)
	if spec.Progress != nil {
		out = io.MultiWriter(spec.Progress, tail)
	}
	if err := readJSONMessages(res.Body, out); err != nil {
		return fmt.Errorf("build %s (target %q): %w\n%s", spec.Tag, spec.Target, err, tail.String())
	}
	return nil
}

// jsonMessage is one object of the engine's streamed progress (build,
// pull, import).
type jsonMessage struct {
	Stream      string `json:"stream"`
	Status      string `json:"status"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// readJSONMessages copies a progress stream's text to out and returns its
// error message, if it ends with one.
func readJSONMessages(r io.Reader, out io.Writer) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonMessage
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading the engine's progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		if m.Stream != "" {
			io.WriteString(out, m.Stream)
		} else if m.Status != "" {
			io.WriteString(out, m.Status+"\n")
		}
	}
}

// tailWriter keeps the last max lines written to it.
type tailWriter struct {
	max   int
	lines []string
	part  string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	s := t.part + string(p)
	parts := strings.Split(s, "\n")
	t.part = parts[len(parts)-1]
	t.lines = append(t.lines, parts[:len(parts)-1]...)
	if over := len(t.lines) - t.max; over > 0 {
		t.lines = t.lines[over:]
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	lines := t.lines
	if t.part != "" {
		lines = append(lines[:len(lines):len(lines)], t.part)
	}
	return strings.Join(lines, "\n")
}

// ImportImage makes an image named ref (e.g.
// "localhost/stratus-debian:bookworm") whose one layer is the root file
// system tar rootfs, as `docker import` does.
func (e *Engine) ImportImage(ctx context.Context, rootfs io.Reader, ref string) error {
	rc, err := e.cli.ImageImport(ctx, image.ImportSource{Source: rootfs, SourceName: "-"}, ref, image.ImportOptions{})
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	defer rc.Close()
	if err := readJSONMessages(rc, io.Discard); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	return nil
}

// PullImage pulls ref from its registry.
func (e *Engine) PullImage(ctx context.Context, ref string) error {
	rc, err := e.cli.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	defer rc.Close()
	if err := readJSONMessages(rc, io.Discard); err != nil {
		return fmt.Errorf("pull %s: %w", ref, err)
	}
	return nil
}

// ImageExists reports whether the engine holds an image named ref.
func (e *Engine) ImageExists(ctx context.Context, ref string) (bool, error) {
	_, err := e.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return true, nil
}

// ImageSize is the size in bytes of image ref, all its layers counted, as
// `docker images` reports it.
func (e *Engine) ImageSize(ctx context.Context, ref string) (int64, error) {
	inf, err := e.cli.ImageInspect(ctx, ref)
	if err != nil {
		return 0, fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return inf.Size, nil
}

// ImageID is the id of image ref, "" when the engine has none.
func (e *Engine) ImageID(ctx context.Context, ref string) (string, error) {
	inf, err := e.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("inspect image %s: %w", ref, err)
	}
	return inf.ID, nil
}

// RemoveImage removes image ref, unless a container uses it or it has
// other names (an error then); a missing image is not an error.
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	_, err := e.cli.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	return nil
}

// TarDir returns a tar of the files under dir, as a build context: paths
// relative to dir, modes kept, owner root. Paths matching a pattern of
// dir/.dockerignore are left out; its patterns are matched with
// path.Match against the path and each of its parent directories (a
// subset of Docker's syntax: no "**" and no "!" exceptions, which are
// ignored). extra adds files: path in the tar → file on disk, replacing a
// file of the same path.
func TarDir(dir string, extra map[string]string) (*bytes.Buffer, error) {
	ignore, err := readDockerignore(filepath.Join(dir, ".dockerignore"))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if ignored(ignore, rel) || extra[rel] != "" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		return addFile(tw, p, rel)
	})
	if err != nil {
		return nil, fmt.Errorf("tar %s: %w", dir, err)
	}
	for name, src := range extra {
		if err := addFile(tw, src, name); err != nil {
			return nil, fmt.Errorf("tar %s: %w", dir, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}

// addFile writes the file, directory or symlink at src into tw as name.
func addFile(tw *tar.Writer, src, name string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return err
	}
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(src); err != nil {
			return err
		}
	} else if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil // sockets, devices: nothing a build reads
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name, h.Uid, h.Gid, h.Uname, h.Gname = name, 0, 0, "", ""
	if fi.IsDir() {
		h.Name += "/"
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}

// readDockerignore returns the patterns of a .dockerignore; none when it
// does not exist.
func readDockerignore(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pats []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "!") {
			continue
		}
		pats = append(pats, strings.Trim(path.Clean(line), "/"))
	}
	return pats, nil
}

// ignored reports whether rel or one of its parent directories matches a
// pattern.
func ignored(pats []string, rel string) bool {
	for p := rel; p != "." && p != ""; p = path.Dir(p) {
		for _, pat := range pats {
			if ok, _ := path.Match(pat, p); ok {
				return true
			}
		}
	}
	return false
}
