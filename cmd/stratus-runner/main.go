// Command stratus-runner is the runner alone: what `stratus runner` does
// (runner.Main), in a binary that links only the runner, the worker client
// and the child contract — no server, store, compiler or AWS SDK — so a
// step's worker starts in a fraction of `stratus`'s start-up and memory. The
// embedded launcher uses it when it sits beside the stratus binary (make
// build puts it there); `stratus runner` stays the same runner for any host
// that has only stratus.
package main

import (
	"os"

	"github.com/stratusflow/stratus/internal/reaper"
	"github.com/stratusflow/stratus/internal/runner"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == reaper.Arg {
		// `stratus-runner reap`: the reaper of a stratus process whose
		// workers run in process (internal/reaper).
		os.Exit(reaper.Main(os.Stdin))
	}
	os.Exit(runner.Main(os.Getenv, os.Stderr))
}
