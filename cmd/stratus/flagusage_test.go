package main

import (
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestFlagUsage_BoolFlagsNameNoValue: pflag takes a backquoted word of a
// flag's usage as the name of its value, so `--follow run` in --help would
// read as if --follow took one. A flag that takes no value names none.
func TestFlagUsage_BoolFlagsNameNoValue(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.NoOptDefVal == "" {
				return // takes a value
			}
			if name, _ := pflag.UnquoteUsage(f); name != "" {
				t.Errorf("%s --%s: usage names a value %q (a backquoted word): %q", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(IO{}))
}
