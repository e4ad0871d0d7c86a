package awsapp

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/captoken"
)

// versions is a secret whose versions the test changes.
type versions struct {
	mu        sync.Mutex
	cur, prev []byte
	reads     int
}

func (v *versions) Versions(context.Context) ([]byte, []byte, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reads++
	return v.cur, v.prev, nil
}

// A process that read the secret before it was rotated verifies tokens of the
// new key by reading it again — at most once per KeyReloadInterval, so forged
// tokens naming unknown keys cannot make it read the secret on every request.
func TestKeyring_ReadsARotatedSecretAgainAtMostOncePerInterval(t *testing.T) {
	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	src := &versions{cur: oldKey}
	k := newKeyring(src)
	cur, prev, err := k.load(context.Background())
	if err != nil || !bytes.Equal(cur, oldKey) || prev != nil {
		t.Fatalf("load = %x, %x, %v", cur, prev, err)
	}
	m := &captoken.Minter{Key: cur, Previous: prev, Lookup: k.lookup}
	src.mu.Lock()
	src.cur, src.prev = newKey, oldKey // rotated
	src.mu.Unlock()
	tok, _, _ := (&captoken.Minter{Key: newKey}).Mint("r1", "r1.a.1", 1)
	if _, err := m.Verify(tok); err == nil {
		t.Errorf("a new-key token verified within the reload interval of the last read")
	}
	k.mu.Lock()
	k.last = time.Now().Add(-KeyReloadInterval)
	k.mu.Unlock()
	if _, err := m.Verify(tok); err != nil {
		t.Errorf("a new-key token after the interval: %v", err)
	}
	for range 5 { // a forged kid: no further read within the interval
		m.Verify(tok[:len(tok)-2] + "xx")
		k.lookup("deadbeef")
	}
	if src.reads != 2 {
		t.Errorf("the secret was read %d times, want 2 (the start, one reload)", src.reads)
	}
}
