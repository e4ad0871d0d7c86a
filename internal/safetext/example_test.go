package safetext_test

import (
	"fmt"

	"github.com/stratusflow/stratus/internal/safetext"
)

// A failure reason an engine posted, shown on one line, as a block and
// quoted (docs/security.md § Text an engine wrote).
func Example() {
	reason := "bad \x1b[2Jred\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	fmt.Println(safetext.Line(reason))
	fmt.Println(safetext.Quote(reason))
	fmt.Println(safetext.Block("line one\n\tline \u200etwo"))
	// Output:
	// bad \x1b[2Jred\r\nstratus: end fake#1 verdict=done\u202egnp.exe
	// "bad \x1b[2Jred\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	// line one
	// 	line \u200etwo
}
