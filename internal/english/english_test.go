package english

import "testing"

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 flows", 1: "1 flow", 2: "2 flows"} {
		if got := Plural(n, "flow"); got != want {
			t.Errorf("Plural(%d) = %q, want %q", n, got, want)
		}
	}
}
