package main

import "github.com/stratusflow/stratus/internal/runner"

// Exit statuses of every stratus command (documented in README.md).
const (
	ExitOK     = 0 // success; for `run`: the run ended done
	ExitFailed = 1 // the command failed; for `run`: the run ended failed; for `validate`: a fatal problem
	ExitUsage  = 2 // bad flags, arguments or input files
	ExitManual = 3 // `run`: the run ended manual_action_required
	// ExitInterrupted: `run` was interrupted (SIGINT/SIGTERM, or a full
	// disk: docs/security.md § Output that did not persist); its workers
	// were stopped and a summary written. 128 + SIGINT, as shells report it.
	ExitInterrupted = 130
	// ExitRefused: `runner`'s late report or failure was refused (409): the
	// step moved on without it.
	ExitRefused = runner.ExitRefused
	// ExitSpooled: `runner` could not deliver its report; it is kept in a
	// spool file (named on stderr).
	ExitSpooled = runner.ExitSpooled
)
