// Package container is Stratus's client of a container engine through the
// Docker Engine API: Docker's daemon, or podman's Docker-compatible socket
// (`podman system service`). It owns finding the engine ([Connect]), the
// image operations `make image` needs (build a Dockerfile target from a
// context tar, import a root file system tar as a base image, look an image
// up) and the life of one container run as an ECS task would be: create and
// start ([Engine.Run]), stop with a grace period, wait for the exit code,
// read the last log lines, remove (docs/runner-image.md § Building the
// images; § Running a runner image).
//
// Builds go through the classic builder endpoint (POST /build), which both
// engines serve without a BuildKit session: podman's builds only the stages
// the target needs; Docker's classic builder builds every stage before the
// target, so each stage of the Dockerfile must build with the context
// given.
//
// It does not know what a runner, a task definition or a Stratus image is
// (internal/runnerimage builds those), pull from registries behind a login,
// or manage networks and volumes.
package container
