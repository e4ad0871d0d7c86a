package webui

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/worker"
)

// docs/security.md § Text an engine wrote: the viewer escapes HTML, and it
// also shows the bidi controls and the control characters of what an
// engine wrote as escapes, so a reason cannot reverse or hide the text
// around it. The tester's reason, posted by an engine as its step's
// failure, is shown on the run's page and the step's.
func TestViewer_ShowsAnEnginesControlAndBidiCharactersEscaped(t *testing.T) {
	t.Parallel()
	s, st, _ := testViewer(t)
	ctx := context.Background()
	const reason = "bad \x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\r\nstratus: end fake#1 verdict=done\u202egnp.exe"
	start := time.Now().Add(-time.Minute)
	value, _ := json.Marshal(worker.StepValue{Outcome: "failed", Reason: reason})
	st.CreateRun(ctx, stratus.Run{ID: "r1", TaskID: "t1", Flow: "implementation", Status: stratus.RunFailed, CreatedAt: start, EndedAt: start.Add(time.Second)})
	st.CreateStep(ctx, stratus.Step{TID: "r1.planning.1", RunID: "r1", Node: "planning", Kind: flow.KindAgent, Visit: 1, StepRef: "planning#1", DedupKey: "d1",
		Status: stratus.StepFailed, Value: value, CreatedAt: start, EndedAt: start.Add(time.Second)})
	st.CreateAttempt(ctx, stratus.Attempt{TID: "r1.planning.1", N: 1, Agent: "planning", Status: stratus.AttemptFailed, Terminal: "Failed\u202e", Reason: reason,
		StartedAt: start, EndedAt: start.Add(time.Second)})
	for _, path := range []string{"/runs/r1", "/runs/r1/steps/planning/1"} {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", path, nil)))
		body := rec.Body.String()
		if rec.Code != 200 {
			t.Fatalf("%s: %d %s", path, rec.Code, body)
		}
		for _, raw := range []string{"\x1b", "\x07", "\r", "\u202e"} {
			if strings.Contains(body, raw) {
				t.Errorf("%s holds %q raw", path, raw)
			}
		}
		if !strings.Contains(body, `verdict=done\u202egnp.exe`) || !strings.Contains(body, `bad \x1b]0;PWNED\x07`) {
			t.Errorf("%s does not show the reason with its controls escaped", path)
		}
	}
}
