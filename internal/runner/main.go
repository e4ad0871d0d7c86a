package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/logging"
)

// Exit statuses of a runner process (`stratus runner`, stratus-runner).
const (
	ExitOK      = 0 // the result was delivered
	ExitFailed  = 1 // any other failure
	ExitUsage   = 2 // its environment is incomplete or wrong
	ExitRefused = 4 // the result was refused (409): the step moved on without it
	ExitSpooled = 5 // the result could not be delivered: kept in a spool file
)

// Main is a runner process: it reads STRATUS_API_URL, STRATUS_HANDLE,
// STRATUS_TASK_ID, STRATUS_PARENT_PID, STRATUS_BIN and STRATUS_SPOOL_DIR
// through getenv, runs one attempt (Run) until SIGINT or SIGTERM, logs to
// stderr (one record a line: internal/logging) and returns the process's
// exit status. Both `stratus runner` and the small stratus-runner binary
// (which links no server, store or AWS SDK, so it starts in a fraction of
// the time) are this function.
func Main(getenv func(string) string, stderr io.Writer) int {
	log := logging.New(stderr, "runner")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, v := range []string{launch.EnvAPIURL, launch.EnvHandle} {
		if getenv(v) == "" {
			log.Error(fmt.Sprintf("%s is not set; a runner is started by Stratus with %s and %s", v, launch.EnvAPIURL, launch.EnvHandle))
			return ExitUsage
		}
	}
	self := getenv(launch.EnvStratus)
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			log.Error(err.Error())
			return ExitFailed
		}
		self = exe
	}
	if v := getenv(launch.EnvParentPID); v != "" {
		pid, err := strconv.Atoi(v)
		if err != nil || pid <= 0 {
			log.Error(fmt.Sprintf("%s=%q: want the pid of the process that owns the run", launch.EnvParentPID, v))
			return ExitUsage
		}
		var cancel context.CancelFunc
		ctx, cancel = WatchParent(ctx, pid, ParentPoll, log)
		defer cancel()
	}
	err := Run(ctx, Options{APIURL: getenv(launch.EnvAPIURL), Handle: getenv(launch.EnvHandle), TaskID: getenv(launch.EnvTaskID), Self: self, Log: log, SpoolDir: getenv(launch.EnvSpoolDir)})
	if err != nil {
		LogEnd(log, err) // said once, as a record of the runner's log
	}
	return ExitCode(err)
}

// ExitCode is the exit status a runner process ends with after Run
// returned err: ExitOK for nil, ExitRefused, ExitSpooled, else ExitFailed.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrRefused):
		return ExitRefused
	case errors.Is(err, ErrSpooled):
		return ExitSpooled
	}
	return ExitFailed
}
