package runner

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// peakRSSKiB returns the runner's own peak resident set size (VmHWM, KiB)
// on Linux, and 0 where /proc is not available. The engine is a separate
// process and is not counted: the target is the runner under 30 MiB besides
// its engine.
func peakRSSKiB() int {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}
