# syntax=docker/dockerfile:1
#
# The runner image: what an ECS (Fargate) worker runs (docs/architecture.md § The
# path of one step, 4-5). Its entrypoint, stratus-runner-entrypoint, runs
# `stratus runner ARGS` (which reads STRATUS_API_URL, STRATUS_HANDLE and
# STRATUS_TASK_ID from the environment RunTask gives it, fetches its prompt,
# drives the engine and submits), or the program named by the first
# argument when that is one on the PATH:
#
#   docker run --rm stratus-runner:codex codex --version
#
# `make image` builds the four targets below through the Docker Engine API
# (Docker, or podman's Docker-compatible socket), from Debian packages when
# no registry is reachable (docs/runner-image.md § Building the images).
# With Docker and a registry, directly:
#
#   docker buildx build --platform linux/arm64 -t stratus-runner .
#   docker buildx build --platform linux/arm64 --target runner-claude -t stratus-runner:claude .
#   docker buildx build --platform linux/arm64 --target runner-codex -t stratus-runner:codex .
#   docker buildx build --platform linux/arm64 --target runner-agents -t stratus-runner:agents .
#
# (template.yaml's WorkerCpuArchitecture, ARM64 by default, must match the
# platform built for.)
#
# The default image carries Stratus and its bundled engines (echo, script),
# git and a shell; runner-claude and runner-codex add the Claude Code and
# Codex CLIs at the versions package.json pins (the versions the tests run),
# runner-agents both (for a flow whose nodes name both providers);
# for openseek, build FROM this image and install it. The runner-go target
# adds a Go toolchain for a project's checks (`go test`): the recipe to
# follow for Node or Python is in docs/runner-image.md § Adding a toolchain.
#
# Build arguments:
#   BASE_IMAGE     the Debian bookworm image every runner is FROM. `make
#                  image` makes one with mmdebstrap when the default cannot
#                  be pulled.
#   GO_IMAGE       the Go toolchain image: runner-go's toolchain.
#   BUILD_IMAGE    the image stratus is compiled in (the same Go image by
#                  default); with STRATUS_BINARY any image with a shell
#                  (`make image` passes BASE_IMAGE: no Go image needed).
#   STRATUS_BINARY a linux stratus binary in the build context to use
#                  instead of compiling one (`make image` cross-compiles it
#                  on the host); empty by default.
#   CA_BUNDLE      a PEM file in the build context that downloads made during
#                  the build (Go modules, npm) must trust beside the system's
#                  roots: the bundle of a machine behind a TLS-inspecting
#                  proxy. Empty by default; it reaches no runner image.
#   NPM_REGISTRY   where Node.js, npm and the agent CLIs come from.

ARG BASE_IMAGE=debian:bookworm-slim
ARG GO_IMAGE=golang:1.26-bookworm
ARG BUILD_IMAGE=golang:1.26-bookworm

# The stratus binary: compiled for the target platform, or STRATUS_BINARY.
# One stage either way rather than one stage per way chosen by an argument:
# builders that skip the stages a target does not need (BuildKit, buildah)
# do not all resolve a stage named through an argument's default.
FROM --platform=$BUILDPLATFORM ${BUILD_IMAGE} AS build
# Set by BuildKit from --platform (the host's by default); empty with a
# builder that does not set them, which then builds for the host.
ARG TARGETOS
ARG TARGETARCH
ARG CA_BUNDLE=
ARG STRATUS_BINARY=
WORKDIR /src
COPY go.mod go.sum ${CA_BUNDLE} ./
# go.mod replaces a module with its copy here.
COPY third_party ./third_party
RUN if [ -z "$STRATUS_BINARY" ]; then \
      if [ -n "$CA_BUNDLE" ]; then export SSL_CERT_FILE="/src/$(basename "$CA_BUNDLE")"; fi; \
      go mod download; \
    fi
COPY . .
RUN mkdir -p /out && if [ -n "$STRATUS_BINARY" ]; then cp "$STRATUS_BINARY" /out/stratus; else \
      CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
      go build -trimpath -ldflags="-s -w" -o /out/stratus ./cmd/stratus; \
    fi

# Debian rather than distroless: checks and tool nodes run shell commands and
# git in the worker (git also checks the run's workspace out); glibc, for
# the agent CLIs' native binaries.
FROM ${BASE_IMAGE} AS runner-os
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 stratus \
 && useradd --uid 10001 --gid 10001 --create-home --home-dir /home/stratus --shell /bin/sh stratus

# Node.js 22 and npm for installing the agent CLIs, from the npm registry
# (the node-linux-<arch> package is Node's official build): a build stage
# only, so the CA bundle stays out of every runner image.
FROM ${BASE_IMAGE} AS node-tools
ARG NPM_REGISTRY=https://registry.npmjs.org
ARG NODE_VERSION=22.23.5
ARG NPM_VERSION=10.9.9
ARG CA_BUNDLE=
COPY package.json ${CA_BUNDLE} /tmp/build/
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ca-certificates curl \
 && if [ -n "$CA_BUNDLE" ]; then cat "/tmp/build/$(basename "$CA_BUNDLE")" >> /etc/ssl/certs/ca-certificates.crt; fi \
 && arch=$(dpkg --print-architecture) && if [ "$arch" = amd64 ]; then arch=x64; fi \
 && mkdir -p /opt/node /opt/npm \
 && curl -fsSL "$NPM_REGISTRY/node-linux-$arch/-/node-linux-$arch-$NODE_VERSION.tgz" \
    | tar -xz -C /opt/node --strip-components=1 package/bin/node \
 && curl -fsSL "$NPM_REGISTRY/npm/-/npm-$NPM_VERSION.tgz" | tar -xz -C /opt/npm --strip-components=1 \
 && ln -s /opt/node/bin/node /usr/local/bin/node \
 && ln -s /opt/npm/bin/npm-cli.js /usr/local/bin/npm \
 && npm config set --global registry "$NPM_REGISTRY" \
 && node --version && npm --version
ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt

# The Claude Code CLI at package.json's pin. Its package installs a native
# binary for the platform (node runs only its install script): the runner
# keeps that binary alone, with ripgrep.
FROM node-tools AS claude-install
RUN pin=$(node -p 'require("/tmp/build/package.json").devDependencies["@anthropic-ai/claude-code"]') \
 && npm install -g --prefix /opt/claude --no-audit --no-fund "@anthropic-ai/claude-code@$pin" \
 && mkdir -p /out && cp -L /opt/claude/bin/claude /out/claude \
 && /out/claude --version

FROM runner-os AS claude-os
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ripgrep \
 && rm -rf /var/lib/apt/lists/*
COPY --from=claude-install /out/claude /usr/local/bin/claude

# The Codex CLI at package.json's pin: a node launcher (on Debian's nodejs)
# and the native binary of the platform.
FROM node-tools AS codex-install
RUN pin=$(node -p 'require("/tmp/build/package.json").devDependencies["@openai/codex"]') \
 && npm install -g --prefix /opt/codex --no-audit --no-fund "@openai/codex@$pin" \
 && /opt/codex/bin/codex --version

FROM runner-os AS codex-os
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs \
 && rm -rf /var/lib/apt/lists/*
COPY --from=codex-install /opt/codex /opt/codex
RUN ln -s /opt/codex/bin/codex /usr/local/bin/codex

# Both CLIs, for the runner of a flow whose nodes name more than one
# provider: one task definition (template.yaml ImageUri) runs every node.
FROM claude-os AS agents-os
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs \
 && rm -rf /var/lib/apt/lists/*
COPY --from=codex-install /opt/codex /opt/codex
RUN ln -s /opt/codex/bin/codex /usr/local/bin/codex

# The runners. Each ends with the same lines (a Dockerfile has no include; a
# test holds them equal): stratus goes in last, so a new stratus rebuilds
# one small layer and reuses the CLIs' layers above.
FROM runner-os AS runner-base
COPY --from=build /out/stratus /usr/local/bin/stratus
COPY image/stratus-runner-entrypoint /usr/local/bin/stratus-runner-entrypoint
# The writable HOME checks and tools get, and their caches under it
# (docs/runner-image.md § The environment of checks and tools).
ENV HOME=/home/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus-runner-entrypoint"]

# The runner with an agent CLI:
#
#   docker buildx build --platform linux/arm64 --target runner-claude -t stratus-runner:claude .
#   docker buildx build --platform linux/arm64 --target runner-codex -t stratus-runner:codex .
#
# The provider's key comes from the task definition's secrets
# (template.yaml: AnthropicApiKeySecretArn, OpenAIApiKeySecretArn), never
# from the image.
FROM claude-os AS runner-claude
COPY --from=build /out/stratus /usr/local/bin/stratus
COPY image/stratus-runner-entrypoint /usr/local/bin/stratus-runner-entrypoint
ENV HOME=/home/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus-runner-entrypoint"]

FROM codex-os AS runner-codex
COPY --from=build /out/stratus /usr/local/bin/stratus
COPY image/stratus-runner-entrypoint /usr/local/bin/stratus-runner-entrypoint
ENV HOME=/home/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus-runner-entrypoint"]

# The runner with every agent CLI (Claude Code and Codex):
#
#   docker buildx build --platform linux/arm64 --target runner-agents -t stratus-runner:agents .
FROM agents-os AS runner-agents
COPY --from=build /out/stratus /usr/local/bin/stratus
COPY image/stratus-runner-entrypoint /usr/local/bin/stratus-runner-entrypoint
ENV HOME=/home/stratus
USER 10001:10001
WORKDIR /home/stratus
ENTRYPOINT ["/usr/local/bin/stratus-runner-entrypoint"]

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
FROM ${GO_IMAGE} AS go-toolchain

FROM runner-base AS runner-go
USER root
COPY --from=go-toolchain /usr/local/go /usr/local/go
RUN ln -s /usr/local/go/bin/go /usr/local/go/bin/gofmt /usr/local/bin/
USER 10001:10001

# The default target (no --target): the runner with the bundled engines.
FROM runner-base AS runner
