// Command sqlitehello is the start figure's floor: a Go program that links
// the SQLite driver every stratus command that reads a store needs
// (modernc.org/sqlite, pure Go) and does nothing else.
package main

import (
	"os"

	_ "modernc.org/sqlite"
)

func main() { os.Stdout.WriteString("hello\n") }
