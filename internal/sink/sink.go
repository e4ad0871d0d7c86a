package sink

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stratusflow/stratus"
)

// Sink stores byte strings under keys.
//
// A key is a slash-separated relative path ("workspace/tasks/T1/ctx/plan.md")
// that satisfies CheckKey. Implementations are safe for concurrent use; a
// Put is atomic (a concurrent or later Get sees the old bytes or the new
// ones, never a mix) and the last Put of a key wins.
type Sink interface {
	// Put stores body under key, replacing what was there. Errors:
	// *stratus.Error EINVALID (Field "key") for a key CheckKey refuses;
	// a wrapped I/O error otherwise.
	Put(ctx context.Context, key string, body []byte) error
	// Get returns the bytes stored under key, verbatim. Errors:
	// *stratus.Error ENOTFOUND when nothing is stored under key, EINVALID
	// (Field "key") for a key CheckKey refuses; a wrapped I/O error otherwise.
	Get(ctx context.Context, key string) ([]byte, error)
	// GetMax is Get of a body that may be at most max bytes: a larger one
	// is refused with *stratus.Error ETOOLARGE (Field "bytes") having read
	// at most max+1 of its bytes, so memory stays bounded whatever a
	// holder of a presigned URL stored there. Other errors as Get's.
	GetMax(ctx context.Context, key string, max int64) ([]byte, error)
	// Size returns the length in bytes of what is stored under key,
	// without reading it: how the worker API checks a step bundle a
	// worker stored through a URL against its limit before it uses it
	// (docs/security.md § Upload size limits). Errors as Get's.
	Size(ctx context.Context, key string) (int64, error)
	// Delete removes what is stored under key; nothing stored there is not
	// an error. Errors: *stratus.Error EINVALID (Field "key") for a key
	// CheckKey refuses; a wrapped I/O error otherwise.
	Delete(ctx context.Context, key string) error
	// List returns every key stored under dir (the keys that start with
	// dir+"/", at any depth), sorted; none is not an error. Errors:
	// *stratus.Error EINVALID (Field "key") for a dir CheckKey refuses; a
	// wrapped I/O error otherwise.
	List(ctx context.Context, dir string) ([]string, error)
}

// Presigner is a sink whose keys a holder of a URL may read or write with
// plain HTTP and no credentials (S3 presigned URLs): how a worker on AWS
// moves bodies larger than the worker API carries (DESIGN.md § Limits). A
// sink without it (the fs sink) has its bytes carried by the worker API
// itself.
type Presigner interface {
	// PresignGet returns a URL that reads key with a plain GET for ttl.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
	// PresignPutSize returns a URL that stores one body of exactly size
	// bytes under key with a plain PUT (no header but Content-Length) for
	// ttl: the length is signed, so the store refuses any other
	// (docs/security.md § Upload size limits). There is no URL for a body of
	// any size: its holder could store up to the store's own limit (5 GB on
	// S3), whatever the rule (docs/security.md § Upload size limits).
	PresignPutSize(ctx context.Context, key string, size int64, ttl time.Duration) (string, error)
}

// CheckKey reports whether key is a valid sink key: a non-empty,
// slash-separated relative path whose segments are all non-empty and none
// is "." or "..", with no backslash, no NUL or other control character, no
// leading drive prefix ("C:") and valid UTF-8. Such a key can never name
// anything outside the sink's root, on any platform. The error is a
// *stratus.Error EINVALID with Field "key" naming the rule broken.
func CheckKey(key string) error {
	bad := func(rule string) error {
		return stratus.FieldErrorf(stratus.EINVALID, "key",
			"sink key %q %s; want a relative slash-separated path such as \"tasks/T1/ctx/plan.md\"", key, rule)
	}
	switch {
	case key == "":
		return bad("is empty")
	case !utf8.ValidString(key):
		return bad("is not valid UTF-8")
	case strings.HasPrefix(key, "/"):
		return bad("is absolute")
	case strings.Contains(key, `\`):
		return bad(`contains a backslash`)
	case hasDrivePrefix(key):
		return bad("starts with a drive prefix")
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return bad("contains a control character")
		}
	}
	for _, seg := range strings.Split(key, "/") {
		switch seg {
		case "":
			return bad("has an empty segment")
		case ".", "..":
			return bad("has a \".\" or \"..\" segment")
		}
	}
	return nil
}

// hasDrivePrefix reports a Windows drive prefix ("C:"), which
// filepath.Join would turn into a volume on Windows.
func hasDrivePrefix(s string) bool {
	return len(s) >= 2 && s[1] == ':' &&
		(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// TooLarge is GetMax's refusal of the body under key: over max bytes
// (size, when known; -1 when only "more than max" is).
func TooLarge(key string, size, max int64) error {
	if size < 0 {
		return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the body under %q is over the limit of %d bytes", key, max)
	}
	return stratus.FieldErrorf(stratus.ETOOLARGE, "bytes", "the body under %q is %d bytes, over the limit of %d bytes", key, size, max)
}

// ReadMax reads r to its end, refusing (TooLarge) a body over max bytes
// having read at most max+1 of them. size is the body's announced length
// (-1: unknown), checked first so a known-large body is never read.
func ReadMax(r io.Reader, key string, size, max int64) ([]byte, error) {
	if size > max {
		return nil, TooLarge(key, size, max)
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size))
	}
	if _, err := io.Copy(&buf, io.LimitReader(r, max+1)); err != nil {
		return nil, fmt.Errorf("read %q: %w", key, err)
	}
	if int64(buf.Len()) > max {
		return nil, TooLarge(key, -1, max)
	}
	return buf.Bytes(), nil
}
