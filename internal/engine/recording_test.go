package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// The recordings under testdata/shim are what the real CLIs (package.json
// pins their versions) printed, run with the argv the shims build, against
// the scripted model server. `go test ./internal/engine -run TestRecordings
// -record` writes them again; without -record the same runs are compared,
// line by line, with the stored recordings' shape (event types and keys), so
// a CLI upgrade that changes its output fails here before a shim
// mistranslates it.

var record = flag.Bool("record", false, "re-record testdata/shim from the real CLIs")

// recording is one scenario: the CLI, its argv after the binary (as the
// shim builds it), and the script the model server answers from.
type recording struct {
	file   string
	cli    string
	args   []string
	script string
}

// recordedWorkDir replaces the run's temp work dir in a recording.
const recordedWorkDir = "/work/repo"

const recordedTask = "You are a careful Go reviewer.\n\nFind the nil map write\n\nHints:\nlook in a.go\n"

func recordings() []recording {
	claude := []string{"-p", "--output-format", "stream-json", "--verbose"}
	codex := []string{"exec", "--json", "--skip-git-repo-check"}
	manySteps := `rules:
  - match: "nil map write"
    visits:
      - turns:
          - {shell: "go vet ./... # try 1", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
          - {shell: "go vet ./... # try 2", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
          - {shell: "go vet ./... # try 3", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
          - {shell: "go vet ./... # try 4", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
          - {shell: "go vet ./... # try 5", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
          - {text: "gave up", input_tokens: 110, output_tokens: 5, cached_tokens: 100}
`
	answer := `rules:
  - match: "nil map write"
    visits:
      - turns:
          - {shell: "grep -n map a.go", input_tokens: 1203, output_tokens: 31, cached_tokens: 0}
          - {text: '{"answer":"nil map write in a.go:3"}', input_tokens: 1245, output_tokens: 11, cached_tokens: 1200}
`
	return []recording{
		{file: "claude_success.jsonl", cli: "claude", script: answer,
			args: append(append([]string{}, claude...), "--max-turns", "3", "--json-schema", testSchema, "--permission-mode", "acceptEdits", "--allowedTools", "Bash")},
		{file: "claude_text.jsonl", cli: "claude", script: answer,
			args: append(append([]string{}, claude...), "--permission-mode", "acceptEdits", "--allowedTools", "Bash")},
		{file: "claude_failure.jsonl", cli: "claude", script: "rules:\n  - match: \"nil map write\"\n    visits:\n      - turns:\n          - error: 400\n",
			args: append(append([]string{}, claude...), "--max-turns", "3")},
		{file: "claude_max_turns.jsonl", cli: "claude", script: manySteps,
			args: append(append([]string{}, claude...), "--max-turns", "2", "--permission-mode", "acceptEdits", "--allowedTools", "Bash")},
		{file: "claude_many_steps.jsonl", cli: "claude", script: manySteps,
			args: append(append([]string{}, claude...), "--permission-mode", "acceptEdits", "--allowedTools", "Bash")},
		{file: "codex_success.jsonl", cli: "codex", script: answer,
			args: append(append([]string{}, codex...), "--output-schema", "SCHEMA", "--sandbox", "workspace-write", "-")},
		{file: "codex_text.jsonl", cli: "codex", script: answer,
			args: append(append([]string{}, codex...), "--sandbox", "workspace-write", "-")},
		{file: "codex_failure.jsonl", cli: "codex", script: "rules:\n  - match: \"nil map write\"\n    visits:\n      - turns:\n          - error: 400\n",
			args: append(append([]string{}, codex...), "-")},
		{file: "codex_many_steps.jsonl", cli: "codex", script: manySteps,
			args: append(append([]string{}, codex...), "--sandbox", "workspace-write", "-")},
	}
}

// runRecording runs rec's real CLI in a fresh work dir holding a.go and
// returns its stdout with the work dir replaced by recordedWorkDir.
func runRecording(t *testing.T, rec recording) []byte {
	t.Helper()
	var cli realCLI
	for _, c := range realCLIs(t) {
		if c.name == rec.cli {
			cli = c
		}
	}
	_, url := scriptedServer(t, rec.script)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nvar m map[string]int\n\nfunc Set() { m[\"x\"] = 1 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{}, rec.args...)
	for i, a := range args {
		if a == "SCHEMA" {
			f := filepath.Join(t.TempDir(), "schema.json")
			if err := os.WriteFile(f, []byte(testSchema), 0o644); err != nil {
				t.Fatal(err)
			}
			args[i] = f
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli.bin, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range cli.env(t, url) {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(recordedTask)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("%s %s: %v\nstderr:\n%s", rec.cli, rec.file, err, stderr.String())
	out := bytes.ReplaceAll(stdout.Bytes(), []byte(dir), []byte(recordedWorkDir))
	return tempPath.ReplaceAll(out, []byte("/tmp/stratus-test"))
}

// tempPath is any other directory of the test's (the CLI's config dir).
var tempPath = regexp.MustCompile(`/tmp/Test[^"/]*(/[0-9]+)?`)

// shape is a recording's lines reduced to what a shim reads: each line's
// event type (type, subtype, item type, content block types) and its keys.
// Claude Code's system lines other than init are left out: it prints them
// as it sees fit (task_started/task_notification when it moves a slow
// tool call to the background, as on a loaded machine) and the shim reads
// none of them.
func shape(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			out = append(out, "not json")
			continue
		}
		if m["type"] == "system" && m["subtype"] != "init" {
			continue
		}
		sig := fmt.Sprint(m["type"])
		if s, ok := m["subtype"]; ok {
			sig += "/" + fmt.Sprint(s)
		}
		if it, ok := m["item"].(map[string]any); ok {
			sig += "/" + fmt.Sprint(it["type"]) + keys(it)
		}
		if msg, ok := m["message"].(map[string]any); ok {
			if cs, ok := msg["content"].([]any); ok {
				for _, c := range cs {
					if cm, ok := c.(map[string]any); ok {
						sig += "/" + fmt.Sprint(cm["type"])
					}
				}
			}
		}
		out = append(out, sig+keys(m))
	}
	return out
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return "{" + strings.Join(ks, ",") + "}"
}

func TestRecordings_AreWhatTheRealCLIsPrint(t *testing.T) {
	for _, rec := range recordings() {
		t.Run(rec.file, func(t *testing.T) {
			t.Parallel()
			got := runRecording(t, rec)
			path := filepath.Join("testdata", "shim", rec.file)
			if *record {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := shape(t, got), shape(t, want); !reflect.DeepEqual(g, w) {
				t.Errorf("the real %s now prints lines shaped\n%s\nbut %s holds\n%s\nre-record with -record and check the shim still reads them",
					rec.cli, strings.Join(g, "\n"), path, strings.Join(w, "\n"))
			}
		})
	}
}
