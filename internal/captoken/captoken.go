// Package captoken mints and verifies worker capability tokens and short
// handles (docs/contracts.md § Bearer authentication;
// docs/contracts.md § Input is a fetch: "the fetch is the trust handshake").
//
// A token is `base64url(claims JSON) "." base64url(HMAC-SHA256(claims JSON))`,
// both without padding; the signature is compared in constant time. A
// handle is `wh-` plus 8 characters of [a-z0-9]; it carries nothing and maps
// server side (internal/store) to one attempt. An operator token (role
// operator, verb ReplyHuman, claim run_id) lets a human's reply reach one
// run's waiting hitl step (README.md § A human gate, step by step). This
// package does not store handles and does not decide fencing (stale attempts,
// terminal runs): the worker service does.
package captoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
)

// Role and verbs of the worker leaf capability set
// (docs/contracts.md § Routes).
const (
	RoleWorker  = "worker"
	FetchPrompt = "FetchPrompt"
	EmitOutput  = "EmitOutput"
	PostResult  = "PostResult"
)

// WorkerVerbs is the verb set minted for a worker.
var WorkerVerbs = []string{FetchPrompt, EmitOutput, PostResult}

// Role and verb of an operator token (README.md § A human gate, step by step:
// `stratus approve|reject|answer` and POST
// /v1/runs/{run_id}/nodes/{node}/hitl): it answers the human-in-the-loop
// requests of one run, and nothing a worker may do.
const (
	RoleOperator = "operator"
	ReplyHuman   = "ReplyHuman"
)

// OperatorTTL is the lifetime of an operator token: minted for one reply.
const OperatorTTL = 120 * time.Second

// DefaultTTL is the token lifetime (DESIGN.md § Limits: 600 s by default).
const DefaultTTL = 600 * time.Second

// Leeway is the clock skew tolerated on expiry.
const Leeway = 5 * time.Second

// Claims are what a token grants.
type Claims struct {
	TaskID string `json:"task_id"`
	// RunID is the run the token is for: an operator token's run, and a
	// worker token's (its task's run; docs/security.md § Handles: a worker
	// token naming no run is refused).
	RunID   string   `json:"run_id,omitempty"`
	Attempt int      `json:"attempt"`
	Role    string   `json:"role"`
	Verbs   []string `json:"verbs"`
	Exp     int64    `json:"exp"` // unix seconds
	Nonce   string   `json:"nonce"`
	// Kid names the key that signed the token (KeyID), so that two keys
	// can be valid while the HMAC secret is rotated; a token without one
	// is tried with every key the Minter knows.
	Kid string `json:"kid,omitempty"`
}

// KeyID names key in a token's kid claim: the first 8 hex digits of its
// SHA-256 (it reveals nothing of the key).
func KeyID(key []byte) string {
	sum := sha256.Sum256(key)
	return fmt.Sprintf("%x", sum[:4])
}

// Allows reports whether the claims include verb.
func (c Claims) Allows(verb string) bool { return slices.Contains(c.Verbs, verb) }

// Minter mints tokens with Key and verifies them with Key or, during a
// rotation of the HMAC secret, with a Previous key: a token names its key
// (Claims.Kid), and one naming a key the Minter does not know is given to
// Lookup, which may return it (a process that cached the secret before it was
// rotated reads it again).
type Minter struct {
	Key      []byte
	Previous [][]byte // keys still accepted, not minted with
	// Lookup, when set, returns the key named kid, or false (nil = none).
	Lookup func(kid string) ([]byte, bool)
	TTL    time.Duration    // 0 = DefaultTTL
	Now    func() time.Time // nil = time.Now
}

func (m *Minter) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// TTLOrDefault returns the effective TTL.
func (m *Minter) TTLOrDefault() time.Duration {
	if m.TTL > 0 {
		return m.TTL
	}
	return DefaultTTL
}

// Mint returns a worker token for one attempt of dispatch task tid of run
// runID: fenced to that run, as a handle is (docs/security.md § Handles).
func (m *Minter) Mint(runID, tid string, attempt int) (string, Claims, error) {
	c := Claims{RunID: runID, TaskID: tid, Attempt: attempt, Role: RoleWorker, Verbs: WorkerVerbs,
		Exp: m.now().Add(m.TTLOrDefault()).Unix(), Nonce: randomString(12, nonceAlphabet), Kid: KeyID(m.Key)}
	body, err := json.Marshal(c)
	if err != nil {
		return "", Claims{}, err
	}
	return enc(body) + "." + enc(m.sign(body)), c, nil
}

// MintOperator returns an operator token for run runID (role operator,
// verb ReplyHuman), valid for OperatorTTL.
func (m *Minter) MintOperator(runID string) (string, Claims, error) {
	c := Claims{RunID: runID, Role: RoleOperator, Verbs: []string{ReplyHuman},
		Exp: m.now().Add(OperatorTTL).Unix(), Nonce: randomString(12, nonceAlphabet), Kid: KeyID(m.Key)}
	body, err := json.Marshal(c)
	if err != nil {
		return "", Claims{}, err
	}
	return enc(body) + "." + enc(m.sign(body)), c, nil
}

// Verify checks signature and expiry and returns the claims. Errors are
// *stratus.Error EUNAUTHORIZED saying what is wrong (malformed, bad
// signature, expired).
func (m *Minter) Verify(token string) (Claims, error) {
	head, sig, ok := strings.Cut(token, ".")
	if !ok {
		return Claims{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "malformed capability token; valid: a wh- handle or <claims>.<signature>")
	}
	body, err1 := dec(head)
	mac, err2 := dec(sig)
	if err1 != nil || err2 != nil {
		return Claims{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "malformed capability token: not URL-safe base64")
	}
	var c Claims
	if err := json.Unmarshal(body, &c); err != nil {
		return Claims{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "malformed capability token claims")
	}
	verified := false
	for _, k := range m.keysFor(c.Kid) {
		if hmac.Equal(mac, signWith(k, body)) {
			verified = true
			break
		}
	}
	if !verified {
		return Claims{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "capability token signature does not verify")
	}
	if m.now().After(time.Unix(c.Exp, 0).Add(Leeway)) {
		return Claims{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "capability token expired at %s", time.Unix(c.Exp, 0).UTC().Format(time.RFC3339))
	}
	return c, nil
}

func (m *Minter) sign(body []byte) []byte { return signWith(m.Key, body) }

func signWith(key, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write(body)
	return h.Sum(nil)
}

// keysFor are the keys a token naming kid may be signed with: the one of
// Key and Previous it names (else Lookup's), or all of them for a token
// that names none.
func (m *Minter) keysFor(kid string) [][]byte {
	all := append([][]byte{m.Key}, m.Previous...)
	if kid == "" {
		return all
	}
	for _, k := range all {
		if KeyID(k) == kid {
			return [][]byte{k}
		}
	}
	if m.Lookup != nil {
		if k, ok := m.Lookup(kid); ok && KeyID(k) == kid {
			return [][]byte{k}
		}
	}
	return nil
}

func enc(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// dec is strict: a token has exactly one spelling (the unused low bits of a
// final partial character must be zero), so no second token verifies.
func dec(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }

const (
	handleAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	nonceAlphabet  = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
)

// HandlePrefix starts every short handle.
const HandlePrefix = "wh-"

// BootstrapPrefix starts a worker's one-time bootstrap value: what its
// launch carries (RunTask's environment, readable with ecs:DescribeTasks)
// in place of the handle, exchanged once for it (docs/security.md § Handles).
const BootstrapPrefix = "wb-"

// NewBootstrap returns a fresh bootstrap value: "wb-" and 24 characters
// of [a-z0-9] (124 bits).
func NewBootstrap() string { return BootstrapPrefix + randomString(24, handleAlphabet) }

// NewHandle returns a fresh short handle: "wh-" + 8 characters of [a-z0-9].
func NewHandle() string { return HandlePrefix + randomString(8, handleAlphabet) }

// IsHandle reports whether s has the shape of a short handle.
func IsHandle(s string) bool {
	if len(s) != len(HandlePrefix)+8 || !strings.HasPrefix(s, HandlePrefix) {
		return false
	}
	for _, r := range s[len(HandlePrefix):] {
		if !strings.ContainsRune(handleAlphabet, r) {
			return false
		}
	}
	return true
}

func randomString(n int, alphabet string) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// LoadOrCreateKey reads the HMAC key at path, creating a 32-byte random key
// with mode 0600 when the file does not exist. A key file readable by group
// or others is refused (EINVALID), since anyone holding it can mint tokens.
func LoadOrCreateKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil { // the state dir: docs/security.md § Files under .stratus
			return nil, err
		}
		// Write a temporary file, then link it into place: another process
		// sees either no key or the whole key, never an empty file.
		f, err := os.CreateTemp(filepath.Dir(path), ".hmac-*")
		if err != nil {
			return nil, fmt.Errorf("create HMAC key: %w", err)
		}
		tmp := f.Name()
		defer os.Remove(tmp)
		if err := f.Chmod(0o600); err != nil {
			f.Close()
			return nil, err
		}
		if _, err := f.Write(key); err != nil {
			f.Close()
			return nil, fmt.Errorf("write HMAC key: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		if err := os.Link(tmp, path); errors.Is(err, os.ErrExist) {
			return LoadOrCreateKey(path) // lost a race with another process
		} else if err != nil {
			return nil, fmt.Errorf("install HMAC key: %w", err)
		}
		return key, nil
	} else if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, stratus.Errorf(stratus.EINVALID, "HMAC key %s has mode %o; valid: 0600 (chmod 600 %s)", path, fi.Mode().Perm(), path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) < 32 {
		return nil, stratus.Errorf(stratus.EINVALID, "HMAC key %s is %d bytes; valid: at least 32", path, len(key))
	}
	return key, nil
}
