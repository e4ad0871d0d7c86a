package inputfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/engine"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/task"
)

// loaders are every reader of an input file the CLI takes, each given a
// path; the shared helper (inputfile.Open) is what each must go through.
var loaders = map[string]func(path string) error{
	"inputfile.Open": func(p string) error {
		f, err := inputfile.Open("input file", p)
		if err == nil {
			f.Close()
		}
		return err
	},
	"task.Load":   func(p string) error { _, err := task.Load(p); return err },
	"config.Load": func(p string) error { _, err := config.Load(p); return err },
	"flow.Load": func(p string) error { // p is <flowsDir>/f.yaml
		_, err := flow.Load(filepath.Dir(p), "f")
		return err
	},
	"flow.ReadRoleFile":   func(p string) error { _, err := flow.ReadRoleFile(p); return err },
	"engine.LoadScenario": func(p string) error { _, err := engine.LoadScenario(p); return err },
}

// The finding: `stratus run /tmp/fifo.md` (a named pipe) hung for ever in
// open(2), deaf to SIGINT and SIGTERM. Every input file the CLI reads must
// be a regular file: a FIFO, a device or a directory is refused at once,
// EINVALID (the CLI exits 2), naming the path and what it is.
func TestOpen_RefusesWhatIsNotARegularFileWithoutBlocking(t *testing.T) {
	t.Parallel()
	for kind, c := range map[string]struct {
		make func(t *testing.T, path string) string
		want string
	}{
		"a named pipe": {func(t *testing.T, p string) string {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "is a named pipe (FIFO), not a regular file"},
		"a character device": {func(t *testing.T, p string) string { os.Symlink("/dev/zero", p); return p }, "is a character device, not a regular file"},
		"a directory":        {func(t *testing.T, p string) string { os.Mkdir(p, 0o700); return p }, "is a directory, not a regular file"},
		"a link to a named pipe": {func(t *testing.T, p string) string {
			if err := syscall.Mkfifo(p+".fifo", 0o600); err != nil {
				t.Fatal(err)
			}
			os.Symlink(p+".fifo", p)
			return p
		}, "is a named pipe (FIFO), not a regular file"},
	} {
		for name, load := range loaders {
			t.Run(kind+"/"+name, func(t *testing.T) {
				t.Parallel()
				path := c.make(t, filepath.Join(t.TempDir(), "f.yaml"))
				done := make(chan error, 1)
				go func() { done <- load(path) }()
				select {
				case err := <-done:
					if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
						t.Errorf("%s(%s): %v; want a refusal naming the path and saying it %s", name, path, err, c.want)
					}
					if name != "flow.ReadRoleFile" && name != "engine.LoadScenario" && name != "inputfile.Open" && stratus.ErrorCode(err) != stratus.EINVALID {
						t.Errorf("%s: code %s, want %s", name, stratus.ErrorCode(err), stratus.EINVALID)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("%s(%s) still blocks after 10 s", name, path)
				}
			})
		}
	}
}

// A regular file, and a symbolic link to one, are read as before.
func TestOpen_ReadsARegularFileAndALinkToOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	os.WriteFile(p, []byte("body"), 0o644)
	os.Symlink(p, filepath.Join(dir, "link"))
	for _, path := range []string{p, filepath.Join(dir, "link")} {
		b, err := inputfile.ReadFile("input file", path)
		if err != nil || string(b) != "body" {
			t.Errorf("ReadFile(%s) = %q, %v", path, b, err)
		}
	}
	if _, err := inputfile.Open("input file", filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v, want the os package's not-exist error", err)
	}
}
