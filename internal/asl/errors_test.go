package asl

import (
	"errors"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// ASL spec § Retrying after error / § Fallback states and AWS developer
// guide § Error names: how an ErrorEquals entry matches an error name.
func TestMatchError(t *testing.T) {
	t.Parallel()
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{ErrAll, "Custom.Error", true},
		{ErrAll, ErrTimeout, true},
		{ErrAll, ErrHeartbeatTimeout, true},
		{ErrAll, ErrTaskFailed, true},
		{ErrAll, ErrResultPathMatchFailure, true},
		{ErrAll, ErrRuntime, false},           // never caught
		{ErrAll, ErrDataLimitExceeded, false}, // never caught
		{ErrRuntime, ErrRuntime, false},
		{ErrTaskFailed, ErrTaskFailed, true},
		{ErrTaskFailed, "Custom.Error", true},
		{ErrTaskFailed, ErrIntrinsicFailure, true},
		{ErrTaskFailed, ErrTimeout, false},
		{ErrTaskFailed, ErrHeartbeatTimeout, false},
		{ErrTimeout, ErrTimeout, true},
		{ErrTimeout, ErrHeartbeatTimeout, true},
		{ErrHeartbeatTimeout, ErrHeartbeatTimeout, true},
		{ErrHeartbeatTimeout, ErrTimeout, false},
		{"Custom.Error", "Custom.Error", true},
		{"Custom.Error", "custom.error", false},
		{"Custom.Error", ErrTaskFailed, false},
	}
	for _, tc := range cases {
		if got := MatchError(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchError(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

// ASL spec § Retrying after error: IntervalSeconds × BackoffRate^n,
// capped by MaxDelaySeconds.
func TestRetrier_Delay(t *testing.T) {
	t.Parallel()
	cases := []struct {
		r    Retrier
		want []time.Duration
	}{
		{Retrier{IntervalSeconds: 1, BackoffRate: 2}, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{Retrier{IntervalSeconds: 3, BackoffRate: 1}, []time.Duration{3 * time.Second, 3 * time.Second, 3 * time.Second}},
		{Retrier{IntervalSeconds: 2, BackoffRate: 1.5}, []time.Duration{2 * time.Second, 3 * time.Second, 4500 * time.Millisecond}},
		{Retrier{IntervalSeconds: 1, BackoffRate: 2, MaxDelaySeconds: 5}, []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}},
	}
	for _, tc := range cases {
		for n, want := range tc.want {
			if got := tc.r.Delay(n); got != want {
				t.Errorf("%+v Delay(%d) = %v, want %v", tc.r, n, got, want)
			}
		}
	}
	huge := Retrier{IntervalSeconds: maxIntervalSeconds, BackoffRate: 1e300}
	if got := huge.Delay(10); got <= 0 {
		t.Errorf("huge delay overflowed: %v", got)
	}
}

// A rejected definition is EINVALID for callers that branch on codes
// (docs/architecture.md § Layers: the one error type and its codes).
func TestDefinitionError_UnwrapsToEINVALID(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`{"StartAt":"x","States":{}}`))
	if stratus.ErrorCode(err) != stratus.EINVALID {
		t.Fatalf("code = %q, want %q (err %v)", stratus.ErrorCode(err), stratus.EINVALID, err)
	}
	var de *DefinitionError
	if !errors.As(err, &de) || len(de.Problems) == 0 {
		t.Fatalf("not a *DefinitionError: %v", err)
	}
}
