// Package sharedtest is test support only: it tells tests where the shared
// specification material lives. That is ../shared beside the checkout (the
// directory next to the module root, the one holding go.mod), as CI lays it
// out; tests read it in place and never copy it (../shared/STYLE.md § Tests).
//
// The module root is found by walking up from the working directory the
// test binary started in, which go test sets to the package directory.
// Nothing outside _test.go files imports this package.
package sharedtest
