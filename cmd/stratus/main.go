// Command stratus runs worc-format agent flows: compiled to Amazon States
// Language, executed by the embedded executor (the default) or by AWS Step
// Functions. One file per subcommand; each has an options struct and a
// runX function the tests call directly.
//
// Built with -tags slim (make build's bin/stratus), it links neither the
// AWS SDK nor the run viewer and hands the commands that need them to the
// build without the tag, stratus-full, beside it (companion.go, slim.go). The
// files only the full build has say so: //go:build !slim.
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/safetext"
)

// IO is where a command reads and writes, so tests can capture it.
type IO struct {
	In  io.Reader
	Out io.Writer
	Err io.Writer
}

// exitError carries an exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func main() {
	if !fullBuild && wantsFull(os.Args[1:]) {
		// Before any flag is read: the command runs in FullBinary as a
		// whole, as if started there.
		err := handOff()
		fmt.Fprintf(os.Stderr, "stratus: %v\n", err)
		if argsAskJSON(os.Args[1:]) {
			writeJSONError(os.Stdout, err, ExitFailed)
		}
		os.Exit(ExitFailed)
	}
	cpuPath, tracePath := profilePaths()
	stop := cpuProfile(cpuPath)
	stopTrace := execTrace(tracePath)
	code := Main(os.Args[1:], IO{In: os.Stdin, Out: os.Stdout, Err: os.Stderr})
	stopTrace()
	stop()
	os.Exit(code)
}

// EnvCPUProfile names a file this process writes its CPU profile to
// (runtime/pprof; read with `go tool pprof`): how a step's own time is
// broken down (README.md § Performance). Unset: no profile.
const EnvCPUProfile = "STRATUS_CPUPROFILE"

// cpuProfile starts a CPU profile into path ("" = none) and returns what
// stops it and writes it out; a profile that cannot start is said on
// stderr and the command runs without it.
func cpuProfile(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stratus: warning: %s=%s: no CPU profile: %v\n", EnvCPUProfile, path, err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

// profilePaths returns the files this process writes its CPU profile and
// execution trace to ("" = none) and unsets both variables: they are this
// process's alone, and the processes it starts (its reaper, runner
// processes, engines calling stratus) would write over the same files. One
// file named by both gets the profile, and no trace (said on stderr).
func profilePaths() (cpu, trace string) {
	cpu, trace = os.Getenv(EnvCPUProfile), os.Getenv(EnvTrace)
	os.Unsetenv(EnvCPUProfile)
	os.Unsetenv(EnvTrace)
	if trace != "" && trace == cpu {
		fmt.Fprintf(os.Stderr, "stratus: warning: %s and %s name one file (%s): the CPU profile is written there, no trace\n", EnvCPUProfile, EnvTrace, cpu)
		trace = ""
	}
	return cpu, trace
}

// EnvTrace names a file this process writes its execution trace to
// (runtime/trace; read with `go tool trace`): where a step's wall time
// goes, as the regions the worker API, the runner and the executor mark
// (README.md § Performance). Unset: no trace.
const EnvTrace = "STRATUS_TRACE"

// execTrace starts an execution trace into path ("" = none) and returns
// what stops it; a trace that cannot start is said on stderr and the
// command runs without it.
func execTrace(path string) func() {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = trace.Start(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "stratus: warning: %s=%s: no trace: %v\n", EnvTrace, path, err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() { trace.Stop(); f.Close() }
}

// Main runs the CLI with args and returns the process exit status (see
// exitcodes.go). With --json, an error the command did not report itself
// is also a JSON object on stdout (jsonerror.go).
func Main(args []string, io IO) int {
	return execute(newRootCmd, args, io)
}

// execute runs the command tree newRoot builds on io: each error once on
// stderr, and as JSON on stdout when the command was asked for --json and
// has not printed its result (writeJSONError).
func execute(newRoot func(IO) *cobra.Command, args []string, io IO) int {
	out := &stdoutWatch{w: io.Out}
	io.Out = out
	root := newRoot(io)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return ExitOK
	}
	code, report := exitStatus(err)
	if report == nil {
		return code // the command said why (its result, or on stderr)
	}
	// An error may quote what an engine wrote (a reason, a path of its
	// commit): its lines stay, nothing in them drives the terminal
	// (docs/security.md § Text an engine wrote).
	fmt.Fprintf(io.Err, "stratus: %s\n", safetext.Block(report.Error()))
	var ee *exitError
	if !errors.As(err, &ee) {
		if hint := deniedHint(err); hint != "" {
			fmt.Fprintf(io.Err, "stratus: %s\n", hint)
		}
	}
	if wantsJSON(cmd, args) && !out.resultWritten() {
		writeJSONError(out, report, code)
	}
	return code
}

// exitStatus is err's exit status and the error to report: nil when the
// command already reported it (an *exitError without its error).
func exitStatus(err error) (int, error) {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code, ee.err
	}
	if code := stratus.ErrorCode(err); code == stratus.EINVALID || code == stratus.ENOTFOUND || isUsage(err) || cobraUsage(err) {
		return ExitUsage, err
	}
	return ExitFailed, err
}

func newRootCmd(io IO) *cobra.Command {
	root := &cobra.Command{
		Use:           "stratus",
		Short:         "Run worc-format agent flows on Step Functions, or embedded on one machine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// --version as cobra's Version field would make it (-v, --version),
	// printed by the root's RunE: cobra prints a custom version with a
	// text/template, whose reflective method calls keep every exported
	// method of every linked type in the binary (go-github's thousands of
	// accessors) and make each start slower (README.md § Performance).
	showVersion := root.Flags().BoolP("version", "v", false, "version for stratus")
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	root.Args = cobra.ArbitraryArgs
	// Every subcommand's (none has its own PersistentPreRunE).
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return checkDirFlag(c) }
	root.RunE = func(c *cobra.Command, args []string) error {
		if *showVersion {
			_, err := fmt.Fprintln(c.OutOrStdout(), versionLine())
			return err
		}
		return subcommandMissing(c, args)
	}
	root.AddCommand(
		newInstallCmd(io),
		newRunCmd(io),
		newWatchCmd(io),
		newPromoteCmd(io),
		newSubmitCmd(io),
		newTasksCmd(io),
		newResumeCmd(io),
		newStatusCmd(io),
		newRunsCmd(io),
		newPullCmd(io),
		newMergeTaskCmd(io),
		newCancelCmd(io),
		newDevCmd(io),
		newValidateCmd(io),
		newDoctorCmd(io),
		newCompileCmd(io),
		newGraphCmd(io),
		newUICmd(io),
		newLogsCmd(io),
		newPruneCmd(io),
		newRunnerCmd(io),
		newHostCmd(io),
		newEngineCmd(io),
		newWorkerCmd(io),
		newContractCmd(io),
		newApproveCmd(io),
		newRejectCmd(io),
		newAnswerCmd(io),
	)
	return root
}

type usageError struct{ error }

// dirMayBeMade is the annotation of a command whose --dir may not exist
// yet (install makes it).
const dirMayBeMade = "stratus.dir-may-be-made"

// checkDirFlag refuses, for every command with a --dir, a --dir that is
// not a directory (a file; a path through a file) or, for every command
// but one annotated dirMayBeMade, that does not exist: bad input, before
// the command reads or writes anything. Errors: EINVALID, field "dir" (as
// status's ENOTFOUND for a dir with no run), naming the value and what
// --dir takes (exit 2).
func checkDirFlag(c *cobra.Command) error {
	f := c.Flags().Lookup("dir")
	if f == nil {
		return nil
	}
	dir := f.Value.String()
	mayBeMade := c.Annotations[dirMayBeMade] != ""
	valid := "valid for --dir: a work directory holding .stratus/ (stratus install --dir DIR makes one)"
	if mayBeMade {
		valid = "valid for --dir: a directory, or a path to make one at"
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && mayBeMade:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "%q does not exist; %s", dir, valid)
	case errors.Is(err, syscall.ENOTDIR):
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "%q is not a directory: a file is on its path; %s", dir, valid)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said already
		}
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "%q cannot be looked up: %v; %s", dir, err, valid)
	case !fi.IsDir():
		return stratus.FieldErrorf(stratus.EINVALID, "dir", "%q is not a directory (%s); %s", dir, inputfile.Kind(fi.Mode()), valid)
	}
	return nil
}

// subcommandMissing is the error of a command group run without a known
// subcommand: a usage error (exit 2) that lists the group's subcommands,
// as cobra knows them (so the list cannot drift from the commands).
func subcommandMissing(group *cobra.Command, args []string) error {
	var names []string
	for _, c := range group.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	list := strings.Join(names, ", ")
	if len(args) > 0 {
		hint := ""
		if group.SuggestionsMinimumDistance <= 0 {
			group.SuggestionsMinimumDistance = 2 // cobra's own default, set where it finds commands
		}
		if s := group.SuggestionsFor(args[0]); len(s) > 0 {
			hint = "; did you mean " + strings.Join(s, " or ") + "?"
		} else if args[0] == "version" && !group.HasParent() {
			hint = "; the version is stratus --version"
		}
		return usageError{fmt.Errorf("unknown command %q%s; commands: %s (see --help)", args[0], hint, list)}
	}
	return usageError{fmt.Errorf("name a command: %s (see --help)", list)}
}

// cobraUsage recognises the argument errors cobra returns itself.
func cobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "accepts ", "invalid argument", "flag needs an argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
