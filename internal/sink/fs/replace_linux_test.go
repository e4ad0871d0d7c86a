package fs_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus/internal/sink/fs"
)

// ctxDirEntries lists the names in key's directory.
func ctxDirEntries(t *testing.T, s *fs.Sink, key string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(s.Path(key)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// doc.go: a Put over a file already there exchanges the new file with it
// and unlinks the old (no rename over it, which ext4 writes back inside
// the call); the key then holds the new bytes, with the modes a Put sets,
// and no temporary file is left. Not parallel: it swaps the package's
// exchange.
func TestSink_PutOverAFileExchangesIt(t *testing.T) {
	var calls, swapped int
	defer fs.SetExchange(func(dirfd int, old, new string) error {
		calls++
		err := fs.Exchange(dirfd, old, new)
		if err == nil {
			swapped++
		}
		return err
	})()
	s := fs.New(t.TempDir())
	ctx := context.Background()
	key := "workspace/tasks/T1/ctx/plan.md"
	if err := s.Put(ctx, key, []byte("# Plan 1\n")); err != nil {
		t.Fatal(err)
	}
	if swapped != 0 {
		t.Fatalf("a Put of a new key exchanged %d times; want a rename (nothing to exchange with)", swapped)
	}
	if err := s.Put(ctx, key, []byte("# Plan 2, longer\n")); err != nil {
		t.Fatal(err)
	}
	if swapped != 1 {
		t.Errorf("a Put over a file exchanged %d times (of %d calls); want 1", swapped, calls)
	}
	if got, _ := os.ReadFile(s.Path(key)); string(got) != "# Plan 2, longer\n" {
		t.Errorf("the key holds %q; want the second body", got)
	}
	if fi, _ := os.Stat(s.Path(key)); fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	if names := ctxDirEntries(t, s, key); !slices.Equal(names, []string{"plan.md"}) {
		t.Errorf("the dir holds %q; want plan.md alone (the old file or a temporary one left behind?)", names)
	}
}

// A file system that cannot exchange (EINVAL) gets the rename: the Put
// succeeds just the same.
func TestSink_PutOverAFileWithoutExchangeRenames(t *testing.T) {
	defer fs.SetExchange(func(int, string, string) error { return syscall.EINVAL })()
	s := fs.New(t.TempDir())
	ctx := context.Background()
	key := "ctx/plan.md"
	for _, body := range []string{"one\n", "two\n"} {
		if err := s.Put(ctx, key, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.ReadFile(s.Path(key)); string(got) != "two\n" {
		t.Errorf("the key holds %q; want %q", got, "two\n")
	}
	if names := ctxDirEntries(t, s, key); !slices.Equal(names, []string{"plan.md"}) {
		t.Errorf("the dir holds %q; want plan.md alone", names)
	}
}

// A Put of a key that names a directory fails as the rename over a
// directory did, and the directory stays where it was with what it holds
// (an exchange would have moved it to the temporary name).
func TestSink_PutOverADirectoryFailsAndKeepsIt(t *testing.T) {
	t.Parallel()
	s := fs.New(t.TempDir())
	ctx := context.Background()
	if err := s.Put(ctx, "ctx/plan.md/inner.md", []byte("inner\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "ctx/plan.md", []byte("file\n")); err == nil {
		t.Fatal("Put over a directory succeeded; want an error")
	}
	if got, err := os.ReadFile(s.Path("ctx/plan.md/inner.md")); err != nil || string(got) != "inner\n" {
		t.Errorf("the directory's file reads %q, %v; want it kept", got, err)
	}
	if names := ctxDirEntries(t, s, "ctx/plan.md"); !slices.Equal(names, []string{"plan.md"}) {
		t.Errorf("the dir holds %q; want the directory plan.md alone", names)
	}
}
