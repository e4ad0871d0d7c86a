#!/usr/bin/env bash
# demo-aws-cli.sh claude|codex|agents DIR STRATUS: the example task through
# the built-in implementation flow on `stratus dev aws`, every step a
# container of the runner image with the real Claude Code or Codex CLI in it
# (stratus-runner:claude or :codex, make image) — or, with agents, both CLIs
# in stratus-runner:agents, Claude Code running every node but review, which
# the task pins to Codex: one image for a flow that names both providers —
# against the scripted model
# server (stratus engine modelserver --script examples/modelserver.yaml) on
# the stand-in's address on the containers' network. The provider key
# reaches each container as a deployed stack delivers it: a Secrets Manager
# secret the task definition names (dev aws makes it from the key set in
# its environment). `make demo-aws-claude` and `make demo-aws-codex` run it.
set -euo pipefail
cli=$1 dir=$2 stratus=$3
case "$cli" in claude|codex|agents) ;; *) echo "usage: $0 claude|codex|agents DIR STRATUS" >&2; exit 2;; esac
image=stratus-runner:$cli
rm -rf "$dir" && mkdir -p "$dir"

# The keys the task definition's secrets hold: the scripted server takes any.
keys=()
case "$cli" in
  claude) keys=(ANTHROPIC_API_KEY=sk-scripted-claude) ;;
  codex) keys=(OPENAI_API_KEY=sk-scripted-codex) ;;
  agents) keys=(ANTHROPIC_API_KEY=sk-scripted-claude OPENAI_API_KEY=sk-scripted-codex) ;;
esac
env "${keys[@]}" "$stratus" dev aws --image "$image" > "$dir/dev.out" 2> "$dir/dev.log" &
devaws=$!
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  kill -INT "$devaws" 2>/dev/null && wait "$devaws" 2>/dev/null
  return 0
}
trap cleanup EXIT
for _ in $(seq 1 600); do [ -s "$dir/dev.out" ] && break; kill -0 "$devaws" 2>/dev/null || break; sleep 0.2; done
flags="$(head -1 "$dir/dev.out" 2>/dev/null) --poll-interval 500ms"
case "$flags" in --target*) ;; *) echo "stratus dev aws did not start:"; cat "$dir/dev.log"; exit 1;; esac
echo "== the stand-in (stratus dev aws --image $image): $flags"
grep '^stratus dev aws: \(stack\|each task\|.*SecretArn\)' "$dir/dev.log"

# The model server listens where the containers reach this machine: the
# host of the worker API's URL.
host=$(sed -n 's|^stratus dev aws: stack .*, worker API https://\([0-9.]*\):.*|\1|p' "$dir/dev.log" | head -1)
[ -n "$host" ] || { echo "no worker API address in $dir/dev.log"; exit 1; }
"$stratus" engine modelserver --script examples/modelserver.yaml --addr "$host:0" > "$dir/modelserver.url" 2> "$dir/modelserver.log" &
server=$!
for _ in $(seq 1 100); do [ -s "$dir/modelserver.url" ] && break; sleep 0.1; done
url=$(head -1 "$dir/modelserver.url")
echo "== the scripted model server: $url (its requests: $dir/modelserver.log)"

project=$dir/project
primary=$cli
[ "$cli" = agents ] && primary=claude
"$stratus" install --dir "$project" --primary "$primary" >/dev/null
cp examples/task.md "$project/task.md"
if [ "$cli" = agents ]; then
  # The task pins review to Codex; every other node runs on the primary.
  sed -i '0,/^title: /s|^title: .*|&\nnodes:\n  review:\n    provider: codex|' "$project/task.md"
  grep -q 'provider: codex' "$project/task.md" || { echo "could not pin review to codex in $project/task.md"; exit 1; }
fi
# The engine's settings travel with the run (the project's config), its key
# does not: the worker has it from the task definition's secret.
cfg=$project/.stratus/config.yaml
if [ "$cli" != codex ]; then
  sed -i "s|^        ANTHROPIC_API_KEY: \$ANTHROPIC_API_KEY\$|&\n        ANTHROPIC_BASE_URL: $url\n        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: \"1\"|" "$cfg"
fi
if [ "$cli" != claude ]; then
  # Codex takes its model provider from config (-c overrides, after the
  # shim's --), the key from the variable the provider names.
  extra=""
  for kv in 'model="gpt-5-codex"' 'model_provider="scripted"' 'model_providers.scripted.name="scripted model server"' \
    "model_providers.scripted.base_url=\"$url/v1\"" 'model_providers.scripted.wire_api="responses"' \
    'model_providers.scripted.env_key="OPENAI_API_KEY"'; do
    extra="$extra\n      - -c\n      - '$kv'"
  done
  sed -i "s|^      - codex\$|&\n      - \"--\"$extra|" "$cfg"
fi
grep -q "$url" "$cfg" || { echo "could not point the $cli engine at $url in $cfg"; exit 1; }
git -C "$project" init -q -b main && git -C "$project" add -A &&
  git -C "$project" -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run"

echo "== stratus run examples/task.md --target aws (primary engine: $cli, in $image)"
# shellcheck disable=SC2086 # flags is a list of flags
"$stratus" run "$project/task.md" --dir "$project" $flags
echo
echo "== what the $cli CLI's tool calls changed, back as branch stratus/demo-greeting:"
git -C "$project" show stratus/demo-greeting:cmd/hello/main.go
echo "== where each step ran"
grep ' runs in ' "$dir/dev.log" | sed 's/^stratus dev aws: /  /'
if grep -q -- '--runners process' "$dir/dev.log"; then echo "a step ran as a host process"; exit 1; fi
if [ "$cli" = agents ]; then
  # Both CLIs spoke to the model server: Claude Code's Messages API and
  # Codex's Responses API, from containers of the one image.
  for api in /v1/messages /v1/responses; do
    grep -q "$api" "$dir/modelserver.log" || { echo "no request to $api in $dir/modelserver.log: a provider did not run"; exit 1; }
  done
  echo "== both CLIs ran from $image: $(grep -c /v1/messages "$dir/modelserver.log") Messages API and $(grep -c /v1/responses "$dir/modelserver.log") Responses API requests"
fi
