// Package engine holds Stratus's bundled child engines, each a conforming
// engine of the workflow child contract v1 (seed 003 § 9):
//
//   - Echo mirrors openseek's `echo` kind (seed 003 § 7.3): one agent_step
//     (step 1), one usage (7/3/10 tokens, all five fields), then the input
//     echoed as the report.
//   - Script answers deterministically per node id and visit from a scenario
//     file, staging parts through the worker API, so whole flows (rework
//     loops included) run without a model.
//
// They are run as `stratus engine echo` and `stratus engine script`.
package engine
