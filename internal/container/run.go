package container

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
)

// ErrNoImage is returned (wrapped, naming the image) by [Engine.Run] when
// the engine holds no image of that name.
var ErrNoImage = errors.New("image not found")

// Mount is a file or directory of the host bound into a container.
type Mount struct {
	Source   string // absolute path on the host
	Target   string // absolute path in the container
	ReadOnly bool
}

// RunSpec is one container to run. Only Image is required; the container
// gets the image's entrypoint, command, user and working directory where
// the spec leaves them empty, and exactly Env on top of the image's own
// environment.
type RunSpec struct {
	Image      string
	Cmd        []string // the arguments to the entrypoint
	Entrypoint []string // replaces the image's when non-empty
	Env        []string // NAME=value
	User       string   // "uid[:gid]" or a name; "" = the image's
	// NetworkMode: "host", "none", "bridge" or a network's name; "" = the
	// engine's default.
	NetworkMode string
	ExtraHosts  []string // "name:ip" lines for the container's /etc/hosts
	Labels      map[string]string
	Name        string // "" = the engine picks one
	Mounts      []Mount
}

// Run creates and starts a container of spec and returns its id. A missing
// image is an error wrapping [ErrNoImage] that names `make image`. The
// container stays after it exits (for [Engine.Wait] and [Engine.Logs])
// until [Engine.Remove].
func (e *Engine) Run(ctx context.Context, spec RunSpec) (string, error) {
	if ok, err := e.ImageExists(ctx, spec.Image); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("run %s: %w in %s: build the runner images with `make image` (docs/runner-image.md § Building the images)", spec.Image, ErrNoImage, e.host)
	}
	cfg := &container.Config{
		Image:  spec.Image,
		Cmd:    spec.Cmd,
		Env:    spec.Env,
		User:   spec.User,
		Labels: spec.Labels,
	}
	if len(spec.Entrypoint) > 0 {
		cfg.Entrypoint = spec.Entrypoint
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(spec.NetworkMode),
		ExtraHosts:  spec.ExtraHosts,
	}
	for _, m := range spec.Mounts {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	created, err := e.cli.ContainerCreate(ctx, cfg, host, nil, nil, spec.Name)
	if err != nil {
		return "", fmt.Errorf("create a container of %s: %w", spec.Image, err)
	}
	if err := e.cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		// Leave nothing behind that never ran.
		_ = e.cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true})
		return "", fmt.Errorf("start a container of %s: %w", spec.Image, err)
	}
	return created.ID, nil
}

// Stop sends the container its stop signal (SIGTERM unless the image says
// otherwise) and, when it has not exited after grace, kills it. Stopping a
// container that has already exited is not an error.
func (e *Engine) Stop(ctx context.Context, id string, grace time.Duration) error {
	secs := int((grace + time.Second - 1) / time.Second)
	if err := e.cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil {
		return fmt.Errorf("stop container %s: %w", shortID(id), err)
	}
	return nil
}

// Wait blocks until the container exits, and returns its exit code (128+N
// for a container ended by signal N, as the engines report it).
func (e *Engine) Wait(ctx context.Context, id string) (int, error) {
	resC, errC := e.cli.ContainerWait(ctx, id, container.WaitConditionNotRunning)
	select {
	case res := <-resC:
		if res.Error != nil && res.Error.Message != "" {
			return int(res.StatusCode), fmt.Errorf("wait for container %s: %s", shortID(id), res.Error.Message)
		}
		return int(res.StatusCode), nil
	case err := <-errC:
		return 0, fmt.Errorf("wait for container %s: %w", shortID(id), err)
	}
}

// ExitCode is the container's exit code and whether it has exited (false
// while it runs, or before it started).
func (e *Engine) ExitCode(ctx context.Context, id string) (code int, exited bool, err error) {
	inf, err := e.cli.ContainerInspect(ctx, id)
	if err != nil {
		return 0, false, fmt.Errorf("inspect container %s: %w", shortID(id), err)
	}
	if inf.State == nil || inf.State.Running || inf.State.Status == "created" {
		return 0, false, nil
	}
	return inf.State.ExitCode, true, nil
}

// Logs returns the last lastN lines the container wrote, stdout and stderr
// together (each stream's lines in order); lastN <= 0 returns them all.
func (e *Engine) Logs(ctx context.Context, id string, lastN int) ([]string, error) {
	tail := "all"
	if lastN > 0 {
		tail = fmt.Sprint(lastN)
	}
	rc, err := e.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: tail})
	if err != nil {
		return nil, fmt.Errorf("logs of container %s: %w", shortID(id), err)
	}
	defer rc.Close()
	// Without a TTY the engine multiplexes both streams into one; a line
	// written whole arrives in one frame, so one buffer keeps their order.
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		return nil, fmt.Errorf("logs of container %s: %w", shortID(id), err)
	}
	s := strings.TrimRight(out.String(), "\n")
	if s == "" {
		return nil, nil
	}
	lines := strings.Split(s, "\n")
	if lastN > 0 && len(lines) > lastN {
		lines = lines[len(lines)-lastN:]
	}
	return lines, nil
}

// Remove removes the container, killing it first if it still runs. A
// container already gone is not an error.
func (e *Engine) Remove(ctx context.Context, id string) error {
	err := e.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove container %s: %w", shortID(id), err)
	}
	return nil
}

// shortID is the 12-character form engines print.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Listed is a container as List gives it.
type Listed struct {
	ID      string
	Name    string // without the leading "/"
	Labels  map[string]string
	Running bool
}

// List returns the containers, running or not, that carry the label
// key=value. Errors: the engine's.
func (e *Engine) List(ctx context.Context, key, value string) ([]Listed, error) {
	cs, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", key+"="+value))})
	if err != nil {
		return nil, fmt.Errorf("list the containers labelled %s=%s: %w", key, value, err)
	}
	var out []Listed
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		out = append(out, Listed{ID: c.ID, Name: name, Labels: c.Labels, Running: c.State == "running"})
	}
	return out, nil
}
