package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runCLIWithin runs the built binary as runCLI does, but kills it after
// d: a command that blocks fails its test instead of hanging it.
func runCLIWithin(t *testing.T, d time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	cmd := exec.CommandContext(ctx, stratusBin, args...)
	cmd.Cancel = func() error { return cmd.Process.Kill() } // SIGTERM went unheard
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("stratus %v still ran after %s (killed)\n%s", args, d, errb.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run stratus %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// `stratus run /tmp/fifo.md` (a named pipe) hung for ever and ignored
// SIGINT and SIGTERM. A task file that is not a regular file is refused at
// once: exit 2, naming the file and what it is (internal/inputfile).
func TestRun_ATaskFileThatIsAFIFOIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	fifo := filepath.Join(t.TempDir(), "fifo.md")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", fifo, "--dir", dir},
		{"run", fifo, "--dir", dir, "--json"},
	} {
		r := runCLIWithin(t, 20*time.Second, args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, fifo+" is a named pipe (FIFO), not a regular file") {
			t.Errorf("stratus %v: exit %d\n%s; want %d naming the FIFO", args, r.code, r.stderr, ExitUsage)
		}
	}
}
