package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/worker"
)

// `stratus runner` tells its ends apart by exit status: 0 the
// report was delivered, 4 it was refused (409: the step moved on), 5 it
// could not be delivered and sits in a spool file, named on stderr.
func TestRunner_ExitStatusSaysWhatBecameOfTheReport(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		submit int
		code   int
		say    string
	}{{200, ExitOK, ""}, {409, ExitRefused, "no longer takes this attempt's result"}, {503, ExitSpooled, "spooled to"}} {
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/v1/worker/prompt":
				json.NewEncoder(w).Encode(worker.Payload{TaskID: "r1.a.1", Attempt: 1, Agent: "a", Prompt: "p", StepRef: "a#1",
					Engine: &worker.EngineSpec{Command: "sh", Args: []string{"-c", `read l; printf '{"subrun_report":"r"}\n'`}, DeadlineMS: 10000, Kind: "agent", Input: json.RawMessage(`{"query":"p"}`)}})
			case "/v1/worker/submit":
				w.WriteHeader(c.submit)
				if c.submit == 200 {
					w.Write([]byte(`{}`))
				} else {
					w.Write([]byte(`{"error":{"code":"x","message":"no"}}`))
				}
			default:
				w.WriteHeader(204)
			}
		}))
		defer api.Close()
		r := runWorkerCLI(t, map[string]string{launch.EnvAPIURL: api.URL, launch.EnvHandle: "wh-abcdefgh", "TMPDIR": t.TempDir()}, "", "runner")
		if r.code != c.code || !strings.Contains(r.stderr, c.say) {
			t.Errorf("submit answered %d: exit %d, want %d saying %q\n%s", c.submit, r.code, c.code, c.say, r.stderr)
		}
	}
}

// `stratus runner pool` (README.md § Warm runners (pool mode)) refuses what it cannot run with as a
// usage error naming the flag, the value and what is valid — handed from
// the slim stratus to stratus-full, which has the SQS client.
func TestRunnerPool_BadFlagsAreUsageErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		say  string
	}{
		{nil, "--queue is required"},
		{[]string{"--queue", "sqs-queue-name"}, `--queue "sqs-queue-name" is not a queue URL`},
		{[]string{"--queue", "https://sqs.us-east-1.amazonaws.com/1/q", "--profile", "gpu"}, `--profile "gpu" is not valid; valid: offline`},
		{[]string{"--queue", "https://sqs.us-east-1.amazonaws.com/1/q", "--max-steps", "-1"}, "--max-steps -1 is not valid"},
	} {
		r := runCLI(t, append([]string{"runner", "pool"}, c.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, c.say) {
			t.Errorf("runner pool %q: exit %d, want %d saying %q\n%s", c.args, r.code, ExitUsage, c.say, r.stderr)
		}
	}
}

// A pooled runner whose --work-root cannot hold a step's directory does not
// start (it would bounce every assignment into the dead-letter queue): a
// usage error naming the work root, before it receives anything.
func TestRunnerPool_AWorkRootItCannotWriteIsAUsageError(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing", "root")
	r := runWorkerCLI(t, map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": ""},
		"", "runner", "pool", "--queue", "http://127.0.0.1:1/123456789012/q", "--work-root", missing)
	if r.code != ExitUsage || !strings.Contains(r.stderr, missing) {
		t.Errorf("runner pool --work-root %s: exit %d, want %d naming it\n%s", missing, r.code, ExitUsage, r.stderr)
	}
}
