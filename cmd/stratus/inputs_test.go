package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
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

// `stratus runs --json --dir /etc/passwd` answered {"code":"internal"}
// "mkdir /etc/passwd: not a directory", exit 1. A --dir that is not a
// directory, or that does not exist (for every command but install, which
// makes it), is bad input: `invalid` on field "dir" (as status's "no run
// was made" is), naming the value and what --dir takes, exit 2, for every
// command with a --dir, checked in one place (the root's
// PersistentPreRunE, which no subcommand overrides). README § Exit status.
func TestDirFlag_NotADirectoryIsInvalidForEveryCommand(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(file, []byte("root:x:0:0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	root := newRootCmd(IO{In: strings.NewReader(""), Out: io.Discard, Err: io.Discard})
	if root.PersistentPreRunE == nil {
		t.Fatal("the root command has no PersistentPreRunE: nothing checks --dir")
	}
	n := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c != root && (c.PersistentPreRunE != nil || c.PersistentPreRun != nil) {
			t.Errorf("%s has its own PersistentPreRun: the --dir check would not run for it", c.CommandPath())
		}
		if c.Flags().Lookup("dir") != nil {
			n++
			for _, dir := range []string{file, filepath.Join(file, "sub"), missing} {
				if err := c.Flags().Set("dir", dir); err != nil {
					t.Fatal(err)
				}
				err := root.PersistentPreRunE(c, nil)
				if dir == missing && c.Name() == "install" {
					if err != nil {
						t.Errorf("install --dir %s (missing, made by install): %v", dir, err)
					}
					continue
				}
				var se *stratus.Error
				if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "dir" || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "valid for --dir: ") {
					t.Errorf("%s --dir %s: %v; want EINVALID on dir naming the value and what --dir takes", c.CommandPath(), dir, err)
				}
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 15 {
		t.Errorf("%d commands have a --dir; want the ~18 that do", n)
	}
	// End to end, as the tester ran it.
	r := runCLI(t, "runs", "--json", "--dir", file)
	var je JSONError
	if json.Unmarshal([]byte(r.stdout), &je) != nil || r.code != ExitUsage || je.Error.Code != stratus.EINVALID || je.Error.Field != "dir" || !strings.Contains(je.Error.Message, file+`" is not a directory (a regular file)`) {
		t.Errorf("runs --json --dir FILE: exit %d\nstdout %s\nstderr %s; want %d and an invalid error on dir", r.code, r.stdout, r.stderr, ExitUsage)
	}
	if r := runCLI(t, "status", "r-x", "--dir", missing); r.code != ExitUsage || !strings.Contains(r.stderr, "--dir") || !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("status --dir MISSING: exit %d %s", r.code, r.stderr)
	}
}

// `stratus install --dir myproject` made myproject itself (and its missing
// parents) 0700. The work dir is the user's project: a missing one, and
// its missing parents, are made 0755 before the umask, as mkdir -p makes
// them; .stratus/ and everything install writes in it are the owner's
// alone (directories 0700, files 0600). docs/security.md § Files under
// .stratus.
func TestInstall_MakesAMissingWorkDirAsAProjectDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "parent", "myproject")
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	// The binary runs with the test's umask, which may take bits away
	// from 0755 (read, not set: tests run in parallel).
	umask := processUmask(t)
	for path, want := range map[string]os.FileMode{
		filepath.Dir(dir):              0o755 &^ os.FileMode(umask),
		dir:                            0o755 &^ os.FileMode(umask),
		filepath.Join(dir, ".stratus"): 0o700,
	} {
		if fi, err := os.Stat(path); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}
	if open := openEntries(t, filepath.Join(dir, ".stratus")); len(open) > 0 {
		t.Errorf("open to other users under .stratus/:\n%s", strings.Join(open, "\n"))
	}
}

// processUmask is this process's umask, as Linux reports it.
func processUmask(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status to read the umask from")
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Umask:"); ok {
			if u, err := strconv.ParseInt(strings.TrimSpace(v), 8, 32); err == nil {
				return int(u)
			}
		}
	}
	t.Skip("no Umask line in /proc/self/status")
	return 0
}
