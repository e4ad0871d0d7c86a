package greet

import "testing"

func TestHello(t *testing.T) {
	if got := Hello("Ada"); got != "Hello, Ada!" {
		t.Fatalf(`Hello("Ada") = %q, want "Hello, Ada!"`, got)
	}
}
