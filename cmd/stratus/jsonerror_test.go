package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/progress"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/worker"
)

// jsonCommands is every command of the tree with a --json flag, by its
// path ("engine conform").
func jsonCommands() []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("json") != nil {
			out = append(out, strings.TrimPrefix(c.CommandPath(), "stratus "))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}))
	return out
}

// parseJSONError reads stdout as exactly one JSONError line.
func parseJSONError(t *testing.T, stdout string) JSONError {
	t.Helper()
	if strings.Count(stdout, "\n") != 1 || !strings.HasSuffix(stdout, "\n") {
		t.Fatalf("stdout is not one line:\n%s", stdout)
	}
	var e JSONError
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("stdout is not a JSON error object: %v\n%s", err, stdout)
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("error object lacks its code or message: %s", stdout)
	}
	return e
}

// TestJSONFlag_AnErrorIsAJSONObjectOnStdout: every command with --json
// that fails before it has a result prints {"error": {"code", "message",
// "field"?}} on stdout, and exits as it does without --json (README § Exit
// status). Each is reproduced with bad input; before the rule, stdout was
// empty.
func TestJSONFlag_AnErrorIsAJSONObjectOnStdout(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() // no .stratus: nothing was installed or run here
	bad := t.TempDir() // a store that is not a database (exit 1)
	writeTestFile(t, filepath.Join(bad, ".stratus/stratus.db"), "not a database")
	installed := t.TempDir() // installed, with a task whose flow does not exist
	if code := Main([]string{"install", "--dir", installed}, IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}); code != ExitOK {
		t.Fatalf("install: exit %d", code)
	}
	writeTestFile(t, filepath.Join(installed, "nosuch.md"), "---\nid: t1\ntitle: T\ntask_type: nosuch\n---\nbody\n")
	writeTestFile(t, filepath.Join(installed, "broken.md"), "---\nid: t2\ntitle: T\ntask_type: broken\n---\nbody\n")
	writeTestFile(t, filepath.Join(installed, ".stratus/flows/broken.yaml"), "flow:\n  name: broken\n  nodes: [\n")
	const run = "r-20250101T000000-abcdef"
	type jsonCase struct {
		name  string
		args  []string
		exit  int
		code  string
		field string
	}
	cases := []jsonCase{
		{"run: no config", []string{"run", filepath.Join(dir, "task.md"), "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"run: bad --target", []string{"run", "task.md", "--target", "mars", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"run: no task", []string{"run", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"run: missing task file", []string{"run", filepath.Join(installed, "missing.md"), "--dir", installed, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"run: no such flow", []string{"run", filepath.Join(installed, "nosuch.md"), "--dir", installed, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"run: a flow that does not load", []string{"run", filepath.Join(installed, "broken.md"), "--dir", installed, "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"resume: no runs", []string{"resume", run, "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"status: no runs", []string{"status", run, "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, "dir"},
		{"status: broken store", []string{"status", run, "--dir", bad, "--json"}, ExitFailed, stratus.EINTERNAL, ""},
		{"status --follow: no runs", []string{"status", run, "--dir", dir, "--follow", "--json"}, ExitUsage, stratus.ENOTFOUND, "dir"},
		{"runs: bad --limit", []string{"runs", "--dir", dir, "--limit", "-1", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"runs: bad --status", []string{"runs", "--dir", dir, "--status", "finished", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"graph: no such built-in flow", []string{"graph", "nosuch", "--builtin", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"runs: broken store", []string{"runs", "--dir", bad, "--json"}, ExitFailed, stratus.EINTERNAL, ""},
		{"pull: no runs", []string{"pull", run, "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, "dir"},
		{"cancel: no runs", []string{"cancel", run, "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, "dir"},
		{"validate: no flows", []string{"validate", "--flows", filepath.Join(dir, "flows"), "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"doctor: nothing installed", []string{"doctor", "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"engine conform: no engine", []string{"engine", "conform", "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"approve: unknown run", []string{"approve", run, "gate", "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"reject: no reason", []string{"reject", run, "gate", "--dir", dir, "--json"}, ExitUsage, stratus.EINVALID, ""},
		{"answer: unknown run", []string{"answer", run, "gate", "yes", "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"prune: nothing installed", []string{"prune", "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"logs: no runs", []string{"logs", run, "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, "dir"},
		{"tasks: nothing installed", []string{"tasks", "--dir", dir, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"submit: no such flow", []string{"submit", filepath.Join(installed, "nosuch.md"), "--dir", installed, "--json"}, ExitUsage, stratus.ENOTFOUND, ""},
		{"promote: not in preparing/", []string{"promote", "nosuch", "--dir", installed, "--json"}, ExitUsage, stratus.ENOTFOUND, "task"},
		{"logs: bad --lines", []string{"logs", run, "--dir", dir, "--lines", "0", "--json"}, ExitUsage, stratus.EINVALID, ""},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[strings.Join(c.args[:cmdWords(c.args)], " ")] = true
	}
	for _, path := range jsonCommands() {
		if !covered[path] {
			t.Errorf("command %q has --json and no case here: add one", path)
		}
		// A usage error, the bad flag before --json and after it.
		cases = append(cases,
			jsonCase{path + ": unknown flag first", append(strings.Fields(path), "--no-such-flag", "--json"), ExitUsage, stratus.EINVALID, ""},
			jsonCase{path + ": unknown flag last", append(strings.Fields(path), "--json", "--no-such-flag"), ExitUsage, stratus.EINVALID, ""})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			code := Main(c.args, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
			// Without --json: the same exit status, nothing on stdout.
			var plainOut, plainErr bytes.Buffer
			var plain []string
			for _, a := range c.args {
				if a != "--json" {
					plain = append(plain, a)
				}
			}
			if pc := Main(plain, IO{In: strings.NewReader(""), Out: &plainOut, Err: &plainErr}); pc != code {
				t.Errorf("exit %d with --json, %d without", code, pc)
			}
			if code != c.exit {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.exit, out.String(), errb.String())
			}
			e := parseJSONError(t, out.String())
			if e.Error.Code != c.code || e.Error.Field != c.field {
				t.Errorf("code %q field %q, want %q %q: %s", e.Error.Code, e.Error.Field, c.code, c.field, out.String())
			}
			// The message is the one stderr shows.
			if !strings.Contains(errb.String(), "stratus: "+e.Error.Message+"\n") {
				t.Errorf("message %q is not stderr's:\n%s", e.Error.Message, errb.String())
			}
		})
	}
}

// cmdWords is how many of args name the command ("engine conform": 2).
func cmdWords(args []string) int {
	if len(args) > 1 && args[0] == "engine" {
		return 2
	}
	return 1
}

// TestJSONFlag_OneObjectPerFailure: a command that printed its result
// before it failed prints no second object; a stream of JSON lines ends
// with the error object, unless its result (run_ended) is already its
// last line (README § Exit status).
func TestJSONFlag_OneObjectPerFailure(t *testing.T) {
	t.Parallel()
	ev := worker.Event{Type: worker.EventStepStarted, RunID: "r-1", Node: "plan", StepRef: "plan#1", Attempt: 1}
	cases := []struct {
		name string
		do   func(io IO) error
		// wantLines are the lines of stdout, in order: "event", "run_ended",
		// "result" or "error".
		wantLines []string
		exit      int
	}{
		{"result, then an error", func(io IO) error {
			json.NewEncoder(io.Out).Encode(map[string]string{"run_id": "r-1"})
			return errors.New("after the result")
		}, []string{"result"}, ExitFailed},
		{"result, then its exit status", func(io IO) error {
			json.NewEncoder(io.Out).Encode(map[string]string{"run_id": "r-1"})
			return &exitError{code: ExitFailed}
		}, []string{"result"}, ExitFailed},
		{"events, then an error", func(io IO) error {
			d := progress.New(progress.Options{Out: io.Err, JSON: io.Out})
			d.Event(ev)
			d.Close()
			return stratus.Errorf(stratus.ECONFLICT, "the run moved on")
		}, []string{"event", "error"}, ExitFailed},
		{"events, run_ended, then its exit status", func(io IO) error {
			d := progress.New(progress.Options{Out: io.Err, JSON: io.Out})
			d.Event(ev)
			d.RunEnded(map[string]string{"run_id": "r-1", "status": "failed"})
			d.Close()
			return &exitError{code: ExitFailed}
		}, []string{"event", "run_ended"}, ExitFailed},
		{"events, run_ended, then an error", func(io IO) error {
			d := progress.New(progress.Options{Out: io.Err, JSON: io.Out})
			d.Event(ev)
			d.RunEnded(map[string]string{"run_id": "r-1", "status": "done"})
			d.Close()
			return errors.New("the commits were not pulled")
		}, []string{"event", "run_ended"}, ExitFailed},
		{"nothing, then an error", func(io IO) error {
			return stratus.FieldErrorf(stratus.EINVALID, "limit", "bad")
		}, []string{"error"}, ExitUsage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := func(io IO) *cobra.Command {
				r := &cobra.Command{Use: "stratus", SilenceUsage: true, SilenceErrors: true}
				r.SetOut(io.Out)
				r.SetErr(io.Err)
				cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return c.do(io) }}
				cmd.Flags().Bool("json", false, "")
				r.AddCommand(cmd)
				return r
			}
			var out, errb bytes.Buffer
			code := execute(root, []string{"x", "--json"}, IO{In: strings.NewReader(""), Out: &out, Err: &errb})
			if code != c.exit {
				t.Errorf("exit %d, want %d", code, c.exit)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
				var m map[string]json.RawMessage
				if err := json.Unmarshal([]byte(l), &m); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				switch {
				case m["error"] != nil && m["event"] == nil:
					got = append(got, "error")
				case string(m["event"]) == `"run_ended"`:
					got = append(got, "run_ended")
				case m["event"] != nil:
					got = append(got, "event")
				default:
					got = append(got, "result")
				}
			}
			if strings.Join(got, " ") != strings.Join(c.wantLines, " ") {
				t.Errorf("stdout lines %v, want %v:\n%s", got, c.wantLines, out.String())
			}
		})
	}
}

// TestJSONFlag_StdoutStillATerminal: the writer that watches stdout for
// a result keeps its file descriptor visible (progress.Terminal draws
// ticking lines only where stdout is not the same terminal).
func TestJSONFlag_StdoutStillATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := (&stdoutWatch{w: f}).Fd(); got != f.Fd() {
		t.Errorf("Fd %d, want the file's %d", got, f.Fd())
	}
	if got := (&stdoutWatch{w: &bytes.Buffer{}}).Fd(); got != ^uintptr(0) {
		t.Errorf("Fd of a buffer %d, want none", got)
	}
}

// TestJSONFlag_READMENamesEveryJSONCommand: README § Exit status lists the
// commands whose errors are JSON with --json; a new one is listed there.
func TestJSONFlag_READMENamesEveryJSONCommand(t *testing.T) {
	t.Parallel()
	readme := readFile(t, filepath.Join(testenv.ModuleRoot(t), "README.md"))
	_, list, ok := strings.Cut(readme, "With `--json` (")
	if !ok {
		t.Fatal("README § Exit status lacks its --json paragraph")
	}
	list, _, _ = strings.Cut(list, ")")
	for _, path := range jsonCommands() {
		if !strings.Contains(list, "`"+path+"`") {
			t.Errorf("README's --json list (%s) lacks `%s`", list, path)
		}
	}
}
