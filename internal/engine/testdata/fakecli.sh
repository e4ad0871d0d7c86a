#!/bin/sh
# A fake coding-agent CLI for the shim tests. A test links it as DIR/<cli>
# (a link, not a copy: an executable written by a test process that forks
# concurrently can fail to start with "text file busy") and writes beside it
# <cli>.recording (the path of the recording to replay on stdout),
# <cli>.lines (replay only that many lines; empty = all), <cli>.stderr
# (bytes for stderr) and <cli>.end (the script's last command).
# It records its argv (one per line), its stdin, and the file passed to
# --output-schema in DIR.
d=$(dirname "$0") n=$(basename "$0")
printf '%s\n' "$@" > "$d/argv"
prev=
for a in "$@"; do
	if [ "$prev" = "--output-schema" ]; then cp "$a" "$d/schema.json"; fi
	prev=$a
done
cat > "$d/stdin"
lines=$(cat "$d/$n.lines")
if [ -n "$lines" ]; then
	head -n "$lines" "$(cat "$d/$n.recording")"
else
	cat "$(cat "$d/$n.recording")"
fi
cat "$d/$n.stderr" >&2
# shellcheck source=/dev/null
. "$d/$n.end"
