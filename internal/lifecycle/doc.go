// Package lifecycle owns what happens to a run as a whole, apart from the
// steps inside it (docs/architecture.md § The run lifecycle; DESIGN.md §
// Runs: one lifecycle, two runtimes): who owns a running run and whether that
// owner is still alive, how a run whose owner is gone is recorded
// interrupted, and where a stopped run resumes.
//
// It depends on the ports (internal/store), the compiled definition and
// the ASL interpreter (internal/asl), never on a runtime: the embedded
// orchestrator, `stratus run --target aws` and the Lambdas use the same
// rules, so that a run resumed on one machine and one resumed on AWS
// re-run the same steps.
//
// Resume works the same way on both runtimes: every dispatch message of a
// compiled machine carries its state's input, which dispatch records on
// the step (stratus.Step.Input), and every machine starts with a resume
// entry (internal/compiler.ResumeState) that sends an execution whose
// input names a dispatch state in resume_at straight there. PlanResume
// reads a run's steps and its definition and says which state to enter
// with which input. Step Functions' RedriveExecution is not used: moto
// 5.2.1 lacks it, LocalStack answers it 501, and it redrives only the
// same execution within 14 days of its end, from the failed state with
// its failed input — a new execution through the resume entry does all
// that and also resumes a run whose budget ran out, with the budget
// reset, or one that was interrupted while its execution still ran.
//
// It does not start, follow or stop executions or workers: the callers do,
// through their executor and launcher.
package lifecycle
