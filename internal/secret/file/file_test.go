package file_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/secret"
	"github.com/stratusflow/stratus/internal/secret/file"
	"github.com/stratusflow/stratus/internal/secret/secrettest"
)

// docs/contracts.md § Bearer authentication: the key file passes the one
// key-source conformance suite.
func TestSource_Conformance(t *testing.T) {
	secrettest.Run(t, func(t *testing.T) func() secret.Source {
		path := filepath.Join(t.TempDir(), ".stratus", "hmac.key")
		return func() secret.Source { return file.New(path) }
	})
}

// The key file is what embedded mode has always used: created 0600 on first
// use, and a key file others can read is refused.
func TestSource_KeyFileIsPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "hmac.key")
	s := file.New(path)
	key, err := s.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != string(key) {
		t.Errorf("Key did not return the file's bytes")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Key(context.Background()); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Key on a 0644 key file: %v, want EINVALID", err)
	}
}
