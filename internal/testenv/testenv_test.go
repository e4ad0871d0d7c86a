package testenv

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestModuleRoot_HoldsGoModTwoLevelsUp(t *testing.T) {
	t.Parallel()
	root := ModuleRoot(t)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(wd, "..", ".."); root != want {
		t.Errorf("ModuleRoot = %s, want %s", root, want)
	}
}

// The vectors of every seed rule ../shared/cases/README.md lists are in the
// repository's copy.
func TestCases_HoldsEveryVectorFolder(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"fold/cases.json", "template/cases.json", "partnames/cases.json", "contract/echo_minimal.sh", "contract/echo_minimal.expect.json"} {
		if _, err := os.Stat(Cases(t, f)); err != nil {
			t.Errorf("testdata/cases/%s: %v", f, err)
		}
	}
}

// README.md § Two commands: the copy under testdata must equal
// ../shared/cases whenever that exists, so CI fails on drift.
func TestCases_CopyEqualsShared(t *testing.T) {
	t.Parallel()
	shared, ok := sharedDir(t)
	if _, err := os.Stat(filepath.Join(shared, "cases")); !ok || err != nil {
		Missing(t, "../shared/cases", "the shared vectors are not beside a clone, so the copy in testdata/cases is not compared with them; CI compares them")
	}
	for _, d := range diffTrees(t, filepath.Join(shared, "cases"), Cases(t)) {
		t.Errorf("testdata/cases differs from ../shared/cases: %s (copy ../shared/cases over testdata/cases)", d)
	}
}

func TestDiffTrees_NamesEveryDifference(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	write := func(root, name, body string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(a, "same/x.json", "1")
	write(b, "same/x.json", "1")
	if d := diffTrees(t, a, b); len(d) != 0 {
		t.Fatalf("equal trees differ: %q", d)
	}
	write(a, "only-shared.json", "1")
	write(b, "only-copy.json", "1")
	write(a, "same/changed.sh", "echo a")
	write(b, "same/changed.sh", "echo b")
	want := []string{"only-copy.json: only in the copy", "only-shared.json: missing from the copy", "same/changed.sh: content differs"}
	if d := diffTrees(t, a, b); !slices.Equal(d, want) {
		t.Errorf("diffTrees = %q, want %q", d, want)
	}
}

// diffTrees lists, sorted, each file that is only under shared, only under
// copy, or differs in content, by its slash path relative to the roots.
func diffTrees(t *testing.T, shared, copy string) []string {
	t.Helper()
	files := func(root string) map[string][]byte {
		out := map[string][]byte{}
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			out[filepath.ToSlash(rel)] = b
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	s, c := files(shared), files(copy)
	var diffs []string
	for name, body := range s {
		switch cb, ok := c[name]; {
		case !ok:
			diffs = append(diffs, name+": missing from the copy")
		case !bytes.Equal(body, cb):
			diffs = append(diffs, name+": content differs")
		}
	}
	for name := range c {
		if _, ok := s[name]; !ok {
			diffs = append(diffs, name+": only in the copy")
		}
	}
	slices.Sort(diffs)
	return diffs
}

// stopTB records how a helper stopped the test, as testing.T would stop it.
type stopTB struct {
	testing.TB
	name    string
	skipped bool
	fatal   string
	logs    []string
}

type stopped struct{}

func (s *stopTB) Helper()                   {}
func (s *stopTB) Name() string              { return s.name }
func (s *stopTB) Log(args ...any)           { s.logs = append(s.logs, fmt.Sprint(args...)) }
func (s *stopTB) SkipNow()                  { s.skipped = true; panic(stopped{}) }
func (s *stopTB) Fatalf(f string, a ...any) { s.fatal = fmt.Sprintf(f, a...); panic(stopped{}) }

func run(tb *stopTB, f func(testing.TB)) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	f(tb)
}

// A missing tool skips with one line naming it, written to the skip log `make
// test` lists; STRATUS_REQUIRE_ALL=1 makes it a failure.
func TestMissing_SkipsNamingTheToolOrFailsWhenEverythingIsRequired(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogEnv, logFile)
	t.Setenv(RequireAllEnv, "")
	tb := &stopTB{TB: t, name: "TestX"}
	run(tb, func(tb testing.TB) { MustHaveCommand(tb, "stratus-no-such-tool", "checks the frobnicator") })
	if !tb.skipped || tb.fatal != "" || len(tb.logs) != 1 || !strings.Contains(tb.logs[0], "needs stratus-no-such-tool: not found on PATH (checks the frobnicator)") {
		t.Errorf("skipped %v, fatal %q, logs %q", tb.skipped, tb.fatal, tb.logs)
	}
	b, err := os.ReadFile(logFile)
	if want := "stratus-no-such-tool\tnot found on PATH (checks the frobnicator)\tinternal/testenv.TestX\n"; err != nil || string(b) != want {
		t.Errorf("skip log %q (%v), want %q", b, err, want)
	}

	t.Setenv(RequireAllEnv, "1")
	tb = &stopTB{TB: t, name: "TestY"}
	run(tb, func(tb testing.TB) { Missing(tb, "moto", "python3 cannot import moto") })
	if tb.skipped || !strings.Contains(tb.fatal, "needs moto: python3 cannot import moto") || !strings.Contains(tb.fatal, "STRATUS_REQUIRE_ALL=1") {
		t.Errorf("under STRATUS_REQUIRE_ALL=1: skipped %v, fatal %q", tb.skipped, tb.fatal)
	}
	if b2, _ := os.ReadFile(logFile); !bytes.Equal(b2, b) {
		t.Errorf("a failure was logged as a skip: %q", b2)
	}
}

func TestMustHaveCommand_ReturnsThePath(t *testing.T) {
	t.Parallel()
	tb := &stopTB{TB: t, name: "TestZ"}
	var p string
	run(tb, func(tb testing.TB) { p = MustHaveCommand(tb, "sh", "runs scripts") })
	if tb.skipped || tb.fatal != "" || !filepath.IsAbs(p) {
		t.Errorf("sh: path %q, skipped %v, fatal %q", p, tb.skipped, tb.fatal)
	}
}

// A test that needs worc's peer files runs when they are beside the checkout
// and otherwise skips with one notice, the same for every such test so that
// `make test` lists them as one group.
func TestPeers_SkipsWithOneNoticeWhenAbsent(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipLogEnv, logFile)
	t.Setenv(RequireAllEnv, "")
	shared := t.TempDir()
	if err := os.MkdirAll(filepath.Join(shared, "peers", "worc", "flows"), 0o755); err != nil {
		t.Fatal(err)
	}
	tb := &stopTB{TB: t, name: "TestPresent"}
	var got string
	var ok bool
	run(tb, func(tb testing.TB) { got, ok = peersIn(tb, shared, "worc", "flows") })
	if want := filepath.Join(shared, "peers", "worc", "flows"); !ok || got != want || tb.skipped || tb.fatal != "" {
		t.Errorf("present: %q %v (skipped %v, fatal %q), want %q", got, ok, tb.skipped, tb.fatal, want)
	}
	for _, elem := range [][]string{{"worc", "tasks", "task-rich.md"}, {"worc", "flows", "merge.yaml"}} {
		tb := &stopTB{TB: t, name: "TestAbsent"}
		run(tb, func(tb testing.TB) { got, ok = peersIn(tb, shared, elem...) })
		if ok || got != "" || tb.skipped || tb.fatal != "" {
			t.Errorf("absent %v: %q %v (skipped %v, fatal %q); want \"\", false, and the caller decides", elem, got, ok, tb.skipped, tb.fatal)
		}
	}
	b, err := os.ReadFile(logFile)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if err != nil || len(lines) != 2 || lines[0] != lines[1] || !strings.HasPrefix(lines[0], "../shared/peers\t") || !strings.Contains(lines[0], filepath.Join(shared, "peers")+" not found") {
		t.Errorf("skip log %q (%v): want two identical lines naming %s", b, err, filepath.Join(shared, "peers"))
	}
}
