#!/bin/sh
# demo-aws-pool.sh BIN DIR: the warm runner pool on a local AWS stand-in
# (README.md § Warm runners (pool mode)). examples/task.md runs twice on `stratus dev aws` (moto,
# the Lambdas and Fargate played on this machine): once with two pooled
# runners per network profile polling moto's SQS (--pool 2), once cold
# (each step an ecs:RunTask on moto, played by a local runner started in
# a fresh directory). It prints, per step, dispatch -> engine start for
# both, and the two medians.
set -eu
bin=$1
dir=$2
here=$(cd "$(dirname "$0")" && pwd)

rm -rf "$dir" && mkdir -p "$dir"

# serve MODE [FLAGS...]: start a stand-in, run the task on it, keep its
# status as JSON in $dir/MODE.json; the stand-in stops at the end.
serve() {
	mode=$1
	shift
	work=$dir/$mode
	"$bin" install --dir "$work" --primary script --scenario "$here/scenario.yaml" >/dev/null
	cp "$here/task.md" "$work/task.md"
	# The project is a git repository: the run's change comes back as a branch.
	git -C "$work" init -q -b main && git -C "$work" add -A &&
		git -C "$work" -c user.name=demo -c user.email=demo@example.invalid commit -qm "the project before the run"
	# Local processes, pooled and cold alike, so the two are compared on
	# the same footing (the pooled runners are processes on dev aws).
	"$bin" dev aws --runners process "$@" >"$dir/$mode.dev.out" 2>"$dir/$mode.dev.log" &
	pid=$!
	i=0
	while [ ! -s "$dir/$mode.dev.out" ] && [ $i -lt 300 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	flags="$(head -1 "$dir/$mode.dev.out") --poll-interval 500ms"
	case "$flags" in
	--target*) ;;
	*)
		echo "stratus dev aws $* did not start:"
		cat "$dir/$mode.dev.log"
		kill -INT $pid 2>/dev/null || true
		exit 1
		;;
	esac
	echo "== $mode: stratus dev aws $*"
	# shellcheck disable=SC2086 # flags is a list of flags
	if ! "$bin" run "$work/task.md" --dir "$work" $flags; then
		kill -INT $pid 2>/dev/null || true
		wait $pid || true
		exit 1
	fi
	# shellcheck disable=SC2086
	run=$("$bin" runs $flags --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["run_id"])')
	# shellcheck disable=SC2086
	"$bin" status "$run" $flags --json >"$dir/$mode.json"
	kill -INT $pid
	wait $pid || true
}

serve pool --pool 2
serve cold

python3 - "$dir/pool.json" "$dir/cold.json" <<'PY'
import json, statistics, sys
pool, cold = (json.load(open(p)) for p in sys.argv[1:3])
for name, r in (("pool", pool), ("cold", cold)):
    if r["status"] != "done":
        sys.exit(f"the {name} run ended {r['status']}, not done")
def starts(r):
    return {s["step_ref"]: s["start_ms"] for s in r["steps"] if s.get("start_ms")}
p, c = starts(pool), starts(cold)
print("== dispatch -> engine start, per step")
print(f"{'step':24} {'pool':>10} {'cold':>10}")
for ref in p:
    cv = f"{c[ref]} ms" if ref in c else "-"
    print(f"{ref:24} {str(p[ref]) + ' ms':>10} {cv:>10}")
if not p or not c:
    sys.exit("no step recorded its engine start")
mp, mc = statistics.median(p.values()), statistics.median(c.values())
print(f"dispatch-to-start median {mp:.0f} ms (pool) vs {mc:.0f} ms (cold)")
print("(here a cold step is a local process the stand-in starts for its RunTask; on AWS it is a Fargate task: 30-90 s)")
if mp >= 1000:
    sys.exit(f"the pooled median {mp:.0f} ms is not under 1 s")
PY
