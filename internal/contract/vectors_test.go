package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/sharedtest"
)

// vectorsDir is ../shared/cases/contract, the engine contract vectors.
func vectorsDir(t *testing.T) string {
	return sharedtest.Path(t, "cases", "contract")
}

type vectorLaunch struct {
	Kind          string          `json:"kind"`
	Input         json.RawMessage `json:"input"`
	MaxSteps      *int            `json:"max_steps"`
	DeadlineMS    int             `json:"deadline_ms"`
	CancelGraceMS int             `json:"cancel_grace_ms"`
}

type vectorWant struct {
	Terminal         Terminal         `json:"terminal"`
	Report           *json.RawMessage `json:"report"` // nil: key absent
	FailureContains  string           `json:"failure_contains"`
	Steps            int              `json:"steps"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	CostUSD          *float64         `json:"cost_usd"`
	MaxWallMS        int64            `json:"max_wall_ms"`
}

type vector struct {
	Launch vectorLaunch `json:"launch"`
	Want   vectorWant   `json:"want"`
}

func loadVector(t *testing.T, name string) vector {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(vectorsDir(t), name+".expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vector
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s.expect.json: %v", name, err)
	}
	// A JSON null report decodes to a nil pointer; tell it apart from absence.
	var keys struct {
		Want map[string]json.RawMessage `json:"want"`
	}
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	if r, ok := keys.Want["report"]; ok {
		v.Want.Report = &r
	}
	return v
}

// runVector runs NAME.sh as `sh NAME.sh` under the vector's launch and
// checks every field of want.
func runVector(t *testing.T, name string) {
	t.Helper()
	v := loadVector(t, name)
	spec := LaunchSpec{
		Command:       "sh",
		Args:          []string{filepath.Join(vectorsDir(t), name+".sh")},
		DeadlineMS:    v.Launch.DeadlineMS,
		CancelGraceMS: v.Launch.CancelGraceMS,
	}
	req := Request{Kind: v.Launch.Kind, Input: v.Launch.Input, MaxSteps: v.Launch.MaxSteps}
	start := time.Now()
	res, err := NewRunner().Run(context.Background(), spec, req, nil)
	wall := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkWant(t, res, v.Want)
	if max := time.Duration(v.Want.MaxWallMS) * time.Millisecond; wall > max {
		t.Errorf("wall %v > max_wall_ms %v", wall, max)
	}
}

func checkWant(t *testing.T, res Result, w vectorWant) {
	t.Helper()
	if res.Terminal != w.Terminal {
		t.Errorf("terminal = %s (failure %q), want %s", res.Terminal, res.Failure, w.Terminal)
	}
	if w.Report != nil {
		if !jsonEqual(t, res.Report, *w.Report) {
			t.Errorf("report = %s, want %s", res.Report, *w.Report)
		}
	} else if res.Report != nil {
		t.Errorf("report = %s, want none", res.Report)
	}
	if w.FailureContains != "" && !strings.Contains(res.Failure, w.FailureContains) {
		t.Errorf("failure = %q, want it to contain %q", res.Failure, w.FailureContains)
	}
	if w.Terminal != Failed && res.Failure != "" {
		t.Errorf("failure = %q on a %s terminal", res.Failure, res.Terminal)
	}
	a := res.Attempt
	if !strings.HasPrefix(a.ID, "cr-") {
		t.Errorf("attempt id = %q", a.ID)
	}
	if a.Steps != w.Steps || a.PromptTokens != w.PromptTokens || a.CompletionTokens != w.CompletionTokens {
		t.Errorf("attempt steps/prompt/completion = %d/%d/%d, want %d/%d/%d",
			a.Steps, a.PromptTokens, a.CompletionTokens, w.Steps, w.PromptTokens, w.CompletionTokens)
	}
	checkCost(t, a.CostUSD, w.CostUSD)
}

func checkCost(t *testing.T, got, want *float64) {
	t.Helper()
	switch {
	case want == nil && got != nil:
		t.Errorf("cost_usd = %v, want unknown (nil)", *got)
	case want != nil && got == nil:
		t.Errorf("cost_usd = unknown (nil), want %v", *want)
	case want != nil && math.Abs(*got-*want) > 1e-9:
		t.Errorf("cost_usd = %v, want %v", *got, *want)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("invalid JSON %q: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Errorf("invalid JSON %q: %v", b, err)
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestVectors runs every vector of cases/contract. // seed 003 §§ 1–6
func TestVectors(t *testing.T) {
	t.Parallel()
	scripts, err := filepath.Glob(filepath.Join(vectorsDir(t), "*.sh"))
	if err != nil {
		t.Fatal(err)
	}
	expects, err := filepath.Glob(filepath.Join(vectorsDir(t), "*.expect.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(scripts) == 0 || len(scripts) != len(expects) {
		t.Fatalf("%d scripts, %d expectations", len(scripts), len(expects))
	}
	sort.Strings(scripts)
	for _, s := range scripts {
		name := strings.TrimSuffix(filepath.Base(s), ".sh")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runVector(t, name)
		})
	}
}
