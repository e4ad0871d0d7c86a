package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/executor"
)

// passChain is n Pass states in a row, each doing the typical work of a
// compiled state: a Parameters template with a path and an intrinsic,
// and a ResultPath.
func passChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"StartAt":"s0","States":{`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		next := fmt.Sprintf(`"Next":"s%d"`, i+1)
		if i == n-1 {
			next = `"End":true`
		}
		fmt.Fprintf(&b, `"s%d":{"Type":"Pass","Parameters":{"run_id.$":"$.run_id","n.$":"States.MathAdd($.count.n, 1)"},"ResultPath":"$.count",%s}`, i, next)
	}
	b.WriteString(`}}`)
	return b.String()
}

// BenchmarkPassChain measures per-state overhead of the interpreter: one
// execution of a 100-state Pass chain per iteration, history included.
func BenchmarkPassChain(b *testing.B) {
	const states = 100
	def := []byte(passChain(states))
	e := New(Options{})
	ctx := context.Background()
	input := json.RawMessage(`{"run_id":"bench","count":{"n":0},"payload":{"a":[1,2,3],"b":"some text"}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		x, err := e.StartExecution(ctx, executor.StartInput{StateMachine: "bench", Definition: def, Name: fmt.Sprintf("b-%d", i), Input: input})
		if err != nil {
			b.Fatal(err)
		}
		got, err := e.WaitExecution(ctx, x.ARN)
		if err != nil || got.Status != executor.StatusSucceeded {
			b.Fatalf("%+v %v", got, err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*states), "ns/state")
}
