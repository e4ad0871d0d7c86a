// Package secrettest is the one conformance suite every secret.Source
// runs (docs/architecture.md § Ports and their conformance suites). It checks the contract stated on
// secret.Source: a key of at least secret.MinKeyBytes, the same key on
// every call, to concurrent callers and to every Source over the same
// backing store (a token minted with one verifies with another: the
// dispatch and worker-API Lambdas), distinct keys for distinct backing
// stores, and a returned slice the caller may change.
//
// It does not test how a backing store is laid out (file modes, secret
// encodings): each implementation's own tests do.
package secrettest
