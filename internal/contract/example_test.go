package contract_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/stratusflow/stratus/internal/contract"
)

func ExampleRunner_Run() {
	// The smallest conforming engine of
	// docs/contracts.md § Conformance checklist, inlined.
	spec := contract.LaunchSpec{
		Command:    "sh",
		Args:       []string{"-c", `read -r line; printf '{"event":"agent_step","step":1}\n{"subrun_report":{"answer":42}}\n'`},
		DeadlineMS: 10_000,
	}
	req := contract.Request{Kind: "echo", Input: json.RawMessage(`{"query":"life"}`)}
	res, err := contract.NewRunner().Run(context.Background(), spec, req, nil)
	if err != nil {
		panic(err) // only a cancelled context yields an error
	}
	fmt.Println(res.Terminal, string(res.Report), res.Attempt.ID, res.Attempt.Steps)
	// Output: Captured {"answer":42} cr-1 1
}
