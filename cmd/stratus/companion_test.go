package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/testenv"
)

// README.md § Using it: the stratus that make build makes (-tags slim) links no
// AWS SDK, none of Stratus's AWS adapters and not the run viewer (goldmark);
// those are stratus-full's, to which it hands the commands that need them.
func TestBuildSlim_LinksNoAWSNorTheViewer(t *testing.T) {
	t.Parallel()
	goCmd := testenv.MustHaveCommand(t, "go", "go list -deps reads what stratus links")
	out, err := exec.Command(goCmd, "list", "-tags", "slim", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags slim -deps ./cmd/stratus: %v\n%s", err, out)
	}
	forbidden := regexp.MustCompile(`^(github\.com/aws/|github\.com/stratusflow/stratus/internal/(awsrun|awsapp|devstack|executor/sfn|launch/ecs|queue/sqs|secret/secretsmanager|sink/s3|store/dynamodb)(/|$))`)
	for _, d := range strings.Fields(string(out)) {
		if forbidden.MatchString(d) {
			t.Errorf("stratus built with -tags slim links %s", d)
		}
	}
}

// README.md § Performance: the bundle check reads commits itself, so the
// slim stratus links no OpenPGP implementation (go-git's commit decoder
// brings one, and its curves' tables are set up at every start).
func TestBuildSlim_LinksNoOpenPGP(t *testing.T) {
	t.Parallel()
	goCmd := testenv.MustHaveCommand(t, "go", "go list -deps reads what stratus links")
	out, err := exec.Command(goCmd, "list", "-tags", "slim", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -tags slim -deps ./cmd/stratus: %v\n%s", err, out)
	}
	for _, d := range strings.Fields(string(out)) {
		if strings.HasPrefix(d, "github.com/ProtonMail/go-crypto/") || d == "github.com/go-git/go-git/v5/plumbing/object" {
			t.Errorf("stratus built with -tags slim links %s", d)
		}
	}
}

// README.md § Performance: the slim stratus calls no method by reflection
// (reflect.Value.Method, MethodByName: text/template's way, which cobra
// takes for a custom version or help template). One such call anywhere
// makes the linker keep every exported method of every linked type —
// go-github's thousands of accessors, a quarter of the binary — and
// every start pays for it.
func TestBuildSlim_CallsNoMethodByReflection(t *testing.T) {
	t.Parallel()
	f, err := elf.Open(stratusBin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		if s.Name == "reflect.Value.Method" || s.Name == "reflect.Value.MethodByName" {
			t.Errorf("stratus built with -tags slim links %s: some code calls a method by reflection (text/template? cobra's Set*Template?)", s.Name)
		}
	}
}

// make build makes bin/stratus slim and bin/stratus-full beside it.
func TestMakeBuild_BuildsStratusSlimAndTheFullBeside(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`$(GO) build -tags slim -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/stratus`,
		`$(GO) build -ldflags "$(LDFLAGS)" -o $(dir $(BIN))` + FullBinary + ` ./cmd/stratus`,
		`LDFLAGS := -X main.commit=$(COMMIT) -X main.version=$(VERSION)`,
		`VERSION := $(shell git describe --tags --dirty 2>/dev/null)`,
	} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("the Makefile's build target lacks\n  %s", want)
		}
	}
}

// The --target aws flags' help names the AWS packages' defaults, written
// out in target.go for the slim build: they must not drift.
func TestTargetFlags_DefaultsAreTheAWSPackages(t *testing.T) {
	t.Parallel()
	if awsTableBaseName != dynamodb.TableBaseName {
		t.Errorf("awsTableBaseName %q, dynamodb.TableBaseName %q", awsTableBaseName, dynamodb.TableBaseName)
	}
	if awsDefaultBucketPrefix != awsrun.DefaultBucketPrefix {
		t.Errorf("awsDefaultBucketPrefix %q, awsrun.DefaultBucketPrefix %q", awsDefaultBucketPrefix, awsrun.DefaultBucketPrefix)
	}
	if awsDefaultPoll != awsrun.DefaultPoll {
		t.Errorf("awsDefaultPoll %v, awsrun.DefaultPoll %v", awsDefaultPoll, awsrun.DefaultPoll)
	}
}

func TestWantsFull_TargetAWSDevAWSAndUI(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "task.md", "--target", "aws", "--stack", "s"}, true},
		{[]string{"status", "r-1", "--target=aws"}, true},
		{[]string{"dev", "aws", "--port", "5000"}, true},
		{[]string{"ui", "--dir", "d"}, true},
		{[]string{"run", "ui"}, false},
		{[]string{"run", "task.md", "--dir", "d"}, false},
		{[]string{"run", "task.md", "--target", "embedded"}, false},
		{[]string{"run", "task.md", "--target"}, false},
		{[]string{"dev"}, false},
		{[]string{"--help"}, false},
		{[]string{"engine", "x", "--", "--target", "aws"}, false}, // an engine's own arguments
		{nil, false},
	} {
		if got := wantsFull(tc.args); got != tc.want {
			t.Errorf("wantsFull(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

// Every README passage saying what bin/stratus hands to bin/stratus-full
// names the same commands wantsFull hands off: they once disagreed ("…
// dev aws, ui" in one, "… runner pool and ui" in another).
func TestReadme_HandOffListsAreWantsFulls(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"run", "t.md", "--target", "aws"}, {"dev", "aws"}, {"runner", "pool"}, {"ui"}} {
		if !wantsFull(args) {
			t.Fatalf("wantsFull(%q) = false; update this test and the README together", args)
		}
	}
	readme := readFile(t, filepath.Join(testenv.ModuleRoot(t), "README.md"))
	n := 0
	for _, para := range strings.Split(readme, "\n\n") {
		para = strings.Join(strings.Fields(para), " ")
		if !regexp.MustCompile(`hands (it )?(--target|every|`+"`"+`--target)`).MatchString(para) || !strings.Contains(para, "stratus-full") {
			continue
		}
		n++
		for _, cmd := range []string{"--target aws", "dev aws", "runner pool", "ui"} {
			if !strings.Contains(para, cmd) {
				t.Errorf("README passage on the hand-off to stratus-full does not name %q:\n%s", cmd, para)
			}
		}
	}
	if n < 2 {
		t.Errorf("found %d README passages on the hand-off to stratus-full, want the build section's and the layout's (and Performance's)", n)
	}
}

// The stratus the tests build (as make build does) hands --target aws to
// stratus-full: the same command, the same answer, from the same stratus
// on the user's side (the CLI does not change).
func TestHandOff_TargetAWSRunsInTheFullBuild(t *testing.T) {
	t.Parallel()
	// An endpoint no stack answers: a usage error from the AWS side,
	// which only the AWS code gives.
	r := runCLI(t, "runs", "--target", "aws", "--state-machine", "not-an-arn")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--state-machine \"not-an-arn\": want a state machine ARN") {
		t.Errorf("runs --target aws with a bad ARN: exit %d, stderr %q", r.code, r.stderr)
	}
	// Without the companion, it says what to build.
	dir := t.TempDir()
	lone := filepath.Join(dir, "stratus")
	data, err := os.ReadFile(stratusBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(lone, "runs", "--target", "aws")
	cmd.Env = append(os.Environ(), "PATH="+dir)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitFailed || !strings.Contains(string(out), "make build puts it beside bin/stratus") {
		t.Errorf("stratus without %s: %v %s", FullBinary, err, out)
	}
}
