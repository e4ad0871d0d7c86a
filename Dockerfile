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
# The default image carries Stratus and its bundled engines (echo,
# script); the runner-claude and runner-codex targets add the Claude Code
# and Codex CLIs; for openseek, build FROM this image and install it. The
# runner-go target adds a Go toolchain for a project's checks (`go test`):
# the recipe to follow for Node or Python is in docs/runner-image.md §
# Adding a toolchain.

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
# and git in the worker (git also checks the run's workspace out).
FROM alpine:${ALPINE_VERSION} AS runner-base
RUN apk add --no-cache ca-certificates git \
 && adduser -D -u 10001 -h /home/stratus stratus
COPY --from=build /out/stratus /usr/local/bin/stratus
# The writable HOME checks and tools get, and their caches under it
# (docs/runner-image.md § The environment of checks and tools).
ENV HOME=/home/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus", "runner"]

# The runner with an agent CLI, at the versions package.json pins and the
# tests run (issue 13 § 7):
#
#   docker buildx build --platform linux/arm64 --target runner-claude -t stratus-runner:claude .
#   docker buildx build --platform linux/arm64 --target runner-codex -t stratus-runner:codex .
#
# The provider's key comes from the task definition's secrets
# (template.yaml: AnthropicApiKeySecretArn, OpenAIApiKeySecretArn), never
# from the image.
FROM runner-base AS runner-claude
USER root
RUN apk add --no-cache nodejs npm ripgrep \
 && npm install -g --no-audit --no-fund @anthropic-ai/claude-code@2.1.328 \
 && npm cache clean --force
USER 10001:10001

FROM runner-base AS runner-codex
USER root
RUN apk add --no-cache nodejs npm \
 && npm install -g --no-audit --no-fund @openai/codex@0.169.0 \
 && npm cache clean --force
USER 10001:10001

# The runner with a Go toolchain, for checks such as `go test ./...`
# (docs/runner-image.md § Adding a toolchain):
#
#   docker buildx build --platform linux/arm64 --target runner-go -t stratus-runner:go .
#
# The toolchain is the official one, for the platform built for; its
# binaries are linked into /usr/local/bin, on the PATH every check gets.
# Its caches go under HOME (the build cache in $HOME/.cache/go-build, the
# module cache in $HOME/go). A check on a node without network_access
# cannot download modules: vendor them, or run it on an online node with
# its own image (template.yaml NetworkImageUri).
FROM golang:${GO_VERSION}-alpine AS go-toolchain

FROM runner-base AS runner-go
USER root
COPY --from=go-toolchain /usr/local/go /usr/local/go
RUN ln -s /usr/local/go/bin/go /usr/local/go/bin/gofmt /usr/local/bin/
USER 10001:10001

# The default target (no --target): the runner with the bundled engines.
FROM runner-base AS runner
