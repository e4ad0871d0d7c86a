package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func benchStore(b *testing.B) *Store {
	b.Helper()
	s, err := Open(filepath.Join(b.TempDir(), "stratus.db"))
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkAppendOutput measures appending artifacts to one attempt's
// tail (the hot path of a worker staging parts), serially and from
// parallel producers each with its own attempt.
func BenchmarkAppendOutput(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10} {
		body := make([]byte, size)
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			e := stratus.OutputEvent{TID: "tid-1", Attempt: 1, Kind: stratus.OutputArtifact, Name: "part.md", Body: body, At: time.Now()}
			b.SetBytes(int64(size))
			for b.Loop() {
				if _, err := s.AppendOutput(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("body=%dKiB/parallel", size>>10), func(b *testing.B) {
			s := benchStore(b)
			ctx := context.Background()
			var producer atomic.Int64
			b.SetBytes(int64(size))
			b.RunParallel(func(pb *testing.PB) {
				e := stratus.OutputEvent{TID: fmt.Sprintf("tid-%d", producer.Add(1)), Attempt: 1,
					Kind: stratus.OutputArtifact, Name: "part.md", Body: body, At: time.Now()}
				for pb.Next() {
					if _, err := s.AppendOutput(ctx, e); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// BenchmarkGetHandle measures resolving a worker handle, which every
// /v1/worker/* request does before anything else.
func BenchmarkGetHandle(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	const handles = 1000
	for i := range handles {
		h := stratus.Handle{Handle: fmt.Sprintf("wh-%08d", i), TID: fmt.Sprintf("tid-%d", i), Attempt: 1, ExpiresAt: time.Now().Add(10 * time.Minute)}
		if err := s.PutHandle(ctx, h); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := s.GetHandle(ctx, fmt.Sprintf("wh-%08d", i%handles)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("parallel", func(b *testing.B) {
		var n atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := s.GetHandle(ctx, fmt.Sprintf("wh-%08d", n.Add(1)%handles)); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
