package captoken

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// docs/contracts.md § Bearer authentication: HMAC sig + TTL verified,
// self-contained.
func TestVerify_RoundTripAndRejections(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := &Minter{Key: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }}
	tok, c, err := m.Mint("r1", "t-1", 2)
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Verify(tok)
	if err != nil || got.TaskID != "t-1" || got.Attempt != 2 || !got.Allows(EmitOutput) || got.Nonce != c.Nonce {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	if strings.ContainsAny(tok, "+/=") {
		t.Errorf("token %q is not URL-safe base64 without padding", tok)
	}
	other := &Minter{Key: []byte("ffffffffffffffffffffffffffffffff"), Now: m.Now}
	for name, bad := range map[string]string{
		"no dot":         "abc",
		"bad base64":     "!!.!!",
		"other key":      func() string { s, _, _ := other.Mint("r1", "t-1", 2); return s }(),
		"tampered claim": enc([]byte(`{"task_id":"t-2"}`)) + tok[strings.Index(tok, "."):],
	} {
		if _, err := m.Verify(bad); stratus.ErrorCode(err) != stratus.EUNAUTHORIZED {
			t.Errorf("%s: err = %v, want EUNAUTHORIZED", name, err)
		}
	}
	now = now.Add(DefaultTTL + Leeway + time.Second)
	if _, err := m.Verify(tok); stratus.ErrorCode(err) != stratus.EUNAUTHORIZED || !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired: err = %v", err)
	}
}

func TestNewHandle_Shape(t *testing.T) {
	for range 100 {
		if h := NewHandle(); !IsHandle(h) {
			t.Fatalf("NewHandle() = %q", h)
		}
	}
	for _, bad := range []string{"", "wh-", "wh-ABCDEFGH", "xx-abcdefgh", "wh-abcdefghi"} {
		if IsHandle(bad) {
			t.Errorf("IsHandle(%q) = true", bad)
		}
	}
}

func TestLoadOrCreateKey_Mode0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k", "hmac.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil || len(k1) != 32 {
		t.Fatalf("create: %v", err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %o", fi.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("reload: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadOrCreateKey(path); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("0644 key: err = %v", err)
	}
}

// A token has one spelling: a respelling that decodes to the same bytes
// (unused low bits of the last character set) does not verify.
func TestVerify_NonCanonicalSpellingRefused(t *testing.T) {
	m := &Minter{Key: []byte("0123456789abcdef0123456789abcdef")}
	tok, _, _ := m.Mint("r1", "t-1", 1)
	last := tok[len(tok)-1]
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, last)
	bad := tok[:len(tok)-1] + string(alphabet[i^1])
	if _, err := m.Verify(bad); err == nil {
		t.Fatalf("respelled token %q verifies", bad)
	}
}

// Rotating the HMAC secret. A token names its key (kid); a Minter verifies
// with Key or a Previous key, so tokens minted before a rotation keep working
// while both are held; a token naming a key it does not know goes to Lookup
// (a process that cached the old secret reads the new one); a key it does not
// hold at all refuses the token.
func TestVerify_RotationKeepsBothKeysValid(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	before := &Minter{Key: oldKey}
	tokOld, c, err := before.Mint("r1", "r1.a.1", 1)
	if err != nil || c.Kid != KeyID(oldKey) || len(c.Kid) != 8 {
		t.Fatalf("Mint: %+v, %v; want kid %s", c, err, KeyID(oldKey))
	}
	after := &Minter{Key: newKey, Previous: [][]byte{oldKey}}
	tokNew, _, _ := after.Mint("r1", "r1.a.1", 1)
	if _, err := after.Verify(tokOld); err != nil {
		t.Errorf("a token minted before the rotation: %v", err)
	}
	if _, err := after.Verify(tokNew); err != nil {
		t.Errorf("a token minted after: %v", err)
	}
	// A process still on the old key meets a token of the new one.
	lookups := 0
	stale := &Minter{Key: oldKey, Lookup: func(kid string) ([]byte, bool) {
		lookups++
		return newKey, kid == KeyID(newKey)
	}}
	if _, err := stale.Verify(tokNew); err != nil || lookups != 1 {
		t.Errorf("a stale process verifying a new token: %v after %d lookups", err, lookups)
	}
	if _, err := before.Verify(tokNew); stratus.ErrorCode(err) != stratus.EUNAUTHORIZED {
		t.Errorf("a key the Minter does not hold verified a token: %v", err)
	}
	// A token without kid (minted before kids) is tried with every key.
	legacy := mintWithoutKid(t, oldKey)
	if _, err := after.Verify(legacy); err != nil {
		t.Errorf("a token without kid: %v", err)
	}
}

func mintWithoutKid(t *testing.T, key []byte) string {
	t.Helper()
	body, _ := json.Marshal(Claims{TaskID: "r1.a.1", Attempt: 1, Role: RoleWorker, Verbs: WorkerVerbs, Exp: time.Now().Add(time.Minute).Unix(), Nonce: "n"})
	return enc(body) + "." + enc(signWith(key, body))
}
