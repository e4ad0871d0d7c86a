// Package supervisor is the supervisor layer's logic above any flow
// (docs/contracts.md § The supervisor, § What observe.mode costs, § Running without a supervisor, § What the supervisor layer does):
// the deterministic packet of a run's facts the finalize turn reads, the
// prompts of the finalize and observe turns, the observe-mode decision after
// each step, the narrowing of the config's cadence by a flow, and the
// sanitizing of the finalize turn's prose into what reaches summary.md.
//
// It is pure: it reads report.Facts and texts and returns values. Running a
// turn — a synthetic step of kind report.Kind whose attempt goes through the
// ordinary runner and engine — and recording what it returned is
// internal/worker's job; rendering summary.md is internal/report's. The
// layer is advisory by construction: nothing here routes, reworks or
// blocks.
//
// Not implemented: the handoff phase (a subtask brief between decompose
// regions; {predecessor_context} keeps its deterministic floor), memory,
// a continuing observe session (every observation is a fresh turn), and the
// interruption entries of a resumed task (Stratus does not resume a run).
package supervisor
