package worker

import (
	"slices"
	"testing"
)

// seed 003 § 7.1: a launch spec must mirror the call's kind and step
// ceiling onto argv, so openseek gets `subrun <kind> --max-steps N`; with no
// ceiling the flag is dropped rather than sent empty.
func TestExpandArgs_MirrorsKindAndMaxSteps(t *testing.T) {
	t.Parallel()
	args := []string{"subrun", "{kind}", "--max-steps", "{max_steps}"}
	if got := expandArgs(args, "review", 100); !slices.Equal(got, []string{"subrun", "review", "--max-steps", "100"}) {
		t.Errorf("got %v", got)
	}
	if got := expandArgs(args, "echo", 0); !slices.Equal(got, []string{"subrun", "echo"}) {
		t.Errorf("no ceiling: got %v", got)
	}
}
