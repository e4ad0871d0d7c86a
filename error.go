package stratus

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// Error codes. Each maps to one HTTP status in internal/httpapi (ErrorStatus).
const (
	EINVALID       = "invalid"            // 400: malformed input
	EUNAUTHORIZED  = "unauthorized"       // 401: missing, malformed or expired credential
	EFORBIDDEN     = "forbidden"          // 403: valid credential, not allowed here
	ENOTFOUND      = "not_found"          // 404
	EMETHOD        = "method_not_allowed" // 405: the path exists, with other methods
	ECONFLICT      = "conflict"           // 409: fencing (stale attempt, second Final, terminal run)
	ETOOLARGE      = "too_large"          // 413
	EUNPROCESSABLE = "unprocessable"      // 422: contract violation (verdict, submit_format json)
	EINTERNAL      = "internal"           // 500
	// ENOSPACE: the server's storage is full (ENOSPC, a disk quota,
	// SQLite's "database or disk is full"): 507. Nothing accepted before
	// is lost; the request may succeed once space is freed.
	ENOSPACE = "insufficient_storage"
)

// Error is the one error type Stratus returns across layers: a code for
// machines, a message for humans, and optionally the name of the input field at
// fault. Messages name the field, the value received and what would be valid
// (docs/contracts.md § Routes: one error shape; docs/architecture.md § Layers).
type Error struct {
	Code    string
	Message string
	Field   string
}

// Error is "field: message", or the message alone when there is no field
// or the message already opens with it ("node gate is not waiting"; it
// would read "node: node gate …").
func (e *Error) Error() string {
	if e.Field != "" && !opensWith(e.Message, e.Field) {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
}

// opensWith reports whether msg's first word is field.
func opensWith(msg, field string) bool {
	rest, ok := strings.CutPrefix(msg, field)
	return ok && (rest == "" || strings.ContainsRune(" :=\"'", rune(rest[0])))
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an *Error that names the field at fault.
func FieldErrorf(code, field, format string, args ...any) *Error {
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error,
// ENOSPACE for a full disk (StorageFull), EINTERNAL for any other non-nil
// error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	} else if StorageFull(err) {
		return ENOSPACE
	}
	return EINTERNAL
}

// StorageFull reports whether err is a full disk: ENOSPC or EDQUOT from
// the file system, or SQLite's SQLITE_FULL ("database or disk is full").
func StorageFull(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code == ENOSPACE
	}
	return strings.Contains(err.Error(), "database or disk is full")
}

// ErrorMessage returns the human message of err if it is an *Error, and a
// generic message otherwise (internal details are not leaked to clients).
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	} else if StorageFull(err) {
		return "the server's disk is full; what it accepted before is kept: free space and send this again"
	}
	return "internal error"
}
