package container

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
)

// EnsureNetwork makes the bridge network name unless it exists, internal
// (no route out of it: its containers reach the host's address on it and
// each other, nothing beyond) when internal is true, and returns the
// host's address on it (its gateway), where a container of it reaches a
// server of this machine. A network that exists is used as it is.
// Errors: the engine's.
func (e *Engine) EnsureNetwork(ctx context.Context, name string, internal bool) (gateway string, err error) {
	n, err := e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	if cerrdefs.IsNotFound(err) {
		if _, err = e.cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: internal}); err != nil {
			return "", fmt.Errorf("create network %s: %w", name, err)
		}
		n, err = e.cli.NetworkInspect(ctx, name, network.InspectOptions{})
	}
	if err != nil {
		return "", fmt.Errorf("inspect network %s: %w", name, err)
	}
	for _, c := range n.IPAM.Config {
		if c.Gateway != "" {
			return c.Gateway, nil
		}
	}
	return "", fmt.Errorf("network %s has no gateway address", name)
}
