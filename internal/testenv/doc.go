// Package testenv is test support only: it tells tests where their inputs
// are and what to do when something outside Go is missing.
//
//   - The test vectors are this project's own: a copy lives in the
//     repository at testdata/cases ([Cases]), so a clone passes its tests
//     alone. TestCases_CopyEqualsShared fails when the copy drifts from
//     ../shared/cases, whenever that directory is beside the checkout
//     (README.md § Two commands).
//   - worc's peer flows and tasks are third-party text the repository must
//     not hold: [Peers] reads them from ../shared/peers beside the checkout
//     (as CI lays it out) and skips the test, naming what is missing, when
//     they are not there.
//   - Anything else outside Go (git, make, python3 with moto, …) goes
//     through [MustHaveCommand] or [Missing]: a test skips with a one-line
//     notice naming the tool. With STRATUS_REQUIRE_ALL=1 (set by .ci/run)
//     every such skip is a failure instead, so CI skips nothing.
//
// Each skip is also appended to the file named by STRATUS_SKIP_LOG, when
// set, so `make test` can list at its end what was skipped and why.
//
// It does not skip for anything else: a platform limit (symlinks on
// Windows) or testing.Short are the calling test's business. Nothing
// outside _test.go files and other test-support packages imports it.
package testenv
