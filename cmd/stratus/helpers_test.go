package main

import (
	"path/filepath"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// Helpers the tests share, with the AWS tests and without them (the
// slim build compiles the tests without aws_*_test.go).

// The example's steps through the built-in implementation flow (the
// review loop runs twice), as TestRun_ExampleThroughImplementationFlow
// has them for an embedded run.
const exampleSteps = "planning#1:done implementation#1:done review#1:rework fixing#1:done review#2:accept publish#1:done"

// installExample installs the script engine with the example's scenario
// and task into a new work dir, as `make demo` does.
func installExample(t *testing.T, root string) string {
	t.Helper()
	return installTask(t, filepath.Join(root, "examples/scenario.yaml"), exampleTask(t))
}

// installTask installs the script engine with scenario into a new work
// dir holding task as task.md.
func installTask(t *testing.T, scenario, task string) string {
	t.Helper()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", scenario); r.code != 0 {
		t.Fatalf("install: %d %s", r.code, r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), task)
	return dir
}

func exampleTask(t *testing.T) string {
	return readFile(t, filepath.Join(testenv.ModuleRoot(t), "examples/task.md"))
}
