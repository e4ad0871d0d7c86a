package devstack

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/devstack/fargate"
)

// OfflineNetwork is the container network of the offline network profile
// (a node with network_access false): internal, so its containers reach
// the host's address on it — where the worker API listens — and no other
// network.
const OfflineNetwork = "stratus-dev-offline"

// LabelStack labels every container the stand-in starts with its stack's
// name: a later start of the same stack removes what a killed one left.
const LabelStack = "stratus.stack"

// labelPID labels the pause container with the pid of the dev aws that
// serves its stack.
const labelPID = "stratus.pid"

// ContainerRunners is what the Fargate stand-in's containers need on a
// container engine: OfflineNetwork, and a pause container on it that keeps
// its bridge, and so the host's address on it, up while the stand-in
// serves (as the pause container of an awsvpc task holds its network).
type ContainerRunners struct {
	Engine *container.Engine
	// Gateway is the host's address on OfflineNetwork: the worker API
	// listens there, reachable from both profiles' containers and from
	// this machine.
	Gateway string
	stack   string
	pause   string
	closers []func() error
}

// StartContainerRunners makes OfflineNetwork (once per engine) and the
// pause container of stack, from image (the runner image: it has
// `sleep`). Errors: the engine's; a missing image names `make image`.
func StartContainerRunners(ctx context.Context, e *container.Engine, image, stack string) (*ContainerRunners, error) {
	gw, err := e.EnsureNetwork(ctx, OfflineNetwork, true)
	if err != nil {
		return nil, err
	}
	// What a dev aws of the same stack left when it was killed goes
	// first; one still serving it is not disturbed.
	left, err := e.List(ctx, LabelStack, stack)
	if err != nil {
		return nil, err
	}
	for _, c := range left {
		if pid, _ := strconv.Atoi(c.Labels[labelPID]); c.Running && pid > 0 && pid != os.Getpid() && syscall.Kill(pid, 0) == nil {
			return nil, fmt.Errorf("the stack %s is served by another stratus dev aws (pid %d, its container %s): stop it first, or name another stack (--name)", stack, pid, c.Name)
		}
	}
	for _, c := range left {
		if err := e.Remove(ctx, c.ID); err != nil {
			return nil, err
		}
	}
	pause := "stratus-dev-pause-" + stack
	id, err := e.Run(ctx, container.RunSpec{Image: image, Entrypoint: []string{"sleep"}, Cmd: []string{"infinity"},
		NetworkMode: OfflineNetwork, Name: pause, Labels: map[string]string{LabelStack: stack, labelPID: strconv.Itoa(os.Getpid())}})
	if err != nil {
		return nil, fmt.Errorf("the offline network's pause container: %w", err)
	}
	return &ContainerRunners{Engine: e, Gateway: gw, stack: stack, pause: id}, nil
}

// Backend is the Fargate stand-in's backend: each task a container of its
// task definition's image, offline on OfflineNetwork, online on the
// engine's default network, trusting ca: its bundle (this machine's CAs
// and the stack's) bound over the image's Debian bundle file, which Go,
// OpenSSL, Python and curl read.
func (r *ContainerRunners) Backend(ca *CA) *fargate.ContainerBackend {
	return &fargate.ContainerBackend{Engine: r.Engine, Offline: OfflineNetwork,
		Mounts: []container.Mount{{Source: ca.BundleFile, Target: "/etc/ssl/certs/ca-certificates.crt", ReadOnly: true}},
		Labels: map[string]string{LabelStack: r.stack}}
}

// Close stops the forwards and removes the pause container. Errors: the
// engine's (the container is then left: a later start of the stack
// removes it).
func (r *ContainerRunners) Close() error {
	for _, c := range r.closers {
		c()
	}
	return r.Engine.Remove(context.Background(), r.pause)
}

// Forward serves, on the stand-in's address on the containers' network,
// a TCP forward to the server at endpoint (an http://127.0.0.1:PORT URL:
// moto), until ctx ends or Close; it returns the URL that reaches it from
// the containers and from this machine. Errors: endpoint is not such a
// URL, or no port could be bound.
func (r *ContainerRunners) Forward(ctx context.Context, endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("forward %q: not a URL with a host", endpoint)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(r.Gateway, "0"))
	if err != nil {
		return "", fmt.Errorf("forward %s: %w", endpoint, err)
	}
	r.closers = append(r.closers, ln.Close)
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				go func() { io.Copy(c, up); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return u.Scheme + "://" + ln.Addr().String(), nil
}

// Anchor is the physical floor of a task's start: the median, over
// rounds, of creating a container of image on the offline network whose
// program is `true`, starting it and seeing it exit (the runner's own
// start-up and its first call of the worker API come on top). Errors: the
// engine's.
func (r *ContainerRunners) Anchor(ctx context.Context, image string, rounds int) (time.Duration, error) {
	var took []time.Duration
	for range max(rounds, 1) {
		t0 := time.Now()
		id, err := r.Engine.Run(ctx, container.RunSpec{Image: image, Entrypoint: []string{"true"}, NetworkMode: OfflineNetwork,
			Labels: map[string]string{LabelStack: r.stack}})
		if err != nil {
			return 0, err
		}
		_, err = r.Engine.Wait(ctx, id)
		took = append(took, time.Since(t0))
		r.Engine.Remove(context.WithoutCancel(ctx), id)
		if err != nil {
			return 0, err
		}
	}
	slices.Sort(took)
	return took[len(took)/2], nil
}
