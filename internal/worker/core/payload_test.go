package core

import (
	"slices"
	"testing"

	"github.com/stratusflow/stratus"
)

// docs/contracts.md § The reference engine: a launch spec must mirror the
// call's kind and step ceiling onto argv, so openseek gets `subrun <kind>
// --max-steps N`; with no ceiling the flag is dropped rather than sent empty.
func TestExpandArgs_MirrorsKindAndMaxSteps(t *testing.T) {
	t.Parallel()
	args := []string{"subrun", "{kind}", "--max-steps", "{max_steps}"}
	if got := ExpandArgs(args, ArgValues("review", 100, stratus.Resolved{})); !slices.Equal(got, []string{"subrun", "review", "--max-steps", "100"}) {
		t.Errorf("got %v", got)
	}
	if got := ExpandArgs(args, ArgValues("echo", 0, stratus.Resolved{})); !slices.Equal(got, []string{"subrun", "echo"}) {
		t.Errorf("no ceiling: got %v", got)
	}
}

// docs/contracts.md § Per-node overrides: the resolved model, reasoning and
// grants reach argv through {model} {reasoning} {permission_profile}
// {network_access}; an argument that expands to "" is dropped together with
// the '-' flag right before it, and a value is never expanded again.
func TestExpandArgs_OverridePlaceholders_EmptyDropsItsFlag(t *testing.T) {
	t.Parallel()
	args := []string{"run", "--model", "{model}", "-r", "{reasoning}", "--sandbox={permission_profile}", "--net", "{network_access}", "keep", "{reasoning}"}
	for _, tc := range []struct {
		name string
		r    stratus.Resolved
		want []string
	}{
		{"AllSet", stratus.Resolved{Model: "m1", Reasoning: "high", PermissionProfile: "read-only", NetworkAccess: true},
			[]string{"run", "--model", "m1", "-r", "high", "--sandbox=read-only", "--net", "true", "keep", "high"}},
		{"ModelAndReasoningUnset", stratus.Resolved{PermissionProfile: "workspace-write"},
			// "keep" does not start with '-': only the empty argument goes.
			[]string{"run", "--sandbox=workspace-write", "--net", "false", "keep"}},
		{"ValueNotReexpanded", stratus.Resolved{Model: "{reasoning}", Reasoning: "low", PermissionProfile: "read-only"},
			[]string{"run", "--model", "{reasoning}", "-r", "low", "--sandbox=read-only", "--net", "false", "keep", "low"}},
	} {
		if got := ExpandArgs(args, ArgValues("agent", 0, tc.r)); !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	// A literal empty argument holds no placeholder and is kept.
	if got := ExpandArgs([]string{"-x", ""}, ArgValues("agent", 0, stratus.Resolved{})); !slices.Equal(got, []string{"-x", ""}) {
		t.Errorf("literal empty argument: got %q", got)
	}
}
