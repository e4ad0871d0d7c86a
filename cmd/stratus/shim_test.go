package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// seed 003 § 9: the Claude and Codex shims are conforming engines. With a
// fake CLI replaying a recorded success, `stratus engine conform` passes
// every check on `stratus engine claude|codex`.
func TestShims_PassTheConformanceKit(t *testing.T) {
	t.Parallel()
	root := testenv.ModuleRoot(t)
	for _, shim := range []string{"claude", "codex"} {
		dir := t.TempDir()
		rec := filepath.Join(root, "internal/engine/testdata/shim", shim+"_success.jsonl")
		fake := filepath.Join(dir, shim)
		// The fake CLI reads its prompt, then replays the recording.
		writeTestFile(t, fake, "#!/bin/sh\ncat >/dev/null\ncat '"+rec+"'\n")
		os.Chmod(fake, 0o755)
		r := runCLI(t, "engine", "conform", "--", stratusBin, "engine", shim, "--binary", fake)
		if r.code != 0 || strings.Contains(r.stdout, "FAIL") {
			t.Errorf("%s: exit %d\n%s%s", shim, r.code, r.stdout, r.stderr)
		}
	}
}
