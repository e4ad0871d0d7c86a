// Package english words counts and durations in the sentences Stratus
// writes to its operators: "1 flow", "3 flows", "333ms", "2m05s".
package english

import (
	"fmt"
	"strconv"
	"time"
)

// Plural is n and word, with an "s" unless n is 1: Plural(1, "step") is
// "1 step", Plural(0, "step") "0 steps".
func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// Duration is d as every duration an operator reads is printed (`stratus
// status`, `runs`, `logs`, the progress lines, the run viewer, the run's
// summary), so that one figure reads the same everywhere: under a second
// in whole milliseconds ("333ms", "0ms"), under ten seconds with one
// decimal ("4.2s"), then in whole seconds ("42s", "2m05s", "1h02m05s").
// A negative d is "0ms".
func Duration(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(max(d.Milliseconds(), 0), 10) + "ms"
	}
	if r := d.Round(100 * time.Millisecond); r < 10*time.Second {
		return fmt.Sprintf("%.1fs", r.Seconds())
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	case m > 0:
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}
