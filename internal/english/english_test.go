package english

import (
	"testing"
	"time"
)

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 flows", 1: "1 flow", 2: "2 flows"} {
		if got := Plural(n, "flow"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}

// One figure reads the same wherever a duration is printed: under a
// second in ms (a 333 ms run once read "ran 0s").
func TestDuration_UnderASecondInMilliseconds(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{-time.Second, "0ms"},
		{0, "0ms"},
		{57 * time.Millisecond, "57ms"},
		{333 * time.Millisecond, "333ms"},
		{999*time.Millisecond + 900*time.Microsecond, "999ms"},
		{time.Second, "1.0s"},
		{1449 * time.Millisecond, "1.4s"},
		{9949 * time.Millisecond, "9.9s"},
		{9960 * time.Millisecond, "10s"},
		{42 * time.Second, "42s"},
		{59600 * time.Millisecond, "1m00s"},
		{61 * time.Second, "1m01s"},
		{40 * time.Minute, "40m00s"},
		{time.Hour + 2*time.Minute + 5*time.Second, "1h02m05s"},
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
