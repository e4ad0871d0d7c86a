// Package taskpool is the embedded task pool `stratus watch` serves
// (README.md § Task pool): the task files under <tasks_dir>/preparing,
// pending, done and failed; which pending task may run next and why each
// other one waits (Decide: the watcher's queue, depends_on before priority,
// priority high > mid > low, ties in natural file name order); the claims
// that keep two watchers from running one task (an exclusive file per task
// under .stratus/pool/claims, locked for as long as its watcher lives, so a
// watcher killed at any point leaves a claim the next one adopts); the move
// of an ended task to done/ or failed/ beside its summary, and the audit
// commit of exactly those files (docs/architecture.md § The task pool).
//
// It does not run tasks: cmd/stratus's watch claims, runs and resumes them
// through the orchestrator. It does not serve a pool on AWS.
package taskpool
