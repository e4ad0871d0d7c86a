package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
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

// uploadPrefix starts every upload key of the caller's attempt: a key
// names its run, task and attempt, so it is checked without a lookup.
func uploadPrefix(c *Caller) string {
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
	body := fmt.Sprintf("%s%d.%d.%s", uploadPrefix(c), size, exp.Unix(), hex.EncodeToString(nonce[:]))
	return body + "." + uploadMAC(s.Minter.Key, body)
}

func uploadMAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// uploadRef is what a valid upload key says.
type uploadRef struct {
	size int64
	exp  time.Time
}

// parseUpload checks key as an upload of the caller's attempt. Errors:
// EINVALID (field) for a key not of the caller's attempt or not issued by
// this service (under its key or a previous one, during a rotation).
// Whether it expired is liveUpload's check.
func (s *Service) parseUpload(c *Caller, key, field string) (uploadRef, error) {
	bad := func(why string) (uploadRef, error) {
		return uploadRef{}, stratus.FieldErrorf(stratus.EINVALID, field, "%q %s; ask POST /v1/worker/upload for one", key, why)
	}
	p := uploadPrefix(c)
	rest, ok := strings.CutPrefix(key, p)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 4 || sink.CheckKey(key) != nil {
		return bad(fmt.Sprintf("is not an upload of attempt %d of %s", c.Attempt.N, c.Step.TID))
	}
	size, err1 := strconv.ParseInt(parts[0], 10, 64)
	unix, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || size <= 0 || !s.uploadSigned(strings.TrimSuffix(key, "."+parts[3]), parts[3]) {
		return bad("was not issued by this API")
	}
	return uploadRef{size: size, exp: time.Unix(unix, 0).UTC()}, nil
}

// liveUpload is parseUpload of a key that has not expired. Errors:
// parseUpload's; EINVALID (field) for an expired key.
func (s *Service) liveUpload(c *Caller, key, field string) (uploadRef, error) {
	ref, err := s.parseUpload(c, key, field)
	if err == nil && s.NowUTC().After(ref.exp) {
		err = stratus.FieldErrorf(stratus.EINVALID, field, "%q expired at %s; ask POST /v1/worker/upload for another", key, ref.exp.Format(time.RFC3339))
	}
	return ref, err
}

// uploadSigned reports whether mac is body's MAC under the service's key
// or a previous one.
func (s *Service) uploadSigned(body, mac string) bool {
	for _, k := range append([][]byte{s.Minter.Key}, s.Minter.Previous...) {
		if hmac.Equal([]byte(uploadMAC(k, body)), []byte(mac)) {
			return true
		}
	}
	return false
}

// PendingUploads refuses (ECONFLICT) one more upload of the caller's
// attempt when it holds MaxPendingUploads stored and not yet named, key
// (the one being stored, when it is) aside.
func (s *Service) PendingUploads(ctx context.Context, c *Caller, key string) error {
	keys, err := s.Sink.List(ctx, path.Dir(uploadPrefix(c)))
	if err != nil {
		return err
	}
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, uploadPrefix(c)) && k != key {
			n++
		}
	}
	if n >= MaxPendingUploads {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of %s has %d uploads stored and not yet named (at most %d); name them first", c.Attempt.N, c.Step.TID, n, MaxPendingUploads)
	}
	return nil
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

// BodyOf returns the bytes of b: inline, or read (bounded by MaxUpload)
// from the caller's upload. Errors: EINVALID (field upload) for a key not
// of the caller's attempt or nothing uploaded there, or for an upload
// with an inline body beside it; ETOOLARGE for an upload over MaxUpload.
func (s *Service) BodyOf(ctx context.Context, c *Caller, b Body) ([]byte, error) {
	if b.Upload == "" {
		return b.Bytes, nil
	}
	if len(b.Bytes) > 0 {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "a request naming an upload carries no body (%d bytes came); the bytes are the upload's", len(b.Bytes))
	}
	ref, err := s.liveUpload(c, b.Upload, "upload")
	if err != nil {
		return nil, err
	}
	body, err := s.Sink.GetMax(ctx, b.Upload, min(ref.size, s.MaxUpload()))
	switch stratus.ErrorCode(err) {
	case "":
		if int64(len(body)) != ref.size {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "upload", "the upload holds %d bytes; it was asked for %d", len(body), ref.size)
		}
		return body, nil
	case stratus.ENOTFOUND:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "upload", "nothing was uploaded to %q; PUT the body to the upload's url first", b.Upload)
	case stratus.ETOOLARGE:
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "upload", "the upload %q holds more than the %d bytes it was asked for", b.Upload, ref.size)
	}
	return nil, err
}

// CheckUploadPut refuses a PUT of body to key (the blob route, for a
// sink that does not presign) unless key is a live upload of the
// caller's attempt asked for exactly len(body) bytes. Errors: EINVALID
// (field key or body).
func (s *Service) CheckUploadPut(c *Caller, key string, body []byte) error {
	ref, err := s.liveUpload(c, key, "key")
	if err != nil {
		return err
	}
	if int64(len(body)) != ref.size {
		return stratus.FieldErrorf(stratus.EINVALID, "body", "%d bytes came; the upload was asked for %d", len(body), ref.size)
	}
	return nil
}

// SettleUpload deletes b's upload once the request naming it is settled:
// its bytes are recorded (err nil), or it was refused for good (a 4xx: the
// worker asks for a new upload to try again). After a transient failure
// (5xx) it stays, for the client's retry of the same request.
func (s *Service) SettleUpload(ctx context.Context, c *Caller, b Body, err error) {
	if b.Upload == "" {
		return
	}
	switch stratus.ErrorCode(err) {
	case stratus.EINTERNAL, stratus.ENOSPACE:
		return
	}
	s.dropUpload(ctx, c, b)
}

// dropUpload deletes b's upload once its bytes are stored elsewhere (the
// store's tail, the projection); a failure is warned about — the bucket's
// expiry rule removes it later.
func (s *Service) dropUpload(ctx context.Context, c *Caller, b Body) {
	if _, err := s.parseUpload(c, b.Upload, "upload"); err != nil {
		return // never another attempt's, never a key this API did not issue
	}
	if err := s.Sink.Delete(ctx, b.Upload); err != nil {
		s.WarnCall(c, "%s: delete upload %s: %v", c.Step.StepRef, b.Upload, err)
	}
}
