package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/contract/contracttest"
)

// contractArgs is the `stratus contract run` command line for a vector.
func contractArgs(v contracttest.Vector) []string {
	args := []string{"contract", "run", "--kind", v.Launch.Kind, "--input", string(v.Launch.Input)}
	if v.Launch.MaxSteps != nil {
		args = append(args, "--max-steps", strconv.Itoa(*v.Launch.MaxSteps))
	}
	if v.Launch.DeadlineMS != 0 {
		args = append(args, "--deadline-ms", strconv.Itoa(v.Launch.DeadlineMS))
	}
	if v.Launch.CancelGraceMS != 0 {
		args = append(args, "--cancel-grace-ms", strconv.Itoa(v.Launch.CancelGraceMS))
	}
	return append(args, "--", "sh", v.Script)
}

// contractOutput decodes the one JSON object contract run prints into the
// shape contracttest checks, keeping the keys to check which ones are
// present.
func contractOutput(t *testing.T, stdout string) (contracttest.Result, map[string]json.RawMessage) {
	t.Helper()
	var res contracttest.Result
	var keys map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&keys); err != nil {
		t.Fatalf("contract run output is not one JSON object: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("contract run printed more than one JSON value:\n%s", stdout)
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatal(err)
	}
	return res, keys
}

// TestContractRun_Vectors runs every vector of testdata/cases/contract
// through the built binary. // docs/contracts.md § Child contract v1
func TestContractRun_Vectors(t *testing.T) {
	t.Parallel()
	for _, v := range contracttest.Vectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			v.MustHaveCommands(t)
			start := time.Now()
			r := runCLI(t, contractArgs(v)...)
			wall := time.Since(start)
			w := v.Want

			wantCode := ExitFailed
			if w.Terminal == "Captured" {
				wantCode = ExitOK
			}
			if r.code != wantCode {
				t.Errorf("exit %d, want %d (stderr %q)", r.code, wantCode, r.stderr)
			}
			res, keys := contractOutput(t, r.stdout)
			// Decoded, an absent report key is a nil Report, so Check also
			// checks that the key is present exactly when want has one.
			for _, m := range w.Check(res) {
				t.Error(m)
			}
			if _, ok := keys["failure"]; ok && w.Terminal != "Failed" {
				t.Errorf("failure = %q on a %s terminal, want the key absent", res.Failure, res.Terminal)
			}
			var attempt map[string]json.RawMessage
			if err := json.Unmarshal(keys["attempt"], &attempt); err != nil {
				t.Fatalf("attempt: %v", err)
			}
			for _, k := range []string{"id", "steps", "prompt_tokens", "completion_tokens", "cost_usd", "exit_code", "wall_ms"} {
				if _, ok := attempt[k]; !ok {
					t.Errorf("attempt has no %q: %s", k, keys["attempt"])
				}
			}
			// max_wall_ms catches a hang (the sleeping vector sleeps 30 s),
			// not speed: a loaded machine gets loadSlack on top.
			if max := time.Duration(w.MaxWallMS)*time.Millisecond + loadSlack; wall > max {
				t.Errorf("the call took %v, max_wall_ms %v (+ %v for a loaded machine)", wall, time.Duration(w.MaxWallMS)*time.Millisecond, loadSlack)
			}
		})
	}
}

// TestContractRun_RequestLineFromFlags checks the envelope the flags build,
// the defaults included (kind "agent", input null, no max_steps or schema).
// docs/contracts.md § The request line
func TestContractRun_RequestLineFromFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	engine := filepath.Join(dir, "echo_request.sh")
	writeTestFile(t, engine, "read line\nprintf '{\"subrun_report\":%s}\\n' \"$line\"\n")
	schema := filepath.Join(dir, "schema.json")
	writeTestFile(t, schema, "{\n  \"type\": \"object\"\n}\n")

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"defaults", nil, `{"workflow_contract":1,"id":"cr-1","kind":"agent","input":null}`},
		{"every flag", []string{"--kind", "review", "--input", `{ "goal": "tidy" }`, "--max-steps", "24", "--schema", schema},
			`{"workflow_contract":1,"id":"cr-1","kind":"review","max_steps":24,"schema":{"type":"object"},"input":{"goal":"tidy"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"contract", "run"}, tc.args...), "--", "sh", engine)
			r := runCLI(t, args...)
			if r.code != ExitOK {
				t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
			}
			res, _ := contractOutput(t, r.stdout)
			if ok, _ := contracttest.JSONEqual(res.Report, []byte(tc.want)); !ok {
				t.Errorf("request line = %s, want %s", res.Report, tc.want)
			}
		})
	}
}

// TestContractRun_BadFlagsExitUsage: bad flags exit 2 before any engine runs.
func TestContractRun_BadFlagsExitUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	engine := filepath.Join(dir, "engine.sh")
	writeTestFile(t, engine, "touch '"+marker+"'\nread line\nprintf '{\"subrun_report\":1}\\n'\n")
	notObject := filepath.Join(dir, "array.json")
	writeTestFile(t, notObject, "[1, 2]\n")
	notJSON := filepath.Join(dir, "broken.json")
	writeTestFile(t, notJSON, "{\"type\":\n")
	cmd := []string{"--", "sh", engine}

	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"input not JSON", append([]string{"--input", "{query: q}"}, cmd...), "--input"},
		{"input empty", append([]string{"--input", ""}, cmd...), "--input"},
		{"schema file missing", append([]string{"--schema", filepath.Join(dir, "nope.json")}, cmd...), "--schema"},
		{"schema not an object", append([]string{"--schema", notObject}, cmd...), "JSON object"},
		{"schema not JSON", append([]string{"--schema", notJSON}, cmd...), "JSON object"},
		{"no command after --", []string{"--kind", "echo", "--"}, "no engine command"},
		{"no -- at all", nil, "no engine command"},
		{"command without --", []string{"sh", engine}, "after --"},
		{"max-steps negative", append([]string{"--max-steps", "-1"}, cmd...), "--max-steps"},
		{"max-steps not a number", append([]string{"--max-steps", "many"}, cmd...), "max-steps"},
		{"deadline negative", append([]string{"--deadline-ms", "-5"}, cmd...), "--deadline-ms"},
		{"grace negative", append([]string{"--cancel-grace-ms", "-5"}, cmd...), "--cancel-grace-ms"},
		{"unknown flag", append([]string{"--bogus"}, cmd...), "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := runCLI(t, append([]string{"contract", "run"}, tc.args...)...)
			if r.code != ExitUsage {
				t.Errorf("exit %d, want %d; stdout %q stderr %q", r.code, ExitUsage, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Errorf("stderr %q, want it to mention %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q, want nothing", r.stdout)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a usage error still ran the engine")
	}
	if r := runCLI(t, "contract"); r.code != ExitUsage {
		t.Errorf("bare `stratus contract`: exit %d, want %d", r.code, ExitUsage)
	}
}

// TestContractRun_SignalKillsGroupExits130: SIGINT or SIGTERM to stratus
// cancels the call: the engine's process group is killed, no terminal is
// printed, and the exit status is 130. //
// docs/contracts.md § Process lifecycle
func TestContractRun_SignalKillsGroupExits130(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			engine := filepath.Join(dir, "engine.sh")
			// The grandchild (sleep) ignores stdin EOF: only a group kill ends it.
			writeTestFile(t, engine, "read line\nprintf '{\"event\":\"agent_step\",\"step\":2}\\n'\n"+
				"sleep 60 &\necho $! > '"+pidFile+".tmp'\nmv '"+pidFile+".tmp' '"+pidFile+"'\nwait\n")
			cmd := exec.Command(stratusBin, "contract", "run", "--", "sh", engine)
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			grandchild := waitForPID(t, pidFile)
			start := time.Now()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitInterrupted {
				t.Fatalf("wait: %v, want exit %d; stderr %q", err, ExitInterrupted, errb.String())
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("stratus took %v to stop after %v", d, sig)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q, want no terminal on cancellation", out.String())
			}
			if !strings.Contains(errb.String(), "interrupted") {
				t.Errorf("stderr %q, want it to say interrupted", errb.String())
			}
			deadline := time.Now().Add(3 * time.Second)
			for processAlive(grandchild) {
				if time.Now().After(deadline) {
					syscall.Kill(grandchild, syscall.SIGKILL)
					t.Fatalf("engine grandchild %d still alive after stratus exited", grandchild)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// processAlive reports whether pid runs; a zombie awaiting its reaper
// counts as dead.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// waitForPID polls for a pid file the engine writes once it is running.
func waitForPID(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the engine never wrote %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// loadSlack is added to a vector's max_wall_ms: well under the 30 s a
// hanging engine sleeps, well over what a machine running two test suites
// at once delays a call by (5.9 s seen for a 3 s vector).
const loadSlack = 10 * time.Second
