# syntax=docker/dockerfile:1
#
# The runner image: what an ECS (Fargate) worker runs (DESIGN.md § The path
# of one step, 3). Its entrypoint is `stratus runner`, which reads
# STRATUS_API_URL, STRATUS_HANDLE and STRATUS_TASK_ID from the environment
# RunTask gives it, fetches its prompt, drives the engine and submits.
#
#   docker buildx build --platform linux/arm64 -t stratus-runner .
#
# (template.yaml's WorkerCpuArchitecture, ARM64 by default, must match the
# platform built for.)
#
# The image carries Stratus and its bundled engines (echo, script). Agent
# CLIs (Claude Code, Codex, openseek) are not in it: build FROM this image
# and install the engine your config names.

ARG GO_VERSION=1.26
ARG ALPINE_VERSION=3.22

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-alpine AS build
# Set by BuildKit from --platform (the host's by default); empty with the
# classic builder, which then builds for the host, like its base images.
ARG TARGETOS
ARG TARGETARCH
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/stratus ./cmd/stratus

# alpine rather than distroless: checks and tool nodes run shell commands
# and git in the worker.
FROM alpine:${ALPINE_VERSION}
RUN apk add --no-cache ca-certificates git \
 && adduser -D -u 10001 -h /home/stratus stratus
COPY --from=build /out/stratus /usr/local/bin/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus", "runner"]
