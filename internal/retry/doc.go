// Package retry is the policy for a step's transient failures: what a
// failed attempt leads to and which provider the next attempt runs on,
// as pure functions over the configuration (agents.retry,
// agents.max_stage_attempts, agents.primary, agents.allowed; worc
// configuration.md § agents, § agents.retry) and one step's attempt
// history. It also owns the numbers the compiler writes into every
// worker Task state's Retry (Policy.TransientRetrier,
// InfrastructureRetrier), so that the compiled state machine and the
// decisions cannot disagree: the wait a Decision announces is the wait
// the Retrier applies (ASL spec § Retrying after error).
//
// The policy, after worc's:
//
//   - Only the transient classes are handled here: provider_unavailable
//     and network_unavailable (retried on the same provider up to
//     max_attempts times, then the next provider of the fallback order)
//     and rate_limited (never retried on the same provider — a usage
//     window wants a long defer, not a hot loop — but fallback-eligible).
//     quality, timeout and infrastructure are NotTransient: the compiled
//     machine's Catch (or the infrastructure Retrier) handles them.
//   - The fallback order of a node (Policy.Order): a node on the global
//     primary falls back to the other allowed providers in agents.allowed
//     order; a node pinned to another provider falls back to the global
//     primary first, then the others. Stratus's bundled stand-in engines
//     (echo, script: config.Provider.StandIn) are never fallbacks: they
//     answer without a model. The order is cut at max_stage_attempts
//     providers; a max_stage_attempts above what agents.allowed can give
//     leaves the extra hops unused.
//   - When every provider of the order has failed (or is known to be
//     rate-limited past now), the step parks: its state machine waits in
//     "<node>.wait" and enters the node again at the time the Decision
//     names. That time is the earliest of the providers' known rate-limit
//     resets and now + the park interval (the compiled MaxDelaySeconds
//     doubled with every park of the step: max_delay_s, 2×, 4×, ... capped
//     at MaxParkInterval or max_delay_s if larger), and never later than
//     what is left of max_blocked_s. After a park the next attempt runs on
//     the first provider of the order not known to be rate-limited then.
//   - A step that has been parked max_blocked_s seconds in all gives up:
//     the run ends manual_action_required (stratus.BlockedTimeout).
//     max_blocked_s 0 never parks.
//
// One difference from worc, forced by the state machine: worc restarts
// the backoff exponent with each provider; one Retrier counts every
// transient retry of its state's entry, so the n-th retry after the
// first waits min(ceil(base_delay_s) × 2^n, ceil(max_delay_s)) whichever
// provider it runs on. An entry of the state starts afresh after each
// park, as $$.State.RetryCount does.
//
// What it deliberately does not do: classify failures (the failure
// classes are strings here, the same as internal/failclass's), read or
// write the store, send anything to the state machine, or remember a
// rate limit beyond the history it is given (a limit one step met is not
// known to the next step).
package retry
