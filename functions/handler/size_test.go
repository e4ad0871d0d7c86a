package handler_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// BenchmarkLambdas reports each function's binary size and its package
// init time before main (what a cold start pays before the handler runs),
// built for this machine (the deployed arm64 build is the same code): one
// line per function,
//
//	LAMBDA workerapi bytes=18500000 init_ms=21.4
//
// init_ms is the sum of GODEBUG=inittrace's per-package clocks.
func BenchmarkLambdas(b *testing.B) {
	dir := b.TempDir()
	for _, fn := range []string{"claim", "dispatch", "events", "workerapi"} {
		bin := filepath.Join(dir, fn)
		cmd := exec.Command("go", "build", "-o", bin, "./functions/"+fn)
		cmd.Dir = testenv.ModuleRoot(b)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("build %s: %v\n%s", fn, err, out)
		}
		fi, err := os.Stat(bin)
		if err != nil {
			b.Fatal(err)
		}
		var init float64
		b.Run(fn, func(b *testing.B) {
			for b.Loop() {
				run := exec.Command(bin)
				run.Env = []string{"GODEBUG=inittrace=1"} // no AWS configuration: main stops at once
				out, _ := run.CombinedOutput()
				init = 0
				for _, l := range strings.Split(string(out), "\n") {
					// init <package> @<t> ms, <clock> ms clock, <bytes> bytes, <allocs> allocs
					if f := strings.Fields(l); len(f) >= 6 && f[0] == "init" && f[5] == "ms" {
						v, _ := strconv.ParseFloat(f[4], 64)
						init += v
					}
				}
			}
		})
		fmt.Printf("LAMBDA %s bytes=%d init_ms=%.1f\n", fn, fi.Size(), init)
	}
}
