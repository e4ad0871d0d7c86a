package upload

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// uploadRef is what a valid upload key says.
type uploadRef struct {
	size int64
	exp  time.Time
}

// parseUpload checks key as an upload of the caller's attempt. Errors:
// EINVALID (field) for a key not of the caller's attempt or not issued by
// this service (under its key or a previous one, during a rotation).
// Whether it expired is liveUpload's check.
func parseUpload(s *core.Service, c *core.Caller, key, field string) (uploadRef, error) {
	bad := func(why string) (uploadRef, error) {
		return uploadRef{}, stratus.FieldErrorf(stratus.EINVALID, field, "%q %s; ask POST /v1/worker/upload for one", key, why)
	}
	p := core.UploadPrefix(c)
	rest, ok := strings.CutPrefix(key, p)
	parts := strings.Split(rest, ".")
	if !ok || len(parts) != 4 || sink.CheckKey(key) != nil {
		return bad(fmt.Sprintf("is not an upload of attempt %d of %s", c.Attempt.N, c.Step.TID))
	}
	size, err1 := strconv.ParseInt(parts[0], 10, 64)
	unix, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil || size <= 0 || !s.UploadSigned(strings.TrimSuffix(key, "."+parts[3]), parts[3]) {
		return bad("was not issued by this API")
	}
	return uploadRef{size: size, exp: time.Unix(unix, 0).UTC()}, nil
}

// liveUpload is parseUpload of a key that has not expired. Errors:
// parseUpload's; EINVALID (field) for an expired key.
func liveUpload(s *core.Service, c *core.Caller, key, field string) (uploadRef, error) {
	ref, err := parseUpload(s, c, key, field)
	if err == nil && s.NowUTC().After(ref.exp) {
		err = stratus.FieldErrorf(stratus.EINVALID, field, "%q expired at %s; ask POST /v1/worker/upload for another", key, ref.exp.Format(time.RFC3339))
	}
	return ref, err
}

// PendingUploads refuses (ECONFLICT) one more upload of the caller's
// attempt when it holds MaxPendingUploads stored and not yet named, key
// (the one being stored, when it is) aside.
func PendingUploads(ctx context.Context, s *core.Service, c *core.Caller, key string) error {
	keys, err := s.Sink.List(ctx, path.Dir(core.UploadPrefix(c)))
	if err != nil {
		return err
	}
	n := 0
	for _, k := range keys {
		if strings.HasPrefix(k, core.UploadPrefix(c)) && k != key {
			n++
		}
	}
	if n >= core.MaxPendingUploads {
		return stratus.Errorf(stratus.ECONFLICT, "attempt %d of %s has %d uploads stored and not yet named (at most %d); name them first", c.Attempt.N, c.Step.TID, n, core.MaxPendingUploads)
	}
	return nil
}

// BodyOf returns the bytes of b: inline, or read (bounded by MaxUpload)
// of the caller's attempt or nothing uploaded there, or for an upload
// with an inline body beside it; ETOOLARGE for an upload over MaxUpload.
func BodyOf(ctx context.Context, s *core.Service, c *core.Caller, b core.Body) ([]byte, error) {
	if b.Upload == "" {
		return b.Bytes, nil
	}
	if len(b.Bytes) > 0 {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "body", "a request naming an upload carries no body (%d bytes came); the bytes are the upload's", len(b.Bytes))
	}
	ref, err := liveUpload(s, c, b.Upload, "upload")
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
func CheckUploadPut(s *core.Service, c *core.Caller, key string, body []byte) error {
	ref, err := liveUpload(s, c, key, "key")
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
func SettleUpload(ctx context.Context, s *core.Service, c *core.Caller, b core.Body, err error) {
	if b.Upload == "" {
		return
	}
	switch stratus.ErrorCode(err) {
	case stratus.EINTERNAL, stratus.ENOSPACE:
		return
	}
	dropUpload(ctx, s, c, b)
}

// dropUpload deletes b's upload once its bytes are stored elsewhere (the
// store's tail, the projection); a failure is warned about — the bucket's
// expiry rule removes it later.
func dropUpload(ctx context.Context, s *core.Service, c *core.Caller, b core.Body) {
	if _, err := parseUpload(s, c, b.Upload, "upload"); err != nil {
		return // never another attempt's, never a key this API did not issue
	}
	if err := s.Sink.Delete(ctx, b.Upload); err != nil {
		s.WarnCall(c, "%s: delete upload %s: %v", c.Step.StepRef, b.Upload, err)
	}
}
