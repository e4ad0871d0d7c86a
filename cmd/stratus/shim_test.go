package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// docs/contracts.md § Conformance checklist: the Claude and Codex shims are
// conforming engines. With a fake CLI replaying a recorded success, `stratus
// engine conform` passes every check on `stratus engine claude|codex`.
func TestShims_PassTheConformanceKit(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	for _, shim := range []string{"claude", "codex"} {
		dir := t.TempDir()
		// The fake CLI of the engine package's tests (linked, not written:
		// see its header), replaying a recorded success.
		fake := filepath.Join(dir, shim)
		writeTestFile(t, fake+".recording", filepath.Join(root, "internal/engine/testdata/shim", shim+"_success.jsonl"))
		writeTestFile(t, fake+".lines", "")
		writeTestFile(t, fake+".stderr", "")
		writeTestFile(t, fake+".end", "exit 0\n")
		if err := os.Symlink(filepath.Join(root, "internal/engine/testdata/fakecli.sh"), fake); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, "engine", "conform", "--", stratusBin, "engine", shim, "--binary", fake)
		if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
			t.Errorf("%s: exit %d\n%s%s", shim, r.code, r.stdout, r.stderr)
		}
	}
}
