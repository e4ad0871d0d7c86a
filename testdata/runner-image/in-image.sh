#!/bin/sh
# Runs inside the test image (test-image.sh), as the runner's user with
# PATH alone: a run of examples/go-check whose checks node runs go test.
set -eu
[ "$(id -u)" = 10001 ] || { echo "in-image: running as uid $(id -u), want 10001" >&2; exit 1; }
[ -z "${HOME+set}" ] || { echo "in-image: HOME is set ($HOME); want PATH alone" >&2; exit 1; }
/opt/go-check/setup.sh /usr/local/bin/stratus /tmp/p
stratus run /tmp/p/task.md --dir /tmp/p
run=$(stratus runs --dir /tmp/p --json | sed -n 's/.*"run_id": *"\([^"]*\)".*/\1/p' | head -1)
stratus status "$run" --dir /tmp/p
