package asl

import (
	"encoding/json"
	"strconv"
	"time"
)

// ParseTimestamp reads an ASL timestamp (ASL spec § Timestamps; Step
// Functions developer guide § Wait workflow state): RFC 3339 with an
// uppercase T between date and time and an uppercase Z when there is no
// numeric offset, e.g. "2024-08-18T17:33:00Z". Fractions of a second are
// dropped, as Step Functions "considers the time value up to seconds and
// truncates milliseconds".
func ParseTimestamp(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[10] != 'T' {
		return time.Time{}, false
	}
	if last := s[len(s)-1]; last == 'z' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.Truncate(time.Second), true
}

// WaitUntil returns when a Wait state entered at entered ends, given its
// effective input (after InputPath): entered + Seconds, the Timestamp,
// or what SecondsPath or TimestampPath select (ASL spec § Wait State).
// A path that selects nothing, a SecondsPath value that is not an
// integer from 0 to 99999999, or a TimestampPath value that is not a
// timestamp fails with States.Runtime, in Step Functions' words; a time
// already past ends the wait at once.
func (s *State) WaitUntil(effective Value, entered time.Time) (time.Time, *Failure) {
	switch {
	case s.HasSeconds:
		return entered.Add(time.Duration(s.Seconds) * time.Second), nil
	case !s.Timestamp.IsZero():
		return s.Timestamp, nil
	case s.SecondsPath != nil:
		v, ok := s.SecondsPath.Get(effective, nil)
		if !ok {
			return time.Time{}, failf(ErrRuntime, "The SecondsPath parameter does not reference an input value: %s", s.SecondsPath)
		}
		n, isNumber := v.(json.Number)
		secs, err := strconv.ParseInt(string(n), 10, 64)
		switch {
		case !isNumber || err != nil:
			return time.Time{}, failf(ErrRuntime, "The SecondsPath parameter cannot be parsed as a long value: %s == %s", s.SecondsPath, plain(v))
		case secs < 0:
			return time.Time{}, failf(ErrRuntime, "The SecondsPath parameter references a negative value: %s == %s", s.SecondsPath, plain(v))
		case secs > maxWaitSeconds:
			return time.Time{}, failf(ErrRuntime, "The SecondsPath parameter references a value above %d: %s == %s", maxWaitSeconds, s.SecondsPath, plain(v))
		}
		return entered.Add(time.Duration(secs) * time.Second), nil
	case s.TimestampPath != nil:
		v, ok := s.TimestampPath.Get(effective, nil)
		if !ok {
			return time.Time{}, failf(ErrRuntime, "The TimestampPath parameter does not reference an input value: %s", s.TimestampPath)
		}
		str, _ := v.(string)
		t, ok := ParseTimestamp(str)
		if _, isString := v.(string); !isString || !ok {
			return time.Time{}, failf(ErrRuntime, "The TimestampPath parameter does not reference a valid ISO-8601 extended offset date-time format string: %s == %s", s.TimestampPath, plain(v))
		}
		return t, nil
	}
	return entered, nil
}

// plain renders a value in an error cause: a string as is, anything else
// as JSON.
func plain(v Value) string {
	if s, ok := v.(string); ok {
		return s
	}
	return EncodeString(v)
}
