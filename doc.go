// Package stratus holds the domain at the centre of Stratus: the error type
// every layer returns, and the vocabulary shared by the store, the worker
// API, the runner and the orchestrator (runs, steps, attempts, output
// events). It imports nothing from AWS or HTTP; adapters depend on it.
//
// See docs/architecture.md § Vocabulary for the words used here.
package stratus
