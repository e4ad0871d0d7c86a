package stratus

import (
	"errors"
	"fmt"
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
)

// Error is the one error type Stratus returns across layers: a code for
// machines, a message for humans, and optionally the name of the input
// field at fault. Messages name the field, the value received and what
// would be valid (../shared/STYLE.md § Errors).
type Error struct {
	Code    string
	Message string
	Field   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Message)
	}
	return e.Message
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
// EINTERNAL for any other non-nil error, and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the human message of err if it is an *Error, and a
// generic message otherwise (internal details are not leaked to clients).
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
