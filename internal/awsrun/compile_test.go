package awsrun

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// A run on a stack is compiled with the stack's heartbeat window (its
// HeartbeatSeconds output), every worker Task state with it.
func TestCompileOptions_TheStacksHeartbeatWindow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for p, body := range workertest.ImplementationFlow(t) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fl, err := flow.Load(dir, "implementation")
	if err != nil {
		t.Fatal(err)
	}
	tg := &Target{Resources: Resources{HeartbeatSeconds: 600}}
	def, err := compiler.Compile(fl, tg.compileOptions(config.Default()))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, def); err != nil {
		t.Fatal(err)
	}
	if got := compact.String(); !strings.Contains(got, `"HeartbeatSeconds":600`) || strings.Contains(got, `"HeartbeatSeconds":300`) {
		t.Errorf("the compiled definition does not carry the stack's 600 s window (HeartbeatSeconds found: %d at 600, %d at 300)",
			strings.Count(got, `"HeartbeatSeconds":600`), strings.Count(got, `"HeartbeatSeconds":300`))
	}
}
