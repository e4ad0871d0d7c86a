// Package contracttest is test support only: it owns the shared child
// contract vectors of testdata/cases/contract (pairs NAME.sh +
// NAME.expect.json, docs/contracts.md § Child contract v1) for every test
// that runs them.
//
// It owns three things:
//   - the vector format ([Vector], [Launch], [Want]), decoded strictly
//     (unknown keys fail) and telling a "report": null apart from an absent
//     report;
//   - loading: [Vectors] returns every pair, sorted by name, and [Load] one
//     by name;
//   - the check of an outcome against want ([Want.Check]): terminal, report
//     (JSON-equal, or absent), failure_contains, no failure on a terminal
//     other than Failed, a "cr-" attempt id, steps, prompt_tokens,
//     completion_tokens and cost_usd (within 1e-9, or null), returned as a
//     list of mismatches so each caller reports them its own way.
//
// It does not run anything: the contract package's tests run a vector
// through the runner, cmd/stratus's through `stratus contract run`, and
// each checks what only it can see (exit codes, JSON keys, max_wall_ms).
//
// The outcome checked is [Result], the JSON shape of contract.Result, which
// is also the object `stratus contract run` prints. The package does not
// import contract: contract's in-package tests import this package, and
// that would be an import cycle; they convert a contract.Result field by
// field instead. Nothing outside _test.go files imports this package.
package contracttest
