#!/bin/sh
# examples/go-check/setup.sh BIN DIR: makes DIR a project whose flow is
# gated by `go test ./...`: a tiny Go module whose test fails until the
# change is made, the go_check flow, the script engine answering from
# scenario.yaml, and config.yaml's checks.command_sets running go test.
# `make demo-aws` runs it on the AWS stand-in.
set -eu
bin=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
"$bin" install --dir "$dir" --primary script --scenario "$here/scenario.yaml" >/dev/null
cp "$here"/module/* "$here/task.md" "$dir/"
cp -R "$here/flows/." "$dir/.stratus/flows/"
cfg="$dir/.stratus/config.yaml"
sed 's|^  timeout_seconds: 7200$|  timeout_seconds: 600\
  command_sets:\
    go:\
      commands:\
        - { name: test, argv: [go, test, ./...] }|' "$cfg" > "$cfg.new" && mv "$cfg.new" "$cfg"
grep -q 'argv: \[go, test' "$cfg" || { echo "setup.sh: config.yaml has no checks block to extend" >&2; exit 1; }
git -C "$dir" init -q -b main
git -C "$dir" add -A
git -C "$dir" -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run"
