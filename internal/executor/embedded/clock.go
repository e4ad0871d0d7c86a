package embedded

import "time"

// Clock is the Executor's time source: history timestamps, the context
// object's times, Task TimeoutSeconds and HeartbeatSeconds, Retry
// backoff and the execution's TimeoutSeconds all go through it, so a
// test can drive them with a fake instead of waiting.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, unless
	// the returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not happened; it reports whether
	// it did prevent it.
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// AfterFunc is time.AfterFunc.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
