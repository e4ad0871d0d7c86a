package secret

import (
	"context"

	"github.com/stratusflow/stratus"
)

// MinKeyBytes is the shortest HMAC key a Source returns: 32 bytes, the
// SHA-256 block of security captoken's HMAC-SHA256 relies on (and what
// captoken.LoadOrCreateKey demands of a key file).
const MinKeyBytes = 32

// Source yields the HMAC key capability tokens are signed with.
//
// Key returns the same bytes on every call and to every Source over the
// same backing store (a file path, a secret id), so a token minted by one
// process verifies in another. The slice is the caller's: changing it does
// not change what the next call returns. Implementations are safe for
// concurrent use. Errors are *stratus.Error EINVALID for a stored key that
// is malformed or shorter than MinKeyBytes, ENOTFOUND for a backing store
// that does not exist (where it is not created on demand), and wrapped
// infrastructure errors otherwise.
type Source interface {
	Key(ctx context.Context) ([]byte, error)
}

// CheckKey reports whether key is long enough to sign tokens with; where
// names the backing store in the error (a path, a secret id). The error is
// a *stratus.Error EINVALID stating the length and what is valid.
func CheckKey(key []byte, where string) error {
	if len(key) < MinKeyBytes {
		return stratus.Errorf(stratus.EINVALID, "HMAC key %s is %d bytes; valid: at least %d", where, len(key), MinKeyBytes)
	}
	return nil
}
