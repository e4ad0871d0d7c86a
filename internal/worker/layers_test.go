package worker_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The worker service's packages keep their places
// (docs/architecture.md § The worker API's operations): an operation
// imports no other operation, a shared layer imports no operation, core
// imports nothing of internal/worker, and only the facade's own tests and
// workertest import the facade. An import that breaks one is reported with
// the file that makes it.
func TestLayers_OperationsImportNoOperation(t *testing.T) {
	t.Parallel()
	const module = "github.com/stratusflow/stratus/internal/worker"
	operations := []string{"dispatch", "fetch", "artifact", "bundle", "submit", "hitl", "stats", "degradation", "rendersize"}
	layers := []string{"core", "resolve", "upload", "publishing", "vars", "verify", "attempt", "gate", "supervise"}
	dirs, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "workertest" {
			continue
		}
		pkg := d.Name()
		seen = append(seen, pkg)
		if !slices.Contains(operations, pkg) && !slices.Contains(layers, pkg) {
			t.Errorf("internal/worker/%s is neither an operation nor a shared layer: add it to the architecture's lists (and this test's)", pkg)
		}
		files, _ := filepath.Glob(filepath.Join(pkg, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if path == module {
					t.Errorf("%s imports the facade, internal/worker: the facade imports it", f)
					continue
				}
				to, ok := strings.CutPrefix(path, module+"/")
				if !ok {
					continue
				}
				switch {
				case pkg == "core":
					t.Errorf("%s imports internal/worker/%s: core, the shared context, imports nothing of internal/worker", f, to)
				case slices.Contains(operations, to):
					t.Errorf("%s imports the operation internal/worker/%s: operations share core and the layers only", f, to)
				}
			}
		}
	}
	for _, want := range append(operations, layers...) {
		if !slices.Contains(seen, want) {
			t.Errorf("internal/worker/%s is listed but does not exist", want)
		}
	}
}
