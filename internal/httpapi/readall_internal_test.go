package httpapi

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads what io.ReadAll reads, whatever size announces: the exact
// length, less, more, nothing, and in small pieces.
func TestReadAll_ReadsTheWholeBodyWhateverItsAnnouncedSize(t *testing.T) {
	t.Parallel()
	body := strings.Repeat("0123456789abcdef", 4097)
	for _, size := range []int64{-1, 0, 1, 100, int64(len(body)) - 1, int64(len(body)), int64(len(body)) + 1, 1 << 20} {
		for _, r := range []io.Reader{strings.NewReader(body), iotest.OneByteReader(strings.NewReader(body)), iotest.HalfReader(strings.NewReader(body))} {
			got, err := readAll(r, size)
			if err != nil || string(got) != body {
				t.Errorf("size %d: read %d bytes, %v; want the %d-byte body", size, len(got), err, len(body))
			}
		}
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10); err != io.ErrUnexpectedEOF {
		t.Errorf("a failing reader: %v; want its error", err)
	}
}

// A body of the announced size is read into one buffer of that size:
// io.ReadAll grew its buffer from 512 bytes, allocating twice a 64 KiB
// body's size on the way.
func TestReadAll_AnnouncedSizeIsAllocatedOnce(t *testing.T) {
	body := bytes.Repeat([]byte("- plan the lanes\n"), 64<<10/17)
	const calls = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		if _, err := readAll(bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > uint64(len(body))+8<<10 {
		t.Errorf("reading a %d-byte body allocated %d bytes a call; want about its size", len(body), per)
	}
}
