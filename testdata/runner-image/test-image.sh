#!/bin/sh
# testdata/runner-image/test-image.sh BIN SCRATCH: builds a runner image
# with a Go toolchain with podman, from Debian packages (no registry), and
# runs a run whose checks node runs `go test ./...` (examples/go-check)
# inside it, as the runner's user (uid 10001), with PATH alone in the
# environment, as an ECS task may have (docs/runner-image.md § Checked).
# `make test-image` runs it; `make test` never does. Needs podman, runc and
# mmdebstrap (apt-get install podman runc mmdebstrap) and Debian's mirror.
# podman's storage is SCRATCH's own: nothing of the machine's images is
# touched.
set -eu
bin=$1 scratch=$2
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
for tool in podman runc mmdebstrap; do
  command -v "$tool" >/dev/null 2>&1 || { echo "test-image: $tool not found: apt-get install podman runc mmdebstrap" >&2; exit 1; }
done
mkdir -p "$scratch"
scratch=$(cd "$scratch" && pwd)
# podman here runs containers only with runc, cgroupfs and no default
# ulimits (docs/architecture.md § Testing stand-ins).
cat > "$scratch/containers.conf" <<'CONF'
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
[containers]
default_ulimits = []
CONF
export CONTAINERS_CONF="$scratch/containers.conf"
pm() { podman --root "$scratch/storage" --runroot "$scratch/run" --storage-driver vfs "$@"; }

start=$(date +%s)
if ! pm image exists localhost/stratus-test-base:latest; then
  echo "== test-image: the base (mmdebstrap bookworm: git, ca-certificates, golang-go)"
  rm -f "$scratch/base.tar"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,git,golang-go,passwd bookworm "$scratch/base.tar"
  pm import --quiet "$scratch/base.tar" localhost/stratus-test-base:latest >/dev/null
  rm -f "$scratch/base.tar"
fi
based=$(date +%s)
echo "== test-image: the runner image (Containerfile: user 10001, HOME, stratus)"
ctx="$scratch/context"
rm -rf "$ctx" && mkdir -p "$ctx"
cp "$here/Containerfile" "$here/in-image.sh" "$bin" "$ctx/"
[ "$(basename "$bin")" = stratus ] || mv "$ctx/$(basename "$bin")" "$ctx/stratus"
cp -R "$repo/examples/go-check" "$ctx/go-check"
pm build --quiet --network host -t localhost/stratus-runner-test:go "$ctx" >/dev/null
built=$(date +%s)
echo "== test-image: a go test check inside it, as uid 10001 with PATH alone"
pm run --rm --network host --entrypoint /usr/bin/env localhost/stratus-runner-test:go -i PATH=/usr/local/bin:/usr/bin:/bin sh /opt/in-image.sh \
  > "$scratch/run.log" 2>&1 || { cat "$scratch/run.log"; echo "test-image: FAIL: the run in the image did not end done" >&2; exit 1; }
ran=$(date +%s)
grep -E 'testing#1 +testing +pass .*1 check passed' "$scratch/run.log" || { cat "$scratch/run.log"; echo "test-image: FAIL: the go test check did not pass" >&2; exit 1; }
echo "test-image: ok: base $((based - start)) s, image $((built - based)) s, run $((ran - built)) s"
