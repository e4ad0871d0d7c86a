package runview

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
)

// A wait event's reply commands carry the tracker's flags
// (`status --follow --dir D` printed commands that failed elsewhere),
// the answer command for a question, approve | reject otherwise.
func TestWaiting_ReplyCommandsCarryFlags(t *testing.T) {
	for signal, want := range map[string]string{
		worker.SignalQuestion: "reply with: stratus answer r1 ask --dir /w TEXT",
		"approval":            "reply with: stratus approve r1 ask --dir /w | stratus reject r1 ask --dir /w --reason TEXT",
	} {
		v, _ := json.Marshal(worker.HITLValue{Signal: signal, Request: "ok?"})
		e := waiting(worker.Event{}, stratus.Step{RunID: "r1", Node: "ask", Value: v}, "--dir /w")
		if !strings.Contains(e.Reason, want) {
			t.Errorf("%s: %q; want %q", signal, e.Reason, want)
		}
	}
}
