package core

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
)

// SystemRef points at an attempt's baked system prompt (the payload's
// system_ref: docs/contracts.md § Request and response bodies, and the
// system prompt route of § Routes): the Http-mode fetch target and what to
// verify.
type SystemRef struct {
	URI    string `json:"uri"`    // path and query of GET /v1/worker/prompt/system, relative to the API base
	SHA256 string `json:"sha256"` // hex
	Bytes  int    `json:"bytes"`
}

// SystemRefOf returns the system_ref of attempt of dispatch task tid whose
// baked system prompt is system: the route's path and query, the SHA-256
// of the bytes (lowercase hex) and their length in bytes.
func SystemRefOf(tid string, attempt int, system string) *SystemRef {
	sum := sha256.Sum256([]byte(system))
	q := url.Values{"task_id": {tid}, "attempt": {fmt.Sprint(attempt)}}
	return &SystemRef{URI: "/v1/worker/prompt/system?" + q.Encode(), SHA256: hex.EncodeToString(sum[:]), Bytes: len(system)}
}

// DegradationBody is the body of POST /v1/worker/degradation
// (docs/contracts.md § Request and response bodies): {tool, error,
// fallback, note?}.
type DegradationBody struct {
	Tool     string `json:"tool"`
	Error    string `json:"error"`
	Fallback string `json:"fallback"`
	Note     string `json:"note,omitempty"`
}
