package sharedtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleRoot_HoldsGoModTwoLevelsUp(t *testing.T) {
	t.Parallel()
	root := ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "..", ".."); root != want {
		t.Errorf("ModuleRoot = %s, want %s", root, want)
	}
}

func TestDir_IsSharedBesideTheModuleRoot(t *testing.T) {
	t.Parallel()
	d := Dir(t)
	if want := filepath.Join(ModuleRoot(t), "..", "shared"); d != want || !filepath.IsAbs(d) {
		t.Errorf("Dir = %s, want absolute %s", d, want)
	}
	if got, want := Path(t, "cases", "fold"), filepath.Join(d, "cases", "fold"); got != want {
		t.Errorf("Path = %s, want %s", got, want)
	}
}

// fatalTB records the first Fatalf and stops the caller, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

func TestSharedIn_MissingNamesTheExpectedPath(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "main")
	tb := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != tb {
				panic(r)
			}
		}()
		sharedIn(tb, root)
	}()
	if want := filepath.Join(filepath.Dir(root), "shared"); !strings.Contains(tb.msg, want) {
		t.Errorf("fatal message %q does not name %s", tb.msg, want)
	}
}
