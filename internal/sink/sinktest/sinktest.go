package sinktest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
)

// EscapingKeys are keys every Sink must refuse with EINVALID on both Put
// and Get: each could name something outside the sink's root on some
// platform (docs/contracts.md § Files are the server's job).
var EscapingKeys = []string{
	"",
	"/etc/passwd",
	"../x",
	"..",
	".",
	"a/../../x",
	"a/./b",
	"a//b",
	"a/",
	`a\b`,
	`..\x`,
	"C:/x",
	"c:x",
	"a\x00b",
	"a\nb",
}

// Run runs the conformance suite against the sinks newSink returns. Each
// subtest gets a fresh, empty sink; subtests run in parallel.
func Run(t *testing.T, newSink func(t *testing.T) sink.Sink) {
	t.Helper()
	ctx := context.Background()

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		for _, key := range []string{"a.md", "workspace/tasks/T1/ctx/plan.md", "x/y/z/.hidden", "r\u00e9sum\u00e9 1.md"} {
			body := []byte("body of " + key + "\n")
			mustPut(t, s, key, body)
			if got := mustGet(t, s, key); !bytes.Equal(got, body) {
				t.Errorf("Get(%q) = %q, want %q", key, got, body)
			}
		}
	})

	// GetMax: a body up to max is returned whole; a larger one is
	// ETOOLARGE on field bytes; a missing key is ENOTFOUND; a bad key
	// EINVALID (docs/security.md § Upload size limits: an upload is read
	// bounded, whatever a presigned URL's holder stored).
	t.Run("GetMax", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		body := bytes.Repeat([]byte("x"), 1000)
		mustPut(t, s, "up/a", body)
		if got, err := s.GetMax(ctx, "up/a", 1000); err != nil || !bytes.Equal(got, body) {
			t.Errorf("GetMax(up/a, 1000) = %d bytes, %v; want the 1000 bytes", len(got), err)
		}
		_, err := s.GetMax(ctx, "up/a", 999)
		var se *stratus.Error
		if stratus.ErrorCode(err) != stratus.ETOOLARGE || !errors.As(err, &se) || se.Field != "bytes" || !strings.Contains(err.Error(), "999") {
			t.Errorf("GetMax(up/a, 999) = %v; want ETOOLARGE on field bytes naming the limit", err)
		}
		if _, err := s.GetMax(ctx, "up/missing", 10); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("GetMax(missing) = %v; want ENOTFOUND", err)
		}
		if _, err := s.GetMax(ctx, "../x", 10); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("GetMax(../x) = %v; want EINVALID", err)
		}
	})

	// Size: the stored length, whatever it is, without reading the
	// body; a missing key (or a mere prefix of stored keys) is ENOTFOUND;
	// a bad key EINVALID (docs/security.md § Upload size limits).
	t.Run("Size", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		for key, n := range map[string]int{"up/empty": 0, "up/one": 1, "up/big/bundle": 70000} {
			mustPut(t, s, key, bytes.Repeat([]byte("b"), n))
			if got, err := s.Size(ctx, key); err != nil || got != int64(n) {
				t.Errorf("Size(%q) = %d, %v; want %d", key, got, err, n)
			}
		}
		for _, key := range []string{"up/missing", "up/big"} {
			if _, err := s.Size(ctx, key); stratus.ErrorCode(err) != stratus.ENOTFOUND {
				t.Errorf("Size(%q) = %v; want ENOTFOUND", key, err)
			}
		}
		for _, key := range EscapingKeys {
			if _, err := s.Size(ctx, key); stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("Size(%q) = %v; want EINVALID", key, err)
			}
		}
	})

	// Delete: the key is gone (Get ENOTFOUND, List omits it), its
	// neighbours stay; deleting a missing key is no error; a bad key is
	// EINVALID.
	t.Run("Delete", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		mustPut(t, s, "d/a", []byte("a"))
		mustPut(t, s, "d/b", []byte("b"))
		if err := s.Delete(ctx, "d/a"); err != nil {
			t.Fatalf("Delete(d/a): %v", err)
		}
		if _, err := s.Get(ctx, "d/a"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("Get after Delete = %v; want ENOTFOUND", err)
		}
		if keys, err := s.List(ctx, "d"); err != nil || !slices.Equal(keys, []string{"d/b"}) {
			t.Errorf("List(d) after Delete = %v, %v; want [d/b]", keys, err)
		}
		for _, key := range []string{"d/a", "nothing/here"} {
			if err := s.Delete(ctx, key); err != nil {
				t.Errorf("Delete(%s) of nothing = %v; want nil", key, err)
			}
		}
		if err := s.Delete(ctx, "../x"); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("Delete(../x) = %v; want EINVALID", err)
		}
	})

	// List: every key under a dir, at any depth, sorted; nothing beside
	// it or sharing its name's prefix; a missing dir lists nothing.
	t.Run("ListUnderDir", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		for _, key := range []string{"w/t/ctx/b.md", "w/t/ctx/a.md", "w/t/ctx/tools/x/stdout.txt", "w/t/ctx2/c.md", "w/t/other.md"} {
			mustPut(t, s, key, []byte(key))
		}
		got, err := s.List(ctx, "w/t/ctx")
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"w/t/ctx/a.md", "w/t/ctx/b.md", "w/t/ctx/tools/x/stdout.txt"}
		if !slices.Equal(got, want) {
			t.Errorf("List(w/t/ctx) = %q, want %q", got, want)
		}
		if got, err := s.List(ctx, "nothing/here"); err != nil || len(got) != 0 {
			t.Errorf("List of a missing dir = %q, %v; want nothing", got, err)
		}
		if _, err := s.List(ctx, "../up"); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("List(../up) = %v, want EINVALID", err)
		}
	})

	t.Run("OverwriteLastWins", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		mustPut(t, s, "d/k", []byte("a much longer first version\n"))
		mustPut(t, s, "d/k", []byte("second"))
		if got := mustGet(t, s, "d/k"); string(got) != "second" {
			t.Errorf("Get after overwrite = %q, want %q", got, "second")
		}
	})

	t.Run("MissingKeyNotFound", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		for _, key := range []string{"nope", "no/such/dir/file"} {
			_, err := s.Get(ctx, key)
			if code := stratus.ErrorCode(err); code != stratus.ENOTFOUND {
				t.Errorf("Get(%q) on empty sink: code %q (err %v), want %q", key, code, err, stratus.ENOTFOUND)
			}
		}
		mustPut(t, s, "dir/file", []byte("x"))
		for _, key := range []string{"dir", "dir/other", "dir/file/below"} {
			_, err := s.Get(ctx, key)
			if code := stratus.ErrorCode(err); code != stratus.ENOTFOUND {
				t.Errorf("Get(%q): code %q (err %v), want %q", key, code, err, stratus.ENOTFOUND)
			}
		}
	})

	t.Run("EscapingKeyRefused", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		for _, key := range EscapingKeys {
			if err := s.Put(ctx, key, []byte("x")); stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("Put(%q): err %v, want code %q", key, err, stratus.EINVALID)
			}
			if _, err := s.Get(ctx, key); stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("Get(%q): err %v, want code %q", key, err, stratus.EINVALID)
			}
		}
	})

	t.Run("BinaryBytesVerbatim", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		all := make([]byte, 0, 512)
		for i := range 256 {
			all = append(all, byte(i))
		}
		all = append(all, "\r\n\r\n---\n\xff\xfe"...)
		cases := map[string][]byte{
			"bin/all-bytes": all,
			"bin/empty":     {},
			"bin/crlf.txt":  []byte("a\r\nb\r\n"),
			"bin/no-eol":    []byte("no trailing newline"),
		}
		for key, body := range cases {
			mustPut(t, s, key, body)
			got := mustGet(t, s, key)
			if !bytes.Equal(got, body) {
				t.Errorf("Get(%q) = %q, want %q", key, got, body)
			}
		}
	})

	// DESIGN.md § Limits: a body over the 6 MB Lambda payload limit reaches
	// the sink through a presigned upload; the sink itself takes it whole.
	t.Run("LargeBodyRoundTrip", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		body := make([]byte, 7<<20)
		for i := range body {
			body[i] = byte(i*7 + i>>13)
		}
		mustPut(t, s, "big/body.bin", body)
		if got := mustGet(t, s, "big/body.bin"); !bytes.Equal(got, body) {
			t.Errorf("Get(big/body.bin) returned %d bytes differing from the %d put", len(got), len(body))
		}
	})

	t.Run("CanceledContextStoresNothing", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(canceled, "gone/k", []byte("x")); err == nil {
			t.Errorf("Put with a canceled context: nil error, want one")
		}
		if _, err := s.Get(ctx, "gone/k"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("Get after a canceled Put: %v, want %q", err, stratus.ENOTFOUND)
		}
		mustPut(t, s, "here/k", []byte("x"))
		if _, err := s.Get(canceled, "here/k"); err == nil {
			t.Errorf("Get with a canceled context: nil error, want one")
		}
	})

	// A run's work-dir files (sink.ForRun): what a run writes reads back
	// through its view by the same key, and from the sink itself at
	// sink.RunKey; its view lists work-dir keys and refuses bad ones. In a
	// sink that keeps runs apart (sink.RunKeyed), one run's file is not
	// another's, and nothing lands at the bare work-dir key (README §
	// Running on AWS).
	t.Run("RunFiles", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		a, b := sink.ForRun(s, "r-a"), sink.ForRun(s, "r-b")
		const key = "workspace/tasks/T1/ctx/plan.md"
		mustPut(t, a, key, []byte("plan of a"))
		mustPut(t, a, ".stratus/logs/T1/summary.md", []byte("summary of a"))
		if got := mustGet(t, a, key); string(got) != "plan of a" {
			t.Errorf("Get through the run's view = %q", got)
		}
		if got := mustGet(t, s, sink.RunKey(s, "r-a", key)); string(got) != "plan of a" {
			t.Errorf("Get(RunKey) = %q; want the run's file", got)
		}
		if keys, err := a.List(ctx, "workspace/tasks/T1"); err != nil || !slices.Equal(keys, []string{key}) {
			t.Errorf("List through the run's view = %q, %v; want [%s]", keys, err, key)
		}
		if n, err := a.Size(ctx, key); err != nil || n != int64(len("plan of a")) {
			t.Errorf("Size through the run's view = %d, %v", n, err)
		}
		for _, bad := range EscapingKeys {
			if err := a.Put(ctx, bad, []byte("x")); stratus.ErrorCode(err) != stratus.EINVALID {
				t.Errorf("Put(%q) through the run's view: %v; want EINVALID", bad, err)
			}
		}
		if _, ok := s.(sink.RunKeyed); !ok {
			return // one work dir: its runs take turns under the task's lock
		}
		mustPut(t, b, key, []byte("plan of b"))
		if got := mustGet(t, a, key); string(got) != "plan of a" {
			t.Errorf("run a's file after run b wrote the same key = %q; want its own", got)
		}
		if _, err := s.Get(ctx, key); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("Get of the bare work-dir key = %v; want ENOTFOUND (every run's file is under the run)", err)
		}
		if err := b.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, a, key); string(got) != "plan of a" {
			t.Errorf("run a's file after run b deleted its own = %q", got)
		}
	})

	t.Run("ConcurrentPutsNeverTear", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		const n = 8
		bodies := make([][]byte, n)
		for i := range bodies {
			bodies[i] = bytes.Repeat([]byte{byte('a' + i)}, 64<<10)
		}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				if err := s.Put(ctx, "race/k", bodies[i]); err != nil {
					t.Errorf("Put #%d: %v", i, err)
				}
			})
		}
		wg.Wait()
		got := mustGet(t, s, "race/k")
		for _, b := range bodies {
			if bytes.Equal(got, b) {
				return
			}
		}
		t.Errorf("Get after concurrent Puts returned %d bytes matching none of the bodies", len(got))
	})
}

func mustPut(t *testing.T, s sink.Sink, key string, body []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, body); err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
}

func mustGet(t *testing.T, s sink.Sink, key string) []byte {
	t.Helper()
	b, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}
