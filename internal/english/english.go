// Package english words counts in the sentences Stratus writes to its
// operators: "1 flow", "3 flows".
package english

import "strconv"

// Plural is n and word, with an "s" unless n is 1: Plural(1, "step") is
// "1 step", Plural(0, "step") "0 steps".
func Plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}
