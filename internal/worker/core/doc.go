// Package core is the worker service's shared context: Service (its
// Config — store, sink, task tokens, launcher, minter, clock, logger — and
// the state its operations share in one process), the Caller a credential
// resolves to and the fencing of every write (auth.go; docs/contracts.md §
// Bearer authentication, docs/security.md § Handles), the events it
// reports, and the shapes of the worker API's bodies (docs/contracts.md §
// Request and response bodies). The operations of the worker API and the
// shared layers are packages beside it under internal/worker, each taking
// a *Service; core imports none of them and reaches the supervisor layer
// only through Layers, which the facade's New sets
// (docs/architecture.md § The worker API's operations).
package core
