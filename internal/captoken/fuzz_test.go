package captoken_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
)

var fuzzKey = []byte("0123456789abcdef0123456789abcdef")

// fuzzNow is the fixed clock of FuzzVerify, so a fuzz input means the same
// thing on every run.
var fuzzNow = time.Unix(1_800_000_000, 0)

// signed returns the token the key holder writes for claims body: the one
// canonical encoding (docs/contracts.md § Bearer authentication).
func signed(body []byte) string {
	h := hmac.New(sha256.New, fuzzKey)
	h.Write(body)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(body) + "." + enc.EncodeToString(h.Sum(nil))
}

// minted reports whether tok is exactly what the key holder writes for some
// claims body (canonical base64 of both halves, a matching signature).
func minted(tok string) bool {
	head, _, ok := strings.Cut(tok, ".")
	if !ok {
		return false
	}
	body, err := base64.RawURLEncoding.DecodeString(head)
	return err == nil && signed(body) == tok
}

func wantUnauthorized(t *testing.T, tok string, err error) {
	t.Helper()
	var se *stratus.Error
	if !errors.As(err, &se) || se.Code != stratus.EUNAUTHORIZED || se.Field != "Authorization" {
		t.Fatalf("Verify(%q) error = %#v; want *stratus.Error EUNAUTHORIZED Field Authorization", tok, err)
	}
}

// docs/contracts.md § Bearer authentication: Verify never panics on any
// string, refuses (EUNAUTHORIZED) everything the key holder did not mint, and
// refuses a minted token with any one byte changed. IsHandle accepts exactly
// "wh-" + 8 of [a-z0-9].
func FuzzVerify(f *testing.F) {
	claims, _ := json.Marshal(captoken.Claims{TaskID: "r1.planning.1", Attempt: 1, Role: captoken.RoleWorker,
		Verbs: captoken.WorkerVerbs, Exp: fuzzNow.Add(time.Hour).Unix(), Nonce: "abcdefghijkl"})
	good := signed(claims)
	expired, _ := json.Marshal(captoken.Claims{TaskID: "t", Exp: fuzzNow.Add(-time.Hour).Unix()})
	for _, s := range []string{"", ".", "..", "abc", "!!.!!", "a.b.c", "wh-abcdefgh", "wh-ABCDEFGH", "e30.", ".e30",
		good, good + "x", good[:len(good)-1], strings.Replace(good, ".", "..", 1), signed(expired), signed([]byte("null")),
		signed([]byte("{")), signed(nil)} {
		f.Add(s, "r1.planning.1", 1, uint16(0), byte(1))
	}
	// The signature's 43rd character carries 2 unused bits: flip one.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	alias := good[:len(good)-1] + string(alphabet[strings.IndexByte(alphabet, good[len(good)-1])^1])
	f.Add(alias, "t\xff", -1, uint16(len(good)-1), byte(1))
	f.Add(good, "", 0, uint16(strings.Index(good, ".")-1), byte(2))

	m := &captoken.Minter{Key: fuzzKey, Now: func() time.Time { return fuzzNow }}
	f.Fuzz(func(t *testing.T, s, tid string, attempt int, pos uint16, xor byte) {
		// Any string: no panic; only a token the key holder wrote verifies.
		c, err := m.Verify(s)
		if err != nil {
			wantUnauthorized(t, s, err)
		} else if !minted(s) {
			t.Fatalf("Verify(%q) = %+v; the key holder never wrote this token", s, c)
		}

		isHandle := len(s) == 11 && strings.HasPrefix(s, "wh-") &&
			strings.Trim(s[3:], "abcdefghijklmnopqrstuvwxyz0123456789") == ""
		if captoken.IsHandle(s) != isHandle {
			t.Fatalf("IsHandle(%q) = %v, want %v", s, !isHandle, isHandle)
		}

		// A freshly minted token verifies to its claims.
		tok, mc, err := m.Mint("r1", tid, attempt)
		if err != nil {
			t.Fatalf("Mint(%q, %d): %v", tid, attempt, err)
		}
		got, err := m.Verify(tok)
		if err != nil {
			t.Fatalf("Verify(Mint(%q, %d)) = %v", tid, attempt, err)
		}
		if got.Attempt != attempt || got.Role != captoken.RoleWorker || !slices.Equal(got.Verbs, captoken.WorkerVerbs) ||
			got.Exp != mc.Exp || got.Nonce != mc.Nonce || (utf8.ValidString(tid) && got.TaskID != tid) {
			t.Fatalf("Verify(Mint(%q, %d)) = %+v, minted %+v", tid, attempt, got, mc)
		}

		// Any one byte changed: refused.
		if xor == 0 {
			xor = 1
		}
		b := []byte(tok)
		i := int(pos) % len(b)
		b[i] ^= xor
		bad := string(b)
		if c, err := m.Verify(bad); err == nil {
			t.Fatalf("byte %d of minted %q changed to %q: Verify = %+v, want refused", i, tok, bad, c)
		} else {
			wantUnauthorized(t, bad, err)
		}
	})
}
