// Package storetest is the one conformance suite every store.Store
// implementation must pass (docs/architecture.md § Ports and their conformance
// suites: one interface, one suite, every implementation runs it).
// internal/store/sqlite runs it on a file; the DynamoDB implementation runs it
// against a moto server.
//
// It owns the observable contract of the port: what each method of
// store.Store documents, the error codes (ENOTFOUND, ECONFLICT, checked
// with stratus.ErrorCode), the atomicity of the conditional writes under
// concurrency, and how values round-trip (times to the millisecond in
// UTC, the zero time, nil versus zero cost, bodies byte for byte).
//
// It deliberately does not test what the port leaves open, so that no
// implementation is held to another's accidents: error message wording,
// what List*/CountVisits return for an unknown parent, whether a child
// record requires its parent to exist (every test creates the parents
// first, as the dispatch path does), what an empty DedupKey means, how
// large a record may be beyond the 1 MiB body it checks, and performance
// (benchmarks live with each implementation).
//
// Keys are unique per test (a random suffix), so newStore may hand every
// test a fresh store or stores sharing one backend (one DynamoDB table).
package storetest
