package sink_test

import (
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/sinktest"
)

// docs/contracts.md § Files are the server's job: a key can never name
// anything outside the sink's root.
func TestCheckKey_RefusesKeysThatCouldEscapeTheRoot(t *testing.T) {
	t.Parallel()
	for _, key := range sinktest.EscapingKeys {
		err := sink.CheckKey(key)
		if stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("CheckKey(%q) = %v, want EINVALID", key, err)
			continue
		}
		if f := err.(*stratus.Error).Field; f != "key" {
			t.Errorf("CheckKey(%q).Field = %q, want \"key\"", key, f)
		}
	}
	if err := sink.CheckKey("a\xffb"); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("CheckKey(invalid UTF-8) = %v, want EINVALID", err)
	}
}

// docs/contracts.md § Files are the server's job: ctx-dir keys and plain part
// names are accepted.
func TestCheckKey_AcceptsRelativeSlashPaths(t *testing.T) {
	t.Parallel()
	for _, key := range []string{
		"plan.md",
		"workspace/tasks/T-17/ctx/plan.md",
		"ctx/.hidden",
		"ctx/a b.txt",
		"ctx/r\u00e9sum\u00e9.md",
		"ctx/v1.2.txt",
		"ctx/a:b",
		"..x/y..",
	} {
		if err := sink.CheckKey(key); err != nil {
			t.Errorf("CheckKey(%q) = %v, want nil", key, err)
		}
	}
}
