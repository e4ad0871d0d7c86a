package main

import (
	"strings"
	"testing"
)

// Bad --target aws flags are usage errors (exit 2) caught before anything
// is uploaded or started.
func TestRunTargetAWS_MalformedEndpointOrARNRefusedFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTestFile(t, dir+"/task.md", "---\nid: t1\ntitle: x\n---\nbody\n")
	for _, c := range []struct{ flag, value, want string }{
		{"--endpoint-url", "notaurl", "--endpoint-url"},
		{"--state-machine", "garbage", "--state-machine"},
	} {
		r := runCLI(t, "run", dir+"/task.md", "--dir", dir, "--target", "aws", "--bucket", "b", "--table", "t", c.flag, c.value)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s %s: exit %d, stderr %q", c.flag, c.value, r.code, r.stderr)
		}
	}
}
