package fold_test

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/fold"
)

// Object is Fold when Fold is a JSON object and nil when Fold is anything
// else, with Fold's errors, for every format.
func TestObject_IsFoldWhenAnObjectElseNil(t *testing.T) {
	t.Parallel()
	final := func(body string) []stratus.OutputEvent {
		return []stratus.OutputEvent{ev(stratus.OutputFinal, "", body)}
	}
	tails := map[string][]stratus.OutputEvent{
		"prose":            final("# Plan\n\n- do it\n"),
		"object":           final(` {"content": "x", "decompose": false} `),
		"fenced object":    final("```json\n{\"a\": 1}\n```\n"),
		"array":            final(`[1, 2]`),
		"scalar":           final(`42`),
		"json string":      final(`"quoted"`),
		"empty":            final(""),
		"invalid utf-8":    final("\xff{\"a\":1}"),
		"no final":         {ev(stratus.OutputArtifact, "plan.md", "# v1")},
		"parts and prose":  {ev(stratus.OutputArtifact, "plan.md", "# v1"), ev(stratus.OutputFinal, "", "ok")},
		"parts and object": {ev(stratus.OutputArtifact, "meta.json", `{"a":1}`), ev(stratus.OutputFinal, "", `{"b":2}`)},
	}
	for name, tail := range tails {
		for _, format := range []string{fold.FormatDefault, fold.FormatJSON, fold.FormatText, "yaml"} {
			want, wantErr := fold.Fold("planner", tail, format)
			got, err := fold.Object("planner", tail, format)
			if stratus.ErrorMessage(err) != stratus.ErrorMessage(wantErr) || stratus.ErrorCode(err) != stratus.ErrorCode(wantErr) {
				t.Errorf("%s, format %q: Object's error %v; want Fold's, %v", name, format, err, wantErr)
				continue
			}
			if !bytes.HasPrefix(want, []byte("{")) {
				want = nil
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, format %q: Object = %s; want %s", name, format, got, want)
			}
		}
	}
}

// Object does not write a text body out as a JSON string: folding a
// 64 KiB text body allocates nothing near its size (Fold allocates it
// again, escaped).
func TestObject_TextBodyIsNotEncoded(t *testing.T) {
	body := strings.Repeat("- step: read the task, plan the lanes, write the notes.\n", 64<<10/56)
	tail := []stratus.OutputEvent{ev(stratus.OutputFinal, "", body)}
	const calls = 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		if v, err := fold.Object("planner", tail, fold.FormatDefault); v != nil || err != nil {
			t.Fatalf("Object of a text body = %.40s, %v; want nil, nil", v, err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / calls; per > 4<<10 {
		t.Errorf("Object of a %d-byte text body allocated %d bytes a call; want under 4 KiB (no JSON string of it)", len(body), per)
	}
}
