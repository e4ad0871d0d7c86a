package secrettest

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/secret"
)

// Backing makes one fresh backing store (a key file path, a secret) and
// returns a constructor of Sources over it; each call of the constructor
// is a new Source, as a new process would build.
type Backing func(t *testing.T) func() secret.Source

// Run runs the conformance suite; subtests run in parallel, each with its
// own backing store.
func Run(t *testing.T, newBacking Backing) {
	t.Helper()
	ctx := context.Background()

	t.Run("KeyHasAtLeastMinKeyBytes", func(t *testing.T) {
		t.Parallel()
		key := mustKey(t, newBacking(t)())
		if len(key) < secret.MinKeyBytes {
			t.Errorf("key is %d bytes, want at least %d", len(key), secret.MinKeyBytes)
		}
	})

	t.Run("SameKeyOnEveryCall", func(t *testing.T) {
		t.Parallel()
		s := newBacking(t)()
		first := mustKey(t, s)
		for range 3 {
			if k := mustKey(t, s); !bytes.Equal(k, first) {
				t.Fatalf("Key changed between calls")
			}
		}
	})

	t.Run("SourcesOverOneBackingShareTheKey", func(t *testing.T) {
		t.Parallel()
		open := newBacking(t)
		minting, verifying := open(), open()
		m := &captoken.Minter{Key: mustKey(t, minting)}
		tok, _, err := m.Mint("r1", "tid-1", 1)
		if err != nil {
			t.Fatal(err)
		}
		v := &captoken.Minter{Key: mustKey(t, verifying)}
		if _, err := v.Verify(tok); err != nil {
			t.Errorf("a token minted with one Source does not verify with another over the same backing: %v", err)
		}
	})

	t.Run("DistinctBackingsDistinctKeys", func(t *testing.T) {
		t.Parallel()
		a, b := mustKey(t, newBacking(t)()), mustKey(t, newBacking(t)())
		if bytes.Equal(a, b) {
			t.Errorf("two fresh backing stores gave the same key")
		}
	})

	t.Run("ConcurrentCallersAgree", func(t *testing.T) {
		t.Parallel()
		open := newBacking(t)
		const n = 8
		keys := make([][]byte, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				s := open()
				k, err := s.Key(ctx)
				if err != nil {
					t.Errorf("Key #%d: %v", i, err)
				}
				keys[i] = k
			})
		}
		wg.Wait()
		for i := 1; i < n; i++ {
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("concurrent first calls over one backing gave different keys (#0 and #%d)", i)
			}
		}
	})

	t.Run("ReturnedSliceIsTheCallers", func(t *testing.T) {
		t.Parallel()
		s := newBacking(t)()
		k := mustKey(t, s)
		want := bytes.Clone(k)
		for i := range k {
			k[i] ^= 0xff
		}
		if got := mustKey(t, s); !bytes.Equal(got, want) {
			t.Errorf("changing the returned key changed what Key returns next")
		}
	})
}

func mustKey(t *testing.T, s secret.Source) []byte {
	t.Helper()
	k, err := s.Key(context.Background())
	if err != nil {
		t.Fatalf("Key: %v", err)
	}
	return k
}
