package worker

import (
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus/internal/findings"
)

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// evaluatorOutcome decides an evaluator's outcome from its folded value
// (internal/findings.Outcome: accept, rework, or invalid — fail closed).
func evaluatorOutcome(value json.RawMessage, gate string) (outcome, reason string) {
	outcome, reason, _ = findings.Outcome(value, gate)
	return outcome, reason
}
