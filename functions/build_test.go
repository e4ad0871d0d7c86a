// Package functions_test checks the Lambda functions as they are deployed:
// the artifacts `make lambdas` builds (this file) and template.yaml against
// the code (template_test.go).
package functions_test

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// maxBootstrapBytes bounds one function's binary: far under Lambda's
// 50 MB zipped / 250 MB unzipped package limits, and a tripwire for a
// dependency that bloats the cold start (each is about 13 MiB today).
const maxBootstrapBytes = 40 << 20

// functionDirs returns the names of functions/<name>/main.go: the
// functions `make lambdas` builds and template.yaml must deploy.
func functionDirs(t *testing.T) []string {
	t.Helper()
	mains, err := filepath.Glob("*/main.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range mains {
		names = append(names, filepath.Dir(m))
	}
	if len(names) == 0 {
		t.Fatal("no functions/*/main.go found")
	}
	slices.Sort(names)
	return names
}

// DESIGN.md § Layout: each function builds as `bootstrap` for
// provided.al2023 on arm64 with CGO_ENABLED=0. The artifacts are built by
// the Makefile's own target, so what is checked is what `make lambdas`
// (and `make sam-build`, same environment and flags) ships: an ELF
// executable for aarch64, statically linked (no program interpreter, no
// shared libraries), built with the lambda.norpc tag, under the size bound.
func TestLambdaBuild_BootstrapIsStaticArm64ELF(t *testing.T) {
	testenv.MustHaveCommand(t, "make", "the Lambda artifacts are built by `make lambdas`")
	out := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "-C", "..", "lambdas", "LAMBDA_DIR="+out, "LAMBDA_ARCH=arm64")
	cmd.Env = append(os.Environ(), "GOFLAGS=") // the Makefile's flags alone
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make lambdas: %v\n%s", err, b)
	}
	for _, name := range functionDirs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(out, name, "bootstrap")
			st, err := os.Stat(path)
			if err != nil {
				t.Fatalf("make lambdas left no %s/bootstrap: %v", name, err)
			}
			if st.Mode()&0o111 == 0 {
				t.Errorf("%s is not executable (mode %v)", path, st.Mode())
			}
			if st.Size() > maxBootstrapBytes {
				t.Errorf("%s is %d bytes; the bound is %d", path, st.Size(), maxBootstrapBytes)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatalf("%s is not an ELF file: %v", path, err)
			}
			defer f.Close()
			if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_AARCH64 || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
				t.Errorf("%s is %v %v %v; want a 64-bit aarch64 Linux executable", path, f.Class, f.Machine, f.OSABI)
			}
			if f.Type != elf.ET_EXEC {
				t.Errorf("%s has ELF type %v; want ET_EXEC (a static, non-PIE executable)", path, f.Type)
			}
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
					t.Errorf("%s has a %v program header: it is dynamically linked", path, p.Type)
				}
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Errorf("%s needs shared libraries %v", path, libs)
			}
			info, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Fatalf("%s has no Go build info: %v", path, err)
			}
			settings := map[string]string{}
			for _, s := range info.Settings {
				settings[s.Key] = s.Value
			}
			want := map[string]string{"GOOS": "linux", "GOARCH": "arm64", "CGO_ENABLED": "0", "-tags": "lambda.norpc", "-trimpath": "true"}
			for k, v := range want {
				if settings[k] != v {
					t.Errorf("%s was built with %s=%q; want %q", path, k, settings[k], v)
				}
			}
			if wantPath := "github.com/stratusflow/stratus/functions/" + name; info.Path != wantPath {
				t.Errorf("%s is the build of %s; want %s", path, info.Path, wantPath)
			}
			if !slices.ContainsFunc(info.Deps, func(d *debug.Module) bool { return strings.HasPrefix(d.Path, "github.com/aws/aws-lambda-go") }) {
				t.Errorf("%s does not link github.com/aws/aws-lambda-go: not a Lambda entrypoint", path)
			}
		})
	}
}
