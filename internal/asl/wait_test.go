package asl

import (
	"testing"
	"time"
)

// developer guide § Wait workflow state: exactly one of Seconds,
// Timestamp, SecondsPath and TimestampPath; a timestamp is RFC 3339 with
// an uppercase T and Z, its fractions of a second dropped; the paths
// select from the effective input; a SecondsPath value that is missing,
// not an integer or negative is States.Runtime (the causes are Step
// Functions', as moto's LocalStack-derived interpreter words them).
func TestWaitUntil(t *testing.T) {
	t.Parallel()
	entered := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	in := MustDecode(`{"s":30,"big":99999999,"neg":-1,"frac":2.5,"zero":0,"str":"30","ts":"2026-03-01T10:00:00.789Z","off":"2026-03-01T11:00:00+01:00","bad":"tomorrow","obj":{"a":1}}`)
	cases := []struct {
		name, field string
		want        time.Time
		cause       string
	}{
		{"Seconds", `"Seconds":90`, entered.Add(90 * time.Second), ""},
		{"Seconds 0", `"Seconds":0`, entered, ""},
		{"Timestamp", `"Timestamp":"2026-03-02T00:00:00Z"`, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), ""},
		{"Timestamp drops milliseconds", `"Timestamp":"2026-03-02T00:00:00.999Z"`, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), ""},
		{"SecondsPath", `"SecondsPath":"$.s"`, entered.Add(30 * time.Second), ""},
		{"SecondsPath 0", `"SecondsPath":"$.zero"`, entered, ""},
		{"SecondsPath largest", `"SecondsPath":"$.big"`, entered.Add(99999999 * time.Second), ""},
		{"TimestampPath", `"TimestampPath":"$.ts"`, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), ""},
		{"TimestampPath with an offset", `"TimestampPath":"$.off"`, time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), ""},
		{"SecondsPath missing", `"SecondsPath":"$.nope"`, time.Time{}, "The SecondsPath parameter does not reference an input value: $.nope"},
		{"SecondsPath negative", `"SecondsPath":"$.neg"`, time.Time{}, "The SecondsPath parameter references a negative value: $.neg == -1"},
		{"SecondsPath fraction", `"SecondsPath":"$.frac"`, time.Time{}, "The SecondsPath parameter cannot be parsed as a long value: $.frac == 2.5"},
		{"SecondsPath string", `"SecondsPath":"$.str"`, time.Time{}, "The SecondsPath parameter cannot be parsed as a long value: $.str == 30"},
		{"SecondsPath object", `"SecondsPath":"$.obj"`, time.Time{}, `The SecondsPath parameter cannot be parsed as a long value: $.obj == {"a":1}`},
		{"TimestampPath missing", `"TimestampPath":"$.nope"`, time.Time{}, "The TimestampPath parameter does not reference an input value: $.nope"},
		{"TimestampPath not a timestamp", `"TimestampPath":"$.bad"`, time.Time{}, "The TimestampPath parameter does not reference a valid ISO-8601 extended offset date-time format string: $.bad == tomorrow"},
		{"TimestampPath a number", `"TimestampPath":"$.s"`, time.Time{}, "The TimestampPath parameter does not reference a valid ISO-8601 extended offset date-time format string: $.s == 30"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := parseState(t, `{"Type":"Wait",`+tc.field+`,"Next":"n"}`)
			got, f := st.WaitUntil(in, entered)
			switch {
			case tc.cause == "" && f != nil:
				t.Fatalf("failed: %v", f)
			case tc.cause != "" && (f == nil || f.Error != ErrRuntime || f.Cause != tc.cause):
				t.Fatalf("failure %v, want States.Runtime: %s", f, tc.cause)
			case !got.Equal(tc.want):
				t.Errorf("until %v, want %v", got, tc.want)
			}
		})
	}
}
