package secret_test

import (
	"bytes"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/secret"
)

// docs/contracts.md § Bearer authentication: an HMAC key shorter than 32
// bytes is refused, naming where it came from.
func TestCheckKey_RefusesKeysShorterThanMinKeyBytes(t *testing.T) {
	t.Parallel()
	if err := secret.CheckKey(bytes.Repeat([]byte{1}, secret.MinKeyBytes), "k"); err != nil {
		t.Errorf("CheckKey(32 bytes) = %v, want nil", err)
	}
	err := secret.CheckKey(bytes.Repeat([]byte{1}, secret.MinKeyBytes-1), "in secret \"s\"")
	if stratus.ErrorCode(err) != stratus.EINVALID || !bytes.Contains([]byte(err.Error()), []byte(`secret "s"`)) {
		t.Errorf("CheckKey(31 bytes) = %v, want EINVALID naming the secret", err)
	}
}
