package functions_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// dockerfile returns the Dockerfile's instructions, continuation lines
// joined and comments dropped.
func dockerfile(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		if cur += line; strings.TrimSpace(cur) != "" {
			out = append(out, strings.TrimSpace(cur))
		}
		cur = ""
	}
	return out
}

// The runner image (DESIGN.md § The path of one step, 3): a
// multi-stage build of cmd/stratus with CGO_ENABLED=0 (or the same binary
// built on the host, docs/runner-image.md § Building the images), run as a
// non-root user, whose entrypoint runs `stratus runner`.
func TestRunnerImage_EntrypointIsStratusRunner(t *testing.T) {
	ins := dockerfile(t)
	var from, build int
	var entrypoint, user string
	copied := false
	for _, in := range ins {
		switch word, rest, _ := strings.Cut(in, " "); strings.ToUpper(word) {
		case "FROM":
			from++
		case "RUN":
			if strings.Contains(rest, "go build") {
				build++
				if !strings.Contains(rest, "CGO_ENABLED=0") || !regexp.MustCompile(`\./cmd/stratus\b`).MatchString(rest) {
					t.Errorf("the build %q is not a CGO_ENABLED=0 build of ./cmd/stratus", rest)
				}
			}
		case "COPY":
			if rest == "image/stratus-runner-entrypoint /usr/local/bin/stratus-runner-entrypoint" {
				copied = true
			}
		case "ENTRYPOINT":
			entrypoint = rest
		case "USER":
			user = rest
		}
	}
	if from < 2 || build != 1 {
		t.Errorf("%d stages and %d go builds; want a multi-stage build with one go build", from, build)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 || ep[0] != "/usr/local/bin/stratus-runner-entrypoint" || !copied {
		t.Errorf("ENTRYPOINT %s (script copied: %v); want [\"/usr/local/bin/stratus-runner-entrypoint\"] in exec form, copied from image/", entrypoint, copied)
	}
	if u, _, _ := strings.Cut(user, ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("USER %q; the runner must not run as root", user)
	}
}

// The entrypoint script runs `stratus runner ARGS` (an ECS task
// definition's Command, such as `pool --queue URL`, gives ARGS), and a
// program on the PATH named by the first argument instead
// (docs/runner-image.md § Building the images: `docker run --rm
// stratus-runner:codex codex --version`).
func TestRunnerImage_EntrypointRunsRunnerOrAProgram(t *testing.T) {
	sh := testenv.MustHaveCommand(t, "sh", "runs the runner image's entrypoint script")
	b, err := os.ReadFile("../image/stratus-runner-entrypoint")
	if err != nil {
		t.Fatal(err)
	}
	const real = "exec /usr/local/bin/stratus runner"
	if !strings.Contains(string(b), real) {
		t.Fatalf("the entrypoint has no line %q", real)
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-stratus")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"stratus $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "entrypoint")
	if err := os.WriteFile(script, []byte(strings.Replace(string(b), "/usr/local/bin/stratus", fake, 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "stratus runner"},
		{[]string{"pool", "--queue", "q", "--profile", "offline"}, "stratus runner pool --queue q --profile offline"},
		{[]string{"--help"}, "stratus runner --help"},
		{[]string{"echo", "a program"}, "a program"},
	} {
		out, err := exec.Command(sh, append([]string{script}, tc.args...)...).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("entrypoint %q: %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

// .dockerignore keeps out bulk (node_modules, build output) but nothing
// `go build ./cmd/stratus` reads.
func TestRunnerImage_DockerignoreKeepsTheSources(t *testing.T) {
	b, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum", "cmd", "cmd/stratus/main.go", "internal", "internal/worker/service.go", "domain.go", "error.go", "third_party/jsonschema/go.mod", "image/stratus-runner-entrypoint", "package.json"}
	for _, line := range strings.Split(string(b), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") || strings.HasPrefix(p, "!") {
			continue
		}
		for _, n := range needed {
			if ok, _ := filepath.Match(strings.TrimPrefix(p, "/"), n); ok {
				t.Errorf(".dockerignore pattern %q leaves %s out of the build context", p, n)
			}
		}
	}
}

// The runner-claude and runner-codex targets install the agent CLIs at the
// versions package.json pins (the versions the tests run): their install
// stages read the pin from package.json, and the targets are built on what
// they installed; the default target (the last stage) is the plain runner.
func TestRunnerImage_CLITargetsPinTheTestedVersions(t *testing.T) {
	stages, froms, last := dockerStages(t)
	if tools := strings.Join(stages["node-tools"], "\n"); !strings.Contains(tools, "COPY package.json ") {
		t.Errorf("stage node-tools does not copy package.json:\n%s", tools)
	}
	for _, c := range []struct{ target, os, install, npmPkg string }{
		{"runner-claude", "claude-os", "claude-install", "@anthropic-ai/claude-code"},
		{"runner-codex", "codex-os", "codex-install", "@openai/codex"},
	} {
		install := strings.Join(stages[c.install], "\n")
		readPin := `require("/tmp/build/package.json").devDependencies["` + c.npmPkg + `"]`
		if !strings.Contains(install, readPin) || !strings.Contains(install, `"`+c.npmPkg+`@$pin"`) {
			t.Errorf("stage %s does not install %s at package.json's pin (%s):\n%s", c.install, c.npmPkg, readPin, install)
		}
		if body := strings.Join(stages[c.os], "\n"); !strings.Contains(body, "COPY --from="+c.install+" ") {
			t.Errorf("stage %s does not copy from %s:\n%s", c.os, c.install, body)
		}
		if !strings.HasPrefix(froms[c.target], c.os+" ") {
			t.Errorf("%s is FROM %q; want %s", c.target, froms[c.target], c.os)
		}
	}
	// runner-agents holds both CLIs: claude-os's, and codex-install's.
	if !strings.HasPrefix(froms["agents-os"], "claude-os ") || !strings.Contains(strings.Join(stages["agents-os"], "\n"), "COPY --from=codex-install ") ||
		!strings.HasPrefix(froms["runner-agents"], "agents-os ") {
		t.Errorf("runner-agents is not both CLIs: agents-os FROM %q:\n%s\nrunner-agents FROM %q", froms["agents-os"], strings.Join(stages["agents-os"], "\n"), froms["runner-agents"])
	}
	if last != "runner" || strings.Contains(strings.Join(stages["runner"], "\n"), "npm") {
		t.Errorf("the default target is %q; want the plain runner last", last)
	}
}

// Every runner target ends with runner-base's lines: stratus and the
// entrypoint copied last (a new stratus rebuilds one layer), HOME, the
// non-root user, the entrypoint (docs/runner-image.md § Building the
// images).
func TestRunnerImage_TargetsEndAlike(t *testing.T) {
	stages, _, _ := dockerStages(t)
	base := stages["runner-base"][1:] // less its FROM
	if len(base) < 3 || !strings.HasPrefix(base[0], "COPY --from=build /out/stratus ") || base[len(base)-3] != "USER 10001:10001" {
		t.Fatalf("runner-base is not stratus copied onto runner-os, ending as the non-root user:\n%s", strings.Join(base, "\n"))
	}
	for _, target := range []string{"runner-claude", "runner-codex", "runner-agents"} {
		body := stages[target][1:]
		if !slices.Equal(body, base) {
			t.Errorf("stage %s does not end as runner-base does:\n%s\nwant:\n%s", target, strings.Join(body, "\n"), strings.Join(base, "\n"))
		}
	}
}

// dockerStages returns each stage's instructions (its FROM first) and what
// it is FROM, by stage name, and the last stage's name.
func dockerStages(t *testing.T) (stages map[string][]string, froms map[string]string, last string) {
	t.Helper()
	stage := ""
	stages, froms = map[string][]string{}, map[string]string{}
	for _, in := range dockerfile(t) {
		word, rest, _ := strings.Cut(in, " ")
		if strings.EqualFold(word, "FROM") {
			f := strings.Fields(rest)
			stage = f[len(f)-1]
			froms[stage] = rest
			last = stage
		}
		stages[stage] = append(stages[stage], in)
	}
	return stages, froms, last
}

// docs/runner-image.md § Adding a toolchain: the runner-go target adds Go
// for the platform built for (not the build stage's, which is the
// builder's) with `go` on the PATH every check gets, and ends as the
// non-root user; every runner has a HOME (§ The environment of checks and
// tools).
func TestRunnerImage_GoTargetAddsAToolchainOnThePath(t *testing.T) {
	stage, stages := "", map[string][]string{}
	froms := map[string]string{}
	for _, in := range dockerfile(t) {
		word, rest, _ := strings.Cut(in, " ")
		if strings.EqualFold(word, "FROM") {
			f := strings.Fields(rest)
			stage = f[len(f)-1]
			froms[stage] = rest
		}
		stages[stage] = append(stages[stage], in)
	}
	body := strings.Join(stages["runner-go"], "\n")
	if !strings.HasPrefix(froms["runner-go"], "runner-base ") {
		t.Errorf("runner-go is FROM %q; want runner-base", froms["runner-go"])
	}
	if strings.Contains(froms["go-toolchain"], "BUILDPLATFORM") || !strings.Contains(body, "COPY --from=go-toolchain /usr/local/go /usr/local/go") {
		t.Errorf("runner-go does not copy the target platform's toolchain:\n%s\n(go-toolchain: FROM %s)", body, froms["go-toolchain"])
	}
	if !strings.Contains(body, "/usr/local/go/bin/go") || !strings.Contains(body, "/usr/local/bin/") {
		t.Errorf("runner-go does not put go on /usr/local/bin:\n%s", body)
	}
	if l := stages["runner-go"]; !strings.HasSuffix(l[len(l)-1], "USER 10001:10001") {
		t.Errorf("runner-go does not end as the non-root user")
	}
	if !strings.Contains(strings.Join(stages["runner-base"], "\n"), "ENV HOME=/home/stratus") {
		t.Errorf("runner-base sets no HOME")
	}
	// The image stratus is compiled in and runner-go's toolchain are the
	// same Go release by default.
	args := map[string]string{}
	for _, in := range stages[""] {
		if name, val, ok := strings.Cut(strings.TrimPrefix(in, "ARG "), "="); ok && strings.HasPrefix(in, "ARG ") {
			args[name] = val
		}
	}
	if args["GO_IMAGE"] == "" || args["GO_IMAGE"] != args["BUILD_IMAGE"] {
		t.Errorf("ARG GO_IMAGE=%q, BUILD_IMAGE=%q; want the same Go image", args["GO_IMAGE"], args["BUILD_IMAGE"])
	}
}
