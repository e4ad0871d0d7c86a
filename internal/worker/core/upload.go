package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"time"

	"github.com/stratusflow/stratus/internal/sink"
)

// The limits on a worker body (a part, a final body, a result), stated
// once (docs/contracts.md § Request and response bodies; docs/security.md §
// Upload size limits; docs/architecture.md § Limits):
//
//   - Inline, in the request itself: up to Service.MaxBodyBytes. Embedded,
//     config worker.max_body_bytes (default 32 MiB); on AWS 4 MiB
//     (STRATUS_MAX_BODY_BYTES), under API Gateway's 10 MB request and
//     Lambda's 6 MB payload once base64-encoded.
//   - Through an upload (POST /v1/worker/upload, then a PUT of the bytes,
//     then the route with ?upload=<key>): up to Service.MaxUploadBytes.
//     Embedded, the same worker.max_body_bytes; on AWS
//     STRATUS_MAX_UPLOAD_BYTES (template parameter MaxUploadBytes, default
//     32 MiB).
//
// A worker client sends a body over DefaultInlineBytes through an upload
// whatever the runtime, so one worker binary behaves the same on both.
const (
	// DefaultInlineBytes is the largest body a worker client sends inline
	// (the AWS inline limit, the smallest of the runtimes').
	DefaultInlineBytes = 4 << 20
	// DefaultMaxUploadBytes is the largest body an upload may hold when
	// the service sets no bound (32 MiB, config's default
	// worker.max_body_bytes).
	DefaultMaxUploadBytes = 32 << 20
	// UploadTTL is how long an upload's PUT URL works: an upload is made
	// right after it is asked for.
	UploadTTL = 15 * time.Minute
)

// UploadRequest is the body of POST /v1/worker/upload: the size of the
// body the worker will PUT, bytes.
type UploadRequest struct {
	Bytes int64 `json:"bytes"`
}

// Upload is what POST /v1/worker/upload answers: PUT the bytes to URL (a
// presigned S3 URL, or this API's PUT /v1/worker/workspace/blob?key= with
// the credential), then name Key as ?upload= on POST /v1/worker/artifact
// or /v1/worker/submit, or as "upload" in a POST /v1/worker/result body.
type Upload struct {
	Key       string    `json:"key"`
	URL       string    `json:"url"`
	MaxBytes  int64     `json:"max_bytes"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Body is a worker body as it arrived: its bytes inline, or the key of an
// upload holding them (docs/contracts.md § Request and response bodies).
type Body struct {
	Bytes  []byte
	Upload string
}

// MaxUpload is the largest body an upload may hold, bytes.
func (s *Service) MaxUpload() int64 {
	if s.MaxUploadBytes > 0 {
		return s.MaxUploadBytes
	}
	return DefaultMaxUploadBytes
}

// MaxPendingUploads bounds the uploads an attempt holds stored and not
// yet named (each deleted once named): 8 × MaxUpload of storage at most.
const MaxPendingUploads = 8

// UploadPrefix starts every upload key of the caller's attempt: a key
// names its run, task and attempt, so it is checked without a lookup.
func UploadPrefix(c *Caller) string {
	return path.Join(StateDirName, "uploads", c.Run.ID, fmt.Sprintf("%s.a%d", c.Step.TID, c.Attempt.N)) + "."
}

// UploadKey is an upload key of the caller's attempt for a body of size
// bytes, usable until exp: <prefix><size>.<exp unix s>.<nonce>.<mac>, the
// MAC (HMAC-SHA256 with the service's key, 16 hex digits) over the rest. It
// needs no record: a key this service did not issue, one for another
// attempt, size or time, or one that reaches outside its directory is
// refused by parseUpload.
func (s *Service) UploadKey(c *Caller, size int64, exp time.Time) string {
	var nonce [4]byte
	rand.Read(nonce[:]) // two uploads of one size asked in one second differ
	body := fmt.Sprintf("%s%d.%d.%s", UploadPrefix(c), size, exp.Unix(), hex.EncodeToString(nonce[:]))
	return body + "." + UploadMAC(s.Minter.Key, body)
}

func UploadMAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// UploadSigned reports whether mac is body's MAC under the service's key
// or a previous one.
func (s *Service) UploadSigned(body, mac string) bool {
	for _, k := range append([][]byte{s.Minter.Key}, s.Minter.Previous...) {
		if hmac.Equal([]byte(UploadMAC(k, body)), []byte(mac)) {
			return true
		}
	}
	return false
}

// DropUploads deletes what is left of a run's uploads (each is deleted
// once named; a leftover was never named): an embedded run calls it when
// it ends. On AWS the bucket's expire-uploads rule does it.
func DropUploads(ctx context.Context, sk sink.Sink, runID string) error {
	keys, err := sk.List(ctx, path.Join(StateDirName, "uploads", runID))
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := sk.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
