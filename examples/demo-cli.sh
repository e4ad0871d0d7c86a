#!/usr/bin/env bash
# demo-cli.sh claude|codex DIR STRATUS: the example task through the built-in
# implementation flow with the real Claude Code or Codex CLI (installed by npm
# from package.json into node_modules/.bin) against the scripted model server
# (stratus engine modelserver --script examples/modelserver.yaml) on
# 127.0.0.1: no key, no network. `make demo-claude` and `make demo-codex` run it.
set -euo pipefail
cli=$1 dir=$2 stratus=$3
case "$cli" in claude|codex) ;; *) echo "usage: $0 claude|codex DIR STRATUS" >&2; exit 2;; esac
root=$(pwd)
if [ ! -x "node_modules/.bin/$cli" ]; then
  echo "== npm install (package.json pins the $cli CLI)"
  npm install --no-audit --no-fund --no-update-notifier --loglevel=error
fi
rm -rf "$dir" && mkdir -p "$dir"
"$stratus" install --dir "$dir" --primary "$cli" >/dev/null
cp examples/task.md "$dir/task.md"
"$stratus" engine modelserver --script examples/modelserver.yaml > "$dir/modelserver.url" 2> "$dir/modelserver.log" &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do [ -s "$dir/modelserver.url" ] && break; sleep 0.1; done
url=$(head -1 "$dir/modelserver.url")
echo "== the scripted model server: $url (its requests: $dir/modelserver.log)"
export PATH="$root/node_modules/.bin:$PATH"
if [ "$cli" = claude ]; then
  export ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=sk-scripted CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
  export CLAUDE_CONFIG_DIR="$root/$dir/.claude"
else
  export CODEX_HOME="$root/$dir/.codex" OPENAI_API_KEY=scripted
  mkdir -p "$CODEX_HOME"
  cat > "$CODEX_HOME/config.toml" <<TOML
model = "gpt-5-codex"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted model server"
base_url = "$url/v1"
wire_api = "responses"
env_key = "OPENAI_API_KEY"
TOML
fi
echo "== $($cli --version | head -1)"
"$stratus" run "$dir/task.md" --dir "$dir"
echo
echo "== what the $cli CLI's tool calls changed (cmd/hello/main.go):"
cat "$dir/cmd/hello/main.go"
echo "== the run's cost (summary.md):"
awk '/^## Run cost/ {on=1; next} /^## / {on=0} on && NF' "$dir"/.stratus/logs/*/summary.md
