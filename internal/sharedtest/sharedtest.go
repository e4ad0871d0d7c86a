package sharedtest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// startDir is the working directory when the test binary started: the
// package directory under go test. Taken once, so a test that changes
// directory (t.Chdir) does not move the module root.
var startDir, startErr = os.Getwd()

// ModuleRoot returns the directory holding go.mod, walking up from the
// calling package's directory; it fails tb when there is none.
func ModuleRoot(tb testing.TB) string {
	tb.Helper()
	if startErr != nil {
		tb.Fatalf("sharedtest: working directory: %v", startErr)
	}
	root, err := findModuleRoot(startDir)
	if err != nil {
		tb.Fatalf("sharedtest: %v", err)
	}
	return root
}

// Dir returns the absolute path of ../shared beside the module root; it
// fails tb, naming the path it expected, when that is not a directory.
func Dir(tb testing.TB) string {
	tb.Helper()
	return sharedIn(tb, ModuleRoot(tb))
}

// Path returns Dir joined with elem.
func Path(tb testing.TB, elem ...string) string {
	tb.Helper()
	return filepath.Join(append([]string{Dir(tb)}, elem...)...)
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

// sharedIn returns root/../shared, failing tb when it is not a directory.
func sharedIn(tb testing.TB, root string) string {
	tb.Helper()
	d := filepath.Join(root, "..", "shared")
	fi, err := os.Stat(d)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		tb.Fatalf("sharedtest: shared specification material not found: expected a directory at %s (../shared beside the module root %s, as CI lays it out): %v", d, root, err)
	}
	return d
}
