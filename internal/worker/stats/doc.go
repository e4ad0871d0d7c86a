// Package stats is the worker API's stats operation (POST
// /v1/worker/stats): a running attempt's self-reported counters — agent
// steps, tokens, cost — recorded on its attempt, reported as progress, and
// sent on to the state machine as the step's heartbeat
// (docs/contracts.md § Request and response bodies, § The event stream).
package stats
