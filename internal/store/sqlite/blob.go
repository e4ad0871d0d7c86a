package sqlite

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SpillBytes is the body size above which an output body is stored in a blob
// file beside the database rather than in its row (docs/architecture.md §
// Limits: the DynamoDB store spills large bodies to S3 the same way). Blob
// files are content-addressed, <db dir>/blobs/<sha256[:2]>/<sha256>, written
// once, never changed.
var SpillBytes = 16 << 10

func (s *Store) blobPath(sum string) string {
	return filepath.Join(filepath.Dir(s.path), "blobs", sum[:2], sum)
}

// putBlob stores body under its SHA-256 and returns the hex digest. A blob
// that exists already is kept (same name, same bytes).
func (s *Store) putBlob(body []byte) (string, error) {
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	p := s.blobPath(sum)
	if _, err := os.Stat(p); err == nil {
		return sum, nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("blob dir: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return "", fmt.Errorf("blob: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(body); err != nil {
		f.Close()
		return "", fmt.Errorf("blob: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("blob: %w", err)
	}
	if err := os.Link(f.Name(), p); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("blob: %w", err)
	}
	return sum, nil
}

// getBlob reads a blob and checks it against its digest.
func (s *Store) getBlob(sum string) ([]byte, error) {
	if len(sum) != 64 {
		return nil, fmt.Errorf("blob reference %q is not a SHA-256", sum)
	}
	b, err := os.ReadFile(s.blobPath(sum))
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", sum, err)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
		return nil, fmt.Errorf("blob %s does not match its digest", sum)
	}
	return b, nil
}
