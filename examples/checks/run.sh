#!/bin/sh
# run.sh DIR [STRATUS]: the checked flow (flows/checked.yaml) on a small Go
# project whose test fails, with the script engine answering from
# scenario.yaml: implementation, tests (go test ./..., fail), fixing, tests
# (pass), publish. Run it from the root of the repository after `make build`:
#
#   examples/checks/run.sh .scratch/checks
#
# To use it on your own project, copy flows/ into DIR/.stratus/flows/, the
# checks: block of checks.yaml into DIR/.stratus/config.yaml, and run a task
# with task_type: checked on a real engine.
set -eu
dir=${1:?usage: $0 DIR [STRATUS]}
stratus=${2:-bin/stratus}
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir" && mkdir -p "$dir"
cp -R "$here/project/." "$dir/"
"$stratus" install --dir "$dir" --primary script --scenario "$here/scenario.yaml" >/dev/null
cp -R "$here/flows/." "$dir/.stratus/flows/"
# config.yaml: the checks: block of checks.yaml replaces the installed one,
# and the Go toolchain's variables reach the checks (allowed_environment).
cfg="$dir/.stratus/config.yaml"
awk -v block="$here/checks.yaml" '
  /^checks:/ { while ((getline l < block) > 0) if (l !~ /^#/) print l; skip = 1; next }
  skip && /^[^ ]/ { skip = 0 }
  skip { next }
  { print }
  /^  allowed_environment:/ { print "  - GOCACHE\n  - GOMODCACHE\n  - GOPATH\n  - GOFLAGS\n  - GOTOOLCHAIN" }
' "$cfg" > "$cfg.new" && mv "$cfg.new" "$cfg" && chmod 600 "$cfg"
cp "$here/task.md" "$dir/task.md"
# A git repository, as a real project is: the checks select their command
# sets by the paths the change touches.
git -C "$dir" init -q
git -C "$dir" add go.mod greet
git -C "$dir" -c user.name=example -c user.email=example@example.invalid commit -qm "the project before the run"
"$stratus" validate checked --dir "$dir"
"$stratus" run "$dir/task.md" --dir "$dir"
