package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// RequireAllEnv names the switch that turns every [Missing] skip into a
// failure: CI installs everything the tests use and sets it to 1.
const RequireAllEnv = "STRATUS_REQUIRE_ALL"

// SkipLogEnv names the file each [Missing] skip appends one line to, as
// "what<TAB>why<TAB>package.Test"; `make test` sets it and lists the lines
// at its end.
const SkipLogEnv = "STRATUS_SKIP_LOG"

// startDir is the working directory when the test binary started: the
// package directory under go test. Taken once, so a test that changes
// directory (t.Chdir) does not move the module root.
var startDir, startErr = os.Getwd()

// ModuleRoot returns the directory holding go.mod, walking up from the
// calling package's directory; it fails tb when there is none.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	root, err := moduleRoot()
	if err != nil {
		tb.Fatalf("testenv: %v", err)
	}
	return root
}

func moduleRoot() (string, error) {
	if startErr != nil {
		return "", fmt.Errorf("working directory: %w", startErr)
	}
	return findModuleRoot(startDir)
}

// findModuleRoot walks up from dir to the first directory holding go.mod.
func findModuleRoot(dir string) (string, error) {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("no go.mod in " + dir + " or any directory above it")
		}
		d = parent
	}
}

// Cases returns the absolute path of testdata/cases in the module root
// joined with elem: the repository's copy of the shared test vectors. It
// fails tb when that directory is missing (a broken checkout, not a
// missing tool).
func Cases(tb testing.TB, elem ...string) string {
	tb.Helper()
	d := filepath.Join(ModuleRoot(tb), "testdata", "cases")
	if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
		tb.Fatalf("testenv: the test vectors are missing: expected a directory at %s", d)
	}
	return filepath.Join(append([]string{d}, elem...)...)
}

// sharedDir returns ../shared beside the module root, and whether it is a
// directory.
func sharedDir(tb testing.TB) (string, bool) {
	tb.Helper()
	return isDir(filepath.Join(ModuleRoot(tb), "..", "shared"))
}

func isDir(d string) (string, bool) {
	fi, err := os.Stat(d)
	return d, err == nil && fi.IsDir()
}

// Peers returns ../shared/peers beside the module root joined with elem.
// When that path does not exist it skips tb through [Missing], naming the
// path: worc's files are not the project's to copy into the repository.
func Peers(tb testing.TB, elem ...string) string {
	tb.Helper()
	p, ok := PeersIfPresent(tb, elem...)
	if !ok {
		tb.SkipNow()
	}
	return p
}

// PeersIfPresent is [Peers] for a test that checks peer files on top of
// its own inputs: when they are missing it records the notice (and fails
// under STRATUS_REQUIRE_ALL=1) but does not skip, returning "" and false.
func PeersIfPresent(tb testing.TB, elem ...string) (string, bool) {
	tb.Helper()
	shared, _ := sharedDir(tb)
	return peersIn(tb, shared, elem...)
}

// peersIn is [PeersIfPresent] with the shared directory given.
func peersIn(tb testing.TB, shared string, elem ...string) (string, bool) {
	tb.Helper()
	p := filepath.Join(append([]string{shared, "peers"}, elem...)...)
	if _, err := os.Stat(p); err != nil {
		// The path is for the test's log; the notice is the same for every
		// test, so `make test` lists the peer skips as one group.
		tb.Logf("%s: %v", p, err)
		notice(tb, "../shared/peers", fmt.Sprintf("worc's flows and tasks are another project's files, not in this repository (%s not found beside the checkout); CI has them", filepath.Join(shared, "peers")))
		return "", false
	}
	return p, true
}

// MustHaveCommand returns the path of the executable name on PATH, or
// skips tb through [Missing] naming it and what it is for.
func MustHaveCommand(tb testing.TB, name, purpose string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, name, fmt.Sprintf("not found on PATH (%s)", purpose))
	}
	return p
}

// Missing stops tb because something outside Go that it needs is not on
// this machine: what names it (a command, "moto", "../shared/peers"),
// why says what was found and how to get it. The test is skipped with that
// one-line notice, or fails with it when STRATUS_REQUIRE_ALL=1.
func Missing(tb testing.TB, what, why string) {
	tb.Helper()
	notice(tb, what, why)
	tb.SkipNow()
}

// notice logs that what is missing, appends the line to the skip log and
// fails tb under STRATUS_REQUIRE_ALL=1 (FailNow: nothing after it runs).
func notice(tb testing.TB, what, why string) {
	tb.Helper()
	msg := fmt.Sprintf("needs %s: %s", what, why)
	if os.Getenv(RequireAllEnv) == "1" {
		tb.Fatalf("%s (%s=1: nothing may be skipped)", msg, RequireAllEnv)
	}
	tb.Log("SKIP " + msg)
	appendSkipLog(what, why, testID(tb))
}

var logMu sync.Mutex

// appendSkipLog appends one line to $STRATUS_SKIP_LOG. Test binaries run
// in parallel; each line is one O_APPEND write, so lines do not interleave.
func appendSkipLog(what, why, test string) {
	path := os.Getenv(SkipLogEnv)
	if path == "" {
		return
	}
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	line := clean(what) + "\t" + clean(why) + "\t" + clean(test) + "\n"
	logMu.Lock()
	defer logMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line)
}

// testID is the test's package directory (relative to the module root)
// and name, e.g. internal/compiler.TestCompile_EveryPeerFlow.
func testID(tb testing.TB) string {
	pkg := "."
	if root, err := moduleRoot(); err == nil {
		if rel, err := filepath.Rel(root, startDir); err == nil {
			pkg = filepath.ToSlash(rel)
		}
	}
	return pkg + "." + tb.Name()
}

// NodeBin returns the path of the npm package binary name under the
// module's node_modules/.bin (package.json pins it; `npm install`, which
// make test runs, installs it), or skips (fails under
// STRATUS_REQUIRE_ALL=1) naming the package to install.
func NodeBin(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p := filepath.Join(ModuleRoot(tb), "node_modules", ".bin", name)
	if fi, err := os.Stat(p); err != nil || fi.Mode()&0o111 == 0 {
		Missing(tb, name, fmt.Sprintf("%s is not installed under node_modules/.bin: run npm install (package.json pins %s)", name, pkg))
	}
	return p
}

// SharedDir is a fresh directory every user may enter and write, as the
// shared temporary directory is (mode 1777), removed when the test ends:
// where another local user could plant or squat a file.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "stratus-open-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o1777); err != nil {
		t.Fatal(err)
	}
	return dir
}
