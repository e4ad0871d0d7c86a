package captoken

import (
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

// An operator token (README.md § A human gate, step by step: `stratus
// approve|reject|answer`) names one run and grants ReplyHuman only — none of
// a worker's verbs — and lives OperatorTTL.
func TestMintOperator_OneRunReplyOnly(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	m := &Minter{Key: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }}
	tok, _, err := m.MintOperator("r-1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Verify(tok)
	if err != nil || c.Role != RoleOperator || c.RunID != "r-1" || c.TaskID != "" || !c.Allows(ReplyHuman) {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
	for _, v := range WorkerVerbs {
		if c.Allows(v) {
			t.Errorf("an operator token grants the worker verb %s", v)
		}
	}
	worker, _, _ := m.Mint("r1", "t-1", 1)
	if wc, _ := m.Verify(worker); wc.Allows(ReplyHuman) || wc.Role == RoleOperator {
		t.Errorf("a worker token grants the operator's reply: %+v", wc)
	}
	now = now.Add(OperatorTTL + Leeway + time.Second)
	if _, err := m.Verify(tok); stratus.ErrorCode(err) != stratus.EUNAUTHORIZED || !strings.Contains(err.Error(), "expired") {
		t.Errorf("after OperatorTTL: %v, want expired", err)
	}
}
