// Package compiler turns a validated worc flow (internal/flow) into an
// Amazon States Language definition: the state machine one run executes,
// on AWS Step Functions, on moto's interpreter, and on Stratus's embedded
// executor alike. `make statemachines` writes one file per flow under
// statemachine/, so the output is byte-for-byte deterministic.
//
// What it owns: the shape of the compiled machine — one Task state per node
// (sqs:sendMessage.waitForTaskToken to the dispatch queue, carrying only
// run_id, node, kind, the task token and, in a flow with decomposition,
// the subtask order), a "<node>.stop" state after every worker node
// (agent, evaluator, checks, tool) that its Catch passes first, sending a
// plain "stop" message so the dispatch side stops the worker before the
// failure routes, a Choice per node with outcome edges routing on
// $.last.outcome, a budget Choice and a counting Pass (States.MathAdd) in
// front of every loop or inline-budget edge (clamped to the config's
// max_fix_cycles, and charging the global backstop), the wait for a human
// after an agent that may ask one (its hitl grant), the per-subtask
// repetition of a decomposition's sub_flow, and the terminals done /
// failed / manual_action_required. Unknown outcomes, spent budgets,
// infrastructure failures of checks, tool and hitl steps, and any outcome
// but the pass outcome of a gate with no outgoing edge fail closed to
// manual_action_required; a best_effort agent's failure continues to its
// successor. Every Task state retries infrastructure errors; a worker
// state also retries transient provider failures with the numbers of
// the run's retry policy (internal/retry, config.yaml agents.retry and
// agents.max_stage_attempts), and parks its step — "<node>.park" and
// "<node>.wait" — when every provider is unavailable or rate-limited.
// Compile documents the exact shape.
//
// Sections: DESIGN.md § The path of one step (steps 1 and
// 5), § The compiled state machines and the embedded executor (JSONPath
// only, the MathAdd and StringToJson intrinsics, readable state names),
// § Limits (the state carries references and small scalars, never
// bodies; 25,000 history events per execution, see Compile);
// docs/contracts.md § Flows and task types, § Fatal validation (a flow that
// fails it does not compile; a budget above the config cap is clamped) and
// § Tools (a tool timeout parks the task at manual_action_required); worc
// reference.md § agent node (best_effort, hitl), § hitl node, § Edges, §
// decomposition, and configuration.md § agents (the global fix cap).
//
// What it deliberately does not do:
//
//   - Evaluate `when` facts or per-task node disables: the dispatch step
//     does that at run time and completes a skipped node's Task state
//     with the node's pass outcome (flow.PassOutcome), so a skipped gate
//     does not gate.
//   - Decide whether a task decomposes: the proposed_by step's value says
//     how many subtasks (`subtasks`); the worker applies the config gate.
//   - Model a non-blocking evaluator's max_rework_per_stage: routing is by
//     outcome only.
//   - Decide a retry: the worker fails a state with the error name the
//     retry policy's decision calls for (ErrProviderUnavailable and the
//     other transient names, ErrBlocked with retry.Decision.Cause,
//     ErrBlockedTimeout); the machine only applies the Retriers and
//     Catches that name them.
//   - Use Parallel/Map (subtasks run one after another).
//   - Apply the ${DispatchQueueUrl} substitution: the SAM template (or the
//     embedded executor) does.
package compiler
