package executor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
)

// Step Functions API error names, and the stratus code each maps to.
// Every implementation returns them through APIError so a caller can
// branch on the code (stratus.ErrorCode) or the AWS name (APIErrorName).
const (
	ErrExecutionAlreadyExists = "ExecutionAlreadyExists" // ECONFLICT
	ErrExecutionDoesNotExist  = "ExecutionDoesNotExist"  // ENOTFOUND
	ErrInvalidArn             = "InvalidArn"             // EINVALID
	ErrInvalidDefinition      = "InvalidDefinition"      // EINVALID
	ErrInvalidName            = "InvalidName"            // EINVALID
	ErrInvalidExecutionInput  = "InvalidExecutionInput"  // EINVALID
	ErrInvalidOutput          = "InvalidOutput"          // EINVALID
	ErrInvalidToken           = "InvalidToken"           // EINVALID: not a token this service issues
	ErrTaskDoesNotExist       = "TaskDoesNotExist"       // ENOTFOUND: well-formed, never issued
	ErrTaskTimedOut           = "TaskTimedOut"           // ECONFLICT: expired, already completed, or its execution closed
)

var apiErrorCodes = map[string]string{
	ErrExecutionAlreadyExists: stratus.ECONFLICT,
	ErrExecutionDoesNotExist:  stratus.ENOTFOUND,
	ErrInvalidArn:             stratus.EINVALID,
	ErrInvalidDefinition:      stratus.EINVALID,
	ErrInvalidName:            stratus.EINVALID,
	ErrInvalidExecutionInput:  stratus.EINVALID,
	ErrInvalidOutput:          stratus.EINVALID,
	ErrInvalidToken:           stratus.EINVALID,
	ErrTaskDoesNotExist:       stratus.ENOTFOUND,
	ErrTaskTimedOut:           stratus.ECONFLICT,
}

// APIError returns a *stratus.Error for a Step Functions API error: the
// code the name maps to, the field at fault, and a message
// "<Name>: <detail>".
func APIError(name, field, format string, args ...any) *stratus.Error {
	code, ok := apiErrorCodes[name]
	if !ok {
		code = stratus.EINTERNAL
	}
	return &stratus.Error{Code: code, Field: field, Message: name + ": " + fmt.Sprintf(format, args...)}
}

// APIErrorName returns the Step Functions API error name carried by err
// (an *stratus.Error built by APIError), or "".
func APIErrorName(err error) string {
	var e *stratus.Error
	if !errors.As(err, &e) {
		return ""
	}
	name, _, ok := strings.Cut(e.Message, ": ")
	if _, known := apiErrorCodes[name]; !ok || !known {
		return ""
	}
	return name
}
