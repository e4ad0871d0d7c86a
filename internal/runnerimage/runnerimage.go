package runnerimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus/internal/container"
)

// Target is one image `make image` builds: a stage of the Dockerfile, the
// name it is tagged with, and the command whose output is its version.
type Target struct {
	Name    string   // short name: latest, claude, codex, agents
	Stage   string   // the Dockerfile stage
	Tag     string   // the image's name
	Version []string // the command printing the version, run through the entrypoint
	// NPMPackages are the packages whose package.json pins the version
	// printed must name; none for stratus itself.
	NPMPackages []string
}

// Targets are the runner images, in build order.
var Targets = []Target{
	{Name: "latest", Stage: "runner", Tag: "stratus-runner:latest", Version: []string{"stratus", "--version"}},
	{Name: "claude", Stage: "runner-claude", Tag: "stratus-runner:claude", Version: []string{"claude", "--version"}, NPMPackages: []string{"@anthropic-ai/claude-code"}},
	{Name: "codex", Stage: "runner-codex", Tag: "stratus-runner:codex", Version: []string{"codex", "--version"}, NPMPackages: []string{"@openai/codex"}},
	{Name: "agents", Stage: "runner-agents", Tag: "stratus-runner:agents", Version: []string{"sh", "-c", "claude --version && codex --version"},
		NPMPackages: []string{"@anthropic-ai/claude-code", "@openai/codex"}},
}

// TargetByName returns the target named name (latest, claude, codex,
// agents).
func TargetByName(name string) (Target, bool) {
	for _, t := range Targets {
		if t.Name == name {
			return t, true
		}
	}
	return Target{}, false
}

const (
	// DefaultBase is the Dockerfile's BASE_IMAGE default, used when the
	// engine has it or can pull it.
	DefaultBase = "debian:bookworm-slim"
	// DebianBase is the base made from Debian packages with mmdebstrap when
	// DefaultBase cannot be had (no registry), kept for the next build.
	DebianBase = "localhost/stratus-debian:bookworm"
	// Suite is the Debian release of both.
	Suite = "bookworm"
)

// SystemCABundle is Debian's bundle of trusted certificates; the machine's
// own (a TLS-inspecting proxy's CA added) when it has one.
const SystemCABundle = "/etc/ssl/certs/ca-certificates.crt"

// Options say what Make builds and how.
type Options struct {
	Repo    string   // the module root, holding the Dockerfile
	Targets []Target // nil = all of Targets
	// Base is the BASE_IMAGE; "" = DefaultBase when the engine has it or can
	// pull it, else DebianBase (made with mmdebstrap when missing).
	Base string
	// CABundle is a PEM file on this machine that the build's downloads
	// must trust (CA_BUNDLE); "" = none.
	CABundle string
	LDFlags  string    // added to go build's -ldflags (version, commit)
	Go       string    // the go command; "" = "go"
	Out      io.Writer // progress lines
	Verbose  bool      // copy the builder's output to Out
}

// Result is one image built and checked.
type Result struct {
	Target  Target
	Version string        // the first line its version command printed
	UID     int           // the user id it runs as
	Size    int64         // bytes
	Build   time.Duration // how long its build took
}

// Make builds the targets through e and checks each (see [Check]).
func Make(ctx context.Context, e *container.Engine, o Options) ([]Result, error) {
	if o.Targets == nil {
		o.Targets = Targets
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Go == "" {
		o.Go = "go"
	}
	base, err := ensureBase(ctx, e, o)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "stratus-makeimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	arch, err := e.Arch(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	bin := filepath.Join(tmp, "stratus")
	build := exec.CommandContext(ctx, o.Go, "build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+o.LDFlags), "-o", bin, "./cmd/stratus")
	build.Dir = o.Repo
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/stratus for linux/%s: %v\n%s", arch, err, out)
	}
	fmt.Fprintf(o.Out, "== stratus for linux/%s, built on this machine (%s)\n", arch, since(start))

	extra := map[string]string{".image/stratus": bin}
	args := map[string]string{"BASE_IMAGE": base, "BUILD_IMAGE": base, "STRATUS_BINARY": ".image/stratus"}
	if o.CABundle != "" {
		extra[".image/ca.pem"] = o.CABundle
		args["CA_BUNDLE"] = ".image/ca.pem"
	}
	tarball, err := container.TarDir(o.Repo, extra)
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, t := range o.Targets {
		fmt.Fprintf(o.Out, "== build %s (target %s)\n", t.Tag, t.Stage)
		start := time.Now()
		var progress io.Writer
		if o.Verbose {
			progress = o.Out
		}
		old, err := e.ImageID(ctx, t.Tag)
		if err != nil {
			return results, err
		}
		err = e.BuildImage(ctx, container.BuildSpec{
			Context: bytes.NewReader(tarball.Bytes()), Target: t.Stage, Tag: t.Tag, Args: args, Progress: progress,
		})
		if err != nil {
			if strings.Contains(err.Error(), "certificate") {
				err = fmt.Errorf("%w\n(a download's TLS certificate was refused: behind a TLS-inspecting proxy, give the machine's CA bundle: make image IMAGE_FLAGS=\"-ca-bundle PEM\")", err)
			}
			return results, err
		}
		// The image the tag named before is left nameless: remove it (its
		// layers shared with the new one stay), so builds do not pile up. One a
		// container still uses stays.
		if now, err := e.ImageID(ctx, t.Tag); err == nil && old != "" && now != old {
			if err := e.RemoveImage(ctx, old); err != nil {
				fmt.Fprintf(o.Out, "   (the previous %s stays: %v)\n", t.Tag, firstLine(err.Error()))
			}
		}
		r, err := Check(ctx, e, o.Repo, t)
		if err != nil {
			return results, err
		}
		r.Build = time.Since(start)
		fmt.Fprintf(o.Out, "   %s: %s, uid %d, %s (%s)\n", t.Tag, r.Version, r.UID, MB(r.Size), since(start))
		results = append(results, r)
	}
	return results, nil
}

// Check runs image t.Tag twice, with no network: its version command,
// which must print the version package.json pins for each of
// t.NPMPackages, and
// `id -u`, which must not be 0. A missing image is an error wrapping
// container.ErrNoImage.
func Check(ctx context.Context, e *container.Engine, repo string, t Target) (Result, error) {
	r := Result{Target: t}
	out, err := runOnce(ctx, e, t.Tag, t.Version)
	if err != nil {
		return r, err
	}
	r.Version = strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(out), "\n", "; ")), " ")
	for _, pkg := range t.NPMPackages {
		pin, err := npmPin(repo, pkg)
		if err != nil {
			return r, err
		}
		if !strings.Contains(out, pin) {
			return r, fmt.Errorf("%s: `%s` printed %q, not package.json's %s@%s", t.Tag, strings.Join(t.Version, " "), r.Version, pkg, pin)
		}
	}
	out, err = runOnce(ctx, e, t.Tag, []string{"id", "-u"})
	if err != nil {
		return r, err
	}
	if r.UID, err = strconv.Atoi(firstLine(out)); err != nil || r.UID == 0 {
		return r, fmt.Errorf("%s runs as uid %q; the runner must not run as root", t.Tag, firstLine(out))
	}
	r.Size, err = e.ImageSize(ctx, t.Tag)
	return r, err
}

// runOnce runs cmd in a container of image through its entrypoint and
// returns its output; a non-zero exit is an error quoting it.
func runOnce(ctx context.Context, e *container.Engine, image string, cmd []string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	id, err := e.Run(ctx, container.RunSpec{Image: image, Cmd: cmd, NetworkMode: "none"})
	if err != nil {
		return "", err
	}
	defer e.Remove(context.WithoutCancel(ctx), id)
	code, err := e.Wait(ctx, id)
	if err != nil {
		return "", err
	}
	lines, err := e.Logs(ctx, id, 50)
	if err != nil {
		return "", err
	}
	out := strings.Join(lines, "\n")
	if code != 0 {
		return out, fmt.Errorf("%s: `%s` exited %d:\n%s", image, strings.Join(cmd, " "), code, out)
	}
	return out, nil
}

// npmPin is the version package.json's devDependencies pin pkg to.
func npmPin(repo, pkg string) (string, error) {
	b, err := os.ReadFile(filepath.Join(repo, "package.json"))
	if err != nil {
		return "", err
	}
	var p struct {
		Dev map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return "", fmt.Errorf("package.json: %w", err)
	}
	if p.Dev[pkg] == "" {
		return "", fmt.Errorf("package.json pins no %s in devDependencies", pkg)
	}
	return p.Dev[pkg], nil
}

// ensureBase returns the BASE_IMAGE to build from, making DebianBase with
// mmdebstrap when no other can be had.
func ensureBase(ctx context.Context, e *container.Engine, o Options) (string, error) {
	if o.Base != "" {
		if ok, err := e.ImageExists(ctx, o.Base); err != nil || ok {
			return o.Base, err
		}
		if err := e.PullImage(ctx, o.Base); err != nil {
			return "", fmt.Errorf("base image %s: not on %s and %w", o.Base, e.Host(), err)
		}
		return o.Base, nil
	}
	for _, ref := range []string{DefaultBase, DebianBase} {
		if ok, err := e.ImageExists(ctx, ref); err != nil {
			return "", err
		} else if ok {
			fmt.Fprintf(o.Out, "== base image %s (present)\n", ref)
			return ref, nil
		}
	}
	err := e.PullImage(ctx, DefaultBase)
	if err == nil {
		fmt.Fprintf(o.Out, "== base image %s (pulled)\n", DefaultBase)
		return DefaultBase, nil
	}
	fmt.Fprintf(o.Out, "== base image: %s cannot be pulled (%v); making %s from Debian packages\n", DefaultBase, firstLine(err.Error()), DebianBase)
	start := time.Now()
	if err := MakeDebianBase(ctx, e, DebianBase); err != nil {
		return "", err
	}
	fmt.Fprintf(o.Out, "   %s made with mmdebstrap (%s)\n", DebianBase, since(start))
	return DebianBase, nil
}

// ErrNoMmdebstrap is returned by [MakeDebianBase] when mmdebstrap is not
// installed.
var ErrNoMmdebstrap = errors.New("mmdebstrap not found on the PATH: apt-get install mmdebstrap, or give a base image (make image BASE_IMAGE=...) the engine has or can pull")

// slimPaths are left out of the base, as Debian's slim images leave them
// out: documentation (less copyright notices), manual pages and message
// translations. The settings stay in the image's dpkg configuration, so
// packages the Dockerfile installs leave them out too.
var slimPaths = []string{
	"path-exclude=/usr/share/doc/*",
	"path-include=/usr/share/doc/*/copyright",
	"path-exclude=/usr/share/man/*",
	"path-exclude=/usr/share/info/*",
	"path-exclude=/usr/share/locale/*",
	"path-include=/usr/share/locale/locale.alias",
	"path-exclude=/usr/share/lintian/*",
}

// MakeDebianBase makes a minimal Debian bookworm root file system with
// mmdebstrap (from the machine's Debian mirror) and imports it as ref.
func MakeDebianBase(ctx context.Context, e *container.Engine, ref string) error {
	mm, err := exec.LookPath("mmdebstrap")
	if err != nil {
		return ErrNoMmdebstrap
	}
	dir, err := os.MkdirTemp("", "stratus-rootfs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tarPath := filepath.Join(dir, "rootfs.tar")
	args := []string{"--quiet", "--variant=minbase"}
	for _, p := range slimPaths {
		args = append(args, "--dpkgopt="+p)
	}
	args = append(args, Suite, tarPath)
	cmd := exec.CommandContext(ctx, mm, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mmdebstrap %s: %v\n%s", Suite, err, out)
	}
	f, err := os.Open(tarPath)
	if err != nil {
		return err
	}
	defer f.Close()
	return e.ImportImage(ctx, f, ref)
}

// MB formats a size in bytes as megabytes (10^6, as `docker images` does).
func MB(n int64) string { return fmt.Sprintf("%d MB", (n+500_000)/1_000_000) }

func since(t time.Time) string { return time.Since(t).Round(100 * time.Millisecond).String() }

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(l)
}
