package statedir

import (
	"os"
	"path/filepath"
	"testing"
)

// write makes the file rel under root with mode, and its directories 0755.
func write(t *testing.T, root, rel string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// docs/security.md § Files under .stratus: a state dir an older stratus
// left open (0755 dirs, 0644 files, 0755 tools) is tightened whole by
// Secure, executables keeping their owner's x bit; a symbolic link in it
// is not followed, so a file outside the state dir keeps its mode.
func TestSecure_TightensAnOpenStateDirWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state := filepath.Join(dir, ".stratus")
	files := map[string]os.FileMode{
		"config.yaml":                   0o600,
		"stratus.db":                    0o600,
		"stratus.db-wal":                0o600,
		"runs/r1/bundle/manifest.json":  0o600,
		"logs/t1/stages/a/run-1/log":    0o600,
		"tools/check.sh":                0o700,
		"logs/t1/attempt-1/ctx/plan.md": 0o600,
	}
	for rel := range files {
		m := os.FileMode(0o644)
		if rel == "tools/check.sh" {
			m = 0o755
		}
		write(t, state, rel, m)
	}
	outside := write(t, dir, "project/notes.md", 0o644)
	if err := os.Symlink(outside, filepath.Join(state, "runs", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(state, "logs", "dirlink")); err != nil {
		t.Fatal(err)
	}
	os.Chmod(state, 0o755)
	if err := Secure(state); err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		if got := mode(t, filepath.Join(state, rel)); got != want {
			t.Errorf("%s: mode %04o, want %04o", rel, got, want)
		}
	}
	for _, d := range []string{".", "runs", "runs/r1/bundle", "logs/t1/attempt-1/ctx", "tools"} {
		if got := mode(t, filepath.Join(state, d)); got != 0o700 {
			t.Errorf("%s/: mode %04o, want 0700", d, got)
		}
	}
	if got := mode(t, outside); got != 0o644 {
		t.Errorf("a file outside the state dir, reached by a link in it: mode %04o, want 0644 (untouched)", got)
	}
	if got := mode(t, filepath.Dir(outside)); got != 0o755 {
		t.Errorf("a directory outside the state dir, reached by a link in it: mode %04o, want 0755 (untouched)", got)
	}
}

// Secure on a state dir that is already 0700 tightens the top-level entries
// and the operator's inputs (an editor writes config.yaml and flows with
// the umask's modes), not the runs' trees, which Stratus writes private
// and which grow with every run; a missing state dir is made 0700.
func TestSecure_TightensTheInputsOfAPrivateStateDir(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), ".stratus")
	if err := Secure(state); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, state); got != 0o700 {
		t.Fatalf("a new state dir: mode %04o, want 0700", got)
	}
	edited := []string{"config.yaml", "flows/tiny.yaml", "flows/tiny/answer.md", "tools/x/check.sh", "notes.txt"}
	for _, rel := range edited {
		write(t, state, rel, 0o644)
	}
	deep := write(t, state, "runs/r1/bundle/config.yaml", 0o644)
	if err := Secure(state); err != nil {
		t.Fatal(err)
	}
	for _, rel := range append(edited, "flows", "flows/tiny", "tools/x", "runs") {
		if got := mode(t, filepath.Join(state, rel)); got&0o077 != 0 {
			t.Errorf("%s: mode %04o, want no group or other bit", rel, got)
		}
	}
	if got := mode(t, deep); got != 0o644 {
		t.Errorf("a run's file: mode %04o; Secure of a 0700 state dir walks the inputs alone", got)
	}
}
