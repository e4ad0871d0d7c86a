package core

// The retry policy (internal/retry) in the worker: which provider an
// attempt after the first runs on, and what a transiently failed attempt
// leads to. The compiled state machine does the waiting (the worker
// state's Retry, and "<node>.park"/"<node>.wait"); the decisions here and
// the compiled numbers come from the same retry.Policy, so they agree.

// Progress events of the retry policy.
const (
	// EventStepRetrying: an attempt failed transiently and the step goes
	// on with another attempt (Reason says on which provider, and when).
	EventStepRetrying = "step_retrying"
	// EventStepParked: every provider the step may run on is unavailable
	// or rate-limited; the step waits (Reason says why and until when).
	EventStepParked = "step_parked"
)
