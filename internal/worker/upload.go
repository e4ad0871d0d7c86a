package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/sink"
)

// The limits on a worker body (a part, a final body, a result), stated
// once (issue 14 § 8; DESIGN.md § Limits):
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
// upload holding them (issue 14 § 8).
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

// NewUpload serves POST /v1/worker/upload (issue 14 § 8): a key of the
// caller's attempt and a URL to PUT a body of req.Bytes bytes to. Errors:
// see Authorize; ECONFLICT when fenced; EINVALID (field bytes) for a size
// that is not positive; ETOOLARGE (field bytes) over MaxUpload.
func (s *Service) NewUpload(ctx context.Context, authorization string, req UploadRequest) (Upload, error) {
	c, err := s.Authorize(ctx, authorization, captoken.EmitOutput, "")
	if err != nil {
		return Upload{}, err
	}
	if err := s.fence(ctx, c); err != nil {
		return Upload{}, err
	}
	switch max := s.MaxUpload(); {
	case req.Bytes <= 0:
		return Upload{}, stratus.FieldErrorf(stratus.EINVALID, "bytes", "%d is not a body size; valid: 1 to %d bytes", req.Bytes, max)
	case req.Bytes > max:
		return Upload{}, stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "%d bytes is over the limit of %d bytes for a body sent through an upload", req.Bytes, max)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	key := uploadPrefix(c) + hex.EncodeToString(rnd[:])
	u := Upload{Key: key, MaxBytes: s.MaxUpload(), ExpiresAt: s.now().Add(UploadTTL).UTC()}
	if p, ok := s.Sink.(sink.Presigner); ok {
		if u.URL, err = p.PresignPut(ctx, key, UploadTTL); err != nil {
			return Upload{}, err
		}
	} else {
		u.URL = blobRoute(key)
	}
	return u, nil
}

// uploadPrefix starts every upload key of the caller's attempt: a key
// names its run, task and attempt, so it is checked without a lookup.
func uploadPrefix(c *Caller) string {
	return path.Join(StateDirName, "uploads", c.Run.ID, fmt.Sprintf("%s.a%d", c.Step.TID, c.Attempt.N)) + "."
}

// isUploadKey reports whether key is one of the caller attempt's uploads.
func isUploadKey(c *Caller, key string) bool {
	p := uploadPrefix(c)
	return strings.HasPrefix(key, p) && len(key) == len(p)+16 && sink.CheckKey(key) == nil
}

// bodyOf returns the bytes of b: inline, or read (bounded by MaxUpload)
// from the caller's upload. Errors: EINVALID (field upload) for a key not
// of the caller's attempt or nothing uploaded there, or for an upload
// with an inline body beside it; ETOOLARGE for an upload over MaxUpload.
func (s *Service) bodyOf(ctx context.Context, c *Caller, b Body) ([]byte, error) {
	if b.Upload == "" {
		return b.Bytes, nil
	}
	if len(b.Bytes) > 0 {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "a request naming an upload carries no body (%d bytes came); the bytes are the upload's", len(b.Bytes))
	}
	if !isUploadKey(c, b.Upload) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "upload", "%q is not an upload of attempt %d of %s; ask POST /v1/worker/upload for one", b.Upload, c.Attempt.N, c.Step.TID)
	}
	body, err := s.Sink.GetMax(ctx, b.Upload, s.MaxUpload())
	switch stratus.ErrorCode(err) {
	case "":
		return body, nil
	case stratus.ENOTFOUND:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "upload", "nothing was uploaded to %q; PUT the body to the upload's url first", b.Upload)
	case stratus.ETOOLARGE:
		return nil, stratus.FieldErrorf(stratus.ETOOLARGE, "upload", "the upload %q is over the limit of %d bytes for a body sent through an upload", b.Upload, s.MaxUpload())
	}
	return nil, err
}

// settleUpload deletes b's upload once the request naming it is settled:
// its bytes are recorded (err nil), or it was refused for good (a 4xx: the
// worker asks for a new upload to try again). After a transient failure
// (5xx) it stays, for the client's retry of the same request.
func (s *Service) settleUpload(ctx context.Context, c *Caller, b Body, err error) {
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
	if b.Upload == "" || !isUploadKey(c, b.Upload) {
		return // never another attempt's, never a key outside uploads
	}
	if err := s.Sink.Delete(ctx, b.Upload); err != nil {
		s.warnf("%s: delete upload %s: %v", c.Step.StepRef, b.Upload, err)
	}
}
