// Package runnerimage makes the runner images a Fargate task runs: the
// Dockerfile's targets runner (stratus-runner:latest), runner-claude
// (stratus-runner:claude), runner-codex (stratus-runner:codex) and
// runner-agents (stratus-runner:agents, both CLIs), built
// through the Docker Engine API of Docker or podman (internal/container),
// then checked: each runs as a non-root user and prints its CLI's version
// (docs/runner-image.md § Building the images). `make image` runs it
// through cmd/makeimage.
//
// With no registry reachable (this project's machines), the Debian base
// image is made from Debian packages with mmdebstrap and imported under
// the name given to the Dockerfile's BASE_IMAGE argument; stratus itself
// is cross-compiled on the host and handed to the build (STRATUS_BINARY,
// with BUILD_IMAGE the base), which then needs no Go image. A CA bundle given reaches the
// build's downloads (npm) and no image.
//
// It does not push images to a registry (`docker push` to ECR does, see
// docs/runner-image.md), build the runner-go target, or run a task: that
// is dev aws's business, through internal/container.
package runnerimage
