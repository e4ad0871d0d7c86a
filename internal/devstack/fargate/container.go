package fargate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratusflow/stratus/internal/container"
)

// ContainerBackend runs a task as a container of its task definition's
// image on a container engine (Docker, or podman's Docker-compatible
// service): a fresh container file system, the task's environment and
// nothing else of the operator's, the image's own user and entrypoint
// unless the task definition names them, as Fargate runs it.
//
// Network: a task of the offline profile (Container.Networked false) is on
// Offline, a network with no route out (an internal network), from which
// APIHost reaches the worker API and nothing else; a networked task is on
// Online (the engine's default bridge when empty). APIHost, when set, is
// an "name:ip" line added to each container's /etc/hosts, so the worker
// API's URL names the same host inside the container as outside.
type ContainerBackend struct {
	Engine *container.Engine
	// Offline and Online are the network modes of the two profiles ("" =
	// the engine's default).
	Offline, Online string
	// ExtraHosts are "name:ip" lines for each container's /etc/hosts.
	ExtraHosts []string
	// Mounts are bound into every container (read-only files: the stack's
	// CA certificate, so the runner trusts the worker API's TLS).
	Mounts []container.Mount
	// Labels mark the containers as the stand-in's (its stack name), so a
	// later start can remove what a killed one left.
	Labels map[string]string
}

// Name is "container".
func (b *ContainerBackend) Name() string { return "container" }

// Start creates and starts c's container. Errors: the image is missing
// (wrapping container.ErrNoImage, naming `make image`), or the engine
// refused the container; ECS reports them as CannotPullContainerError and
// CannotStartContainerError.
func (b *ContainerBackend) Start(ctx context.Context, c Container) (Running, error) {
	network := b.Offline
	if c.Networked {
		network = b.Online
	}
	labels := map[string]string{"stratus.task-arn": c.TaskARN, "stratus.family": c.Family}
	for k, v := range b.Labels {
		labels[k] = v
	}
	spec := container.RunSpec{Image: c.Image, Cmd: c.Command, Env: c.Env, User: c.User, NetworkMode: network,
		ExtraHosts: b.ExtraHosts, Labels: labels, Name: "stratus-task-" + c.TaskID, Mounts: b.Mounts}
	id, err := b.Engine.Run(ctx, spec)
	if err != nil {
		if errors.Is(err, container.ErrNoImage) {
			return nil, fmt.Errorf("CannotPullContainerError: %w", err)
		}
		return nil, fmt.Errorf("CannotStartContainerError: %w", err)
	}
	r := &containerTask{e: b.Engine, id: id, image: c.Image, done: make(chan struct{}), code: -1}
	go r.wait()
	return r, nil
}

type containerTask struct {
	e     *container.Engine
	id    string
	image string
	done  chan struct{}

	mu    sync.Mutex
	code  int
	lines []string
}

// wait records the exit code and the last lines, then removes the
// container (nothing the task started outlives it).
func (r *containerTask) wait() {
	ctx := context.Background()
	code, err := r.e.Wait(ctx, r.id)
	lines, _ := r.e.Logs(ctx, r.id, 50)
	r.mu.Lock()
	if err == nil {
		r.code = code
	}
	r.lines = lines
	r.mu.Unlock()
	r.e.Remove(ctx, r.id)
	close(r.done)
}

func (r *containerTask) Stop(grace time.Duration) {
	go r.e.Stop(context.Background(), r.id, grace)
}

func (r *containerTask) Done() <-chan struct{} { return r.done }

func (r *containerTask) ExitCode() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.code
}

func (r *containerTask) LastLines(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return lastOf(r.lines, n)
}

func (r *containerTask) Where() string {
	id := r.id
	if len(id) > 12 {
		id = id[:12]
	}
	return "container " + id + " of " + r.image
}
