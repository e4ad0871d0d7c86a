package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
)

// JSONError is what a command run with --json prints on stdout when it
// fails without a result (README § Exit status): the worker API's error
// shape (internal/httpapi.ErrorBody), so one parser reads both. Code is a
// stratus error code ("invalid", "not_found", "conflict", "internal", …);
// Message is the sentence stderr shows; Field names the input at fault
// when the error has one.
type JSONError struct {
	Error JSONErrorDetail `json:"error"`
}

// JSONErrorDetail is the inside of JSONError.
type JSONErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// jsonErrorOf is err as JSONError, for a command that exits with status.
// An error without a stratus code is "invalid" when it is bad input (exit
// 2: a flag, an argument, a file) and "internal" otherwise.
func jsonErrorOf(err error, status int) JSONError {
	d := JSONErrorDetail{Code: stratus.ErrorCode(err), Message: err.Error()}
	var se *stratus.Error
	if errors.As(err, &se) {
		d.Field = se.Field
	} else if status == ExitUsage {
		d.Code = stratus.EINVALID
	}
	return JSONError{Error: d}
}

// writeJSONError writes err as one line of JSON (JSONError): the last
// line of a stream of JSON lines, the only one otherwise.
func writeJSONError(w io.Writer, err error, status int) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(jsonErrorOf(err, status))
}

// wantsJSON reports whether cmd has a --json flag and was asked for it.
// When parsing stopped before --json (an unknown flag ahead of it), the
// arguments before a "--" say.
func wantsJSON(cmd *cobra.Command, args []string) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	if f == nil {
		return false
	}
	if f.Changed {
		on, _ := strconv.ParseBool(f.Value.String())
		return on
	}
	return argsAskJSON(args)
}

// argsAskJSON reports whether args, before a "--", ask for --json.
func argsAskJSON(args []string) bool {
	on := false
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "--json" {
			on = true
		} else if v, ok := strings.CutPrefix(a, "--json="); ok {
			on, _ = strconv.ParseBool(v)
		}
	}
	return on
}

// stdoutWatch passes stdout through and remembers whether a command wrote
// its result there, so an error after it is not a second JSON object.
type stdoutWatch struct {
	w    io.Writer
	mu   sync.Mutex
	n    int64
	line []byte // the opening bytes of the line being written
	last []byte // the opening bytes of the last whole line
}

// watchPrefix is how much of a line stdoutWatch keeps: enough to tell a
// run_ended line from another event's.
const watchPrefix = 32

func (s *stdoutWatch) Write(p []byte) (int, error) {
	n, err := s.w.Write(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n += int64(n)
	for p = p[:n]; len(p) > 0; {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := watchPrefix - len(s.line); room > 0 {
			s.line = append(s.line, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		s.last, s.line = append(s.last[:0], s.line...), s.line[:0]
		p = p[i+1:]
	}
	return n, err
}

// Fd is the file descriptor of the stdout it wraps, so that a check for a
// terminal (progress.Terminal) sees through it; ^0 when it wraps no file.
func (s *stdoutWatch) Fd() uintptr {
	if f, ok := s.w.(*os.File); ok {
		return f.Fd()
	}
	return ^uintptr(0)
}

// resultWritten reports whether a result is on stdout. A stream of JSON
// event lines (run, resume and status --follow with --json; progress
// Display) holds one only once its last line is run_ended; anything else
// written is the command's result.
func (s *stdoutWatch) resultWritten() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == 0 {
		return false
	}
	last := s.last
	if len(s.line) > 0 {
		last = s.line
	}
	if bytes.HasPrefix(last, []byte(`{"event":"`)) {
		return bytes.HasPrefix(last, []byte(`{"event":"run_ended"`))
	}
	return true
}
