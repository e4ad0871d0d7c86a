// Package runview reads a run back from its store records, on either
// target: the run's status with each step's verdict (View, what `stratus
// status` shows), and the progress events the run's worker service
// emitted, reconstructed from successive reads of its steps and attempts
// (Tracker, what `stratus run --target aws` prints while it follows an
// execution it does not host). The events are worker.Events, so the
// lines a progress.Display prints read as an embedded run's ("follows it with
// the same progress lines"), a running attempt's counters included as they
// move (README.md § Live progress). It also names runs: Resolve reads the RUN
// every command takes (a run id, a unique prefix of one, a task id, latest;
// README § Naming a run), and List / ListStatus list them as `stratus runs`
// and the viewer do.
//
// It reads through store.Store only: the SQLite store of an embedded work
// dir and the DynamoDB store of a deployed stack alike.
//
// What it deliberately does not do: it does not see events that leave no
// record (warnings, the supervisor's narrowing notice), and a finalize
// turn's end shows the turn's recorded outcome (done/failed), not the
// synthesis outcome the embedded line names. Lines come in step creation
// order per read, so a supervisor observation that overlaps the next step
// may print before or after that step's start, unlike an embedded run's
// wall-clock order.
package runview
