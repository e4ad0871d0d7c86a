// Package sinktest is the one conformance suite every sink.Sink
// implementation runs (docs/architecture.md § Ports and their conformance
// suites: one interface, one suite, every implementation passes it). It checks the contract stated on
// sink.Sink: round trip, overwrite, ENOTFOUND for a missing key, EINVALID
// for a key that could escape the root, bytes kept verbatim, atomic
// last-write-wins under concurrent Puts, a body over the Lambda payload
// limit (7 MiB), and a canceled context storing nothing.
//
// It does not test implementation details (file modes, paths on disk):
// those belong to each implementation's own tests.
package sinktest
