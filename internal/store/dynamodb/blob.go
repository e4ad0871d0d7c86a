package dynamodb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// BlobKey is the Blobs key of a spilled body whose SHA-256 is sum (hex):
// "blobs/<sum[:2]>/<sum>", content-addressed like the SQLite store's blob
// files, so writing one twice (a retried append) stores the same bytes.
func BlobKey(sum string) string { return "blobs/" + sum[:2] + "/" + sum }

// Suffixes of the attributes that point at a spilled body called name:
// name+suffixBlob is its BlobKey, name+suffixSHA256 its SHA-256 (hex) and
// name+suffixSize its length.
const (
	suffixBlob   = "_blob"
	suffixSHA256 = "_sha256"
	suffixSize   = "_size"
)

// spill returns the attributes that hold body under name: the body itself
// (binary, or text when asText) when it is at most limit bytes,
// otherwise a pointer to it in Blobs, written first. The attributes of the
// other form are nil, so an update that switches form removes them.
func (s *Store) spill(ctx context.Context, name string, body []byte, limit int, asText bool) (map[string]av, error) {
	m := map[string]av{name: nil, name + suffixBlob: nil, name + suffixSHA256: nil, name + suffixSize: nil}
	if len(body) <= limit {
		if asText {
			m[name] = text(string(body))
		} else {
			m[name] = bin(body)
		}
		return m, nil
	}
	h := sha256.Sum256(body)
	sum := hex.EncodeToString(h[:])
	if err := s.blobs.Put(ctx, BlobKey(sum), body); err != nil {
		return nil, fmt.Errorf("spill %d-byte %s to blob %s: %w", len(body), name, BlobKey(sum), err)
	}
	m[name+suffixBlob], m[name+suffixSHA256], m[name+suffixSize] = str(BlobKey(sum)), str(sum), num(int64(len(body)))
	return m, nil
}

// unspill reads the body called name back from it: inline, or from Blobs
// checked against its SHA-256.
func (s *Store) unspill(ctx context.Context, it item, name string) ([]byte, error) {
	ref := it.str(name + suffixBlob)
	if ref == "" {
		if b := it.bytes(name); b != nil {
			return b, nil
		}
		return []byte(it.str(name)), nil
	}
	b, err := s.blobs.Get(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("read spilled %s from blob %s: %w", name, ref, err)
	}
	h := sha256.Sum256(b)
	if want := it.str(name + suffixSHA256); !strings.EqualFold(hex.EncodeToString(h[:]), want) {
		return nil, fmt.Errorf("spilled %s in blob %s does not match its SHA-256 %s", name, ref, want)
	}
	return b, nil
}
