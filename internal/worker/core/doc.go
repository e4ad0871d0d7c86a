// Package core is the worker service's shared context: Service (its
// Config — store, sink, task tokens, launcher, minter, clock, logger — and
// the state its operations share in one process), the Caller a credential
// resolves to (auth.go), the events it reports, and the shapes of the
// worker API's bodies (docs/contracts.md § Request and response bodies).
// The operations of the worker API are packages beside it under
// internal/worker, each taking a *Service; they do not import each other
// (docs/architecture.md § The worker API's operations).
package core
