// Package localstack_test checks the LocalStack setup statically: it
// cannot run here (no Docker, docs/architecture.md § Testing stand-ins), so the
// compose file and the samconfig are parsed, the scripts are checked for
// syntax (shellcheck runs in `make lint-aws`), and what they name is
// checked against template.yaml.
package localstack_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus/internal/testenv"
)

// compose is the part of docker-compose.yml these tests read; the decode
// refuses a key it does not list, so a typo'd key fails here.
type compose struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Networks map[string]struct {
		Name string `yaml:"name"`
	} `yaml:"networks"`
}

type composeService struct {
	Image         string            `yaml:"image"`
	ContainerName string            `yaml:"container_name"`
	Ports         []string          `yaml:"ports"`
	Environment   map[string]string `yaml:"environment"`
	Volumes       []string          `yaml:"volumes"`
	Networks      []string          `yaml:"networks"`
	Healthcheck   struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

func readCompose(t *testing.T) compose {
	t.Helper()
	b, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return c
}

// The compose file runs one LocalStack on the loopback edge port, with the
// ready hooks mounted where LocalStack runs them, the Docker socket (Lambda
// functions and ECS tasks run as sibling containers), the auth token the
// stack's ECS, ECR and HTTP API need, and a health check on the hooks.
func TestLocalStack_ComposeFileParses(t *testing.T) {
	c := readCompose(t)
	ls, ok := c.Services["localstack"]
	if !ok || len(c.Services) != 1 {
		t.Fatalf("services %v; want the one service localstack", c.Services)
	}
	if !strings.Contains(ls.Image, "localstack/localstack") {
		t.Errorf("image %q is not a LocalStack image", ls.Image)
	}
	if !slices.ContainsFunc(ls.Ports, func(p string) bool { return strings.HasSuffix(p, ":4566:4566") }) {
		t.Errorf("ports %v do not publish the edge port 4566", ls.Ports)
	}
	for _, p := range ls.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("port %q is published beyond the loopback interface", p)
		}
	}
	mounts := map[string]string{}
	for _, v := range ls.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("volume %q is not host:container", v)
			continue
		}
		mounts[parts[1]] = parts[0]
	}
	hooks := mounts["/etc/localstack/init/ready.d"]
	if hooks == "" {
		t.Errorf("no volume mounts the ready hooks at /etc/localstack/init/ready.d: %v", ls.Volumes)
	} else if st, err := os.Stat(hooks); err != nil || !st.IsDir() {
		t.Errorf("the hooks volume's host side %s is not a directory beside docker-compose.yml (%v)", hooks, err)
	}
	if mounts["/var/run/docker.sock"] != "/var/run/docker.sock" {
		t.Errorf("the Docker socket is not mounted: Lambda functions and ECS tasks could not start")
	}
	if v := ls.Environment["LOCALSTACK_AUTH_TOKEN"]; !strings.Contains(v, "${LOCALSTACK_AUTH_TOKEN") {
		t.Errorf("LOCALSTACK_AUTH_TOKEN = %q; want it passed from the environment", v)
	}
	if net := ls.Environment["LAMBDA_DOCKER_NETWORK"]; net == "" || c.Networks[ls.Networks[0]].Name != net {
		t.Errorf("LAMBDA_DOCKER_NETWORK %q is not the network the service is on (%v)", net, c.Networks)
	}
	if hc := strings.Join(ls.Healthcheck.Test, " "); !strings.Contains(hc, "/_localstack/init/ready") {
		t.Errorf("health check %q does not wait for the ready hooks", hc)
	}
}

// samconfig is localstack/samconfig.toml's shape; undecoded keys fail.
type samconfig struct {
	Version float64 `toml:"version"`
	Default struct {
		Global struct {
			Parameters struct {
				StackName string `toml:"stack_name"`
			} `toml:"parameters"`
		} `toml:"global"`
		Build struct {
			Parameters struct {
				Cached   bool `toml:"cached"`
				Parallel bool `toml:"parallel"`
			} `toml:"parameters"`
		} `toml:"build"`
		Deploy struct {
			Parameters struct {
				Region               string `toml:"region"`
				S3Bucket             string `toml:"s3_bucket"`
				S3Prefix             string `toml:"s3_prefix"`
				Capabilities         string `toml:"capabilities"`
				ConfirmChangeset     bool   `toml:"confirm_changeset"`
				FailOnEmptyChangeset bool   `toml:"fail_on_empty_changeset"`
				DisableRollback      bool   `toml:"disable_rollback"`
				ParameterOverrides   string `toml:"parameter_overrides"`
			} `toml:"parameters"`
		} `toml:"deploy"`
	} `toml:"default"`
}

// hookDefault returns the default the ready hook gives a shell variable
// ("${NAME:-default}").
func hookDefault(t *testing.T, env string) string {
	t.Helper()
	b, err := os.ReadFile("init/ready.d/10-stratus.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\$\{` + env + `:-([^}]*)\}`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("the ready hook has no ${%s:-default}", env)
	}
	return string(m[1])
}

// The samconfig is valid TOML of SAM CLI's layout (version 0.1, the
// default environment), deploys to the bucket the ready hook creates, and
// grants the capability the template's IAM roles need.
func TestLocalStack_SamconfigParses(t *testing.T) {
	var c samconfig
	md, err := toml.DecodeFile("samconfig.toml", &c)
	if err != nil {
		t.Fatalf("samconfig.toml: %v", err)
	}
	if u := md.Undecoded(); len(u) > 0 {
		t.Errorf("samconfig.toml has keys this test does not know (a typo?): %v", u)
	}
	if c.Version != 0.1 {
		t.Errorf("version = %v; SAM CLI reads 0.1", c.Version)
	}
	d := c.Default.Deploy.Parameters
	if want := hookDefault(t, "STRATUS_SAM_BUCKET"); d.S3Bucket != want {
		t.Errorf("s3_bucket = %q; the ready hook creates %q", d.S3Bucket, want)
	}
	if !strings.Contains(d.Capabilities, "CAPABILITY_IAM") {
		t.Errorf("capabilities = %q; the template creates IAM roles (CAPABILITY_IAM)", d.Capabilities)
	}
	if d.Region == "" || c.Default.Global.Parameters.StackName == "" {
		t.Errorf("region %q, stack_name %q: both must be set", d.Region, c.Default.Global.Parameters.StackName)
	}
	if d.ParameterOverrides != "" {
		t.Errorf("parameter_overrides is set: deploy.sh's --parameter-overrides would replace it whole")
	}
}

// templateParameters returns template.yaml's parameters: name -> has a Default.
func templateParameters(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Only the Parameters section is decoded; the intrinsic-function tags
	// (!Ref, !Sub) elsewhere are read as plain values and dropped.
	var doc struct {
		Parameters map[string]map[string]any `yaml:"Parameters"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	out := map[string]bool{}
	for name, p := range doc.Parameters {
		_, hasDefault := p["Default"]
		out[name] = hasDefault
	}
	if len(out) == 0 {
		t.Fatal("template.yaml declares no parameters")
	}
	return out
}

// deploy.sh overrides only parameters the template declares, and gives
// every one the template has no default for.
func TestLocalStack_DeployGivesEveryRequiredParameter(t *testing.T) {
	b, err := os.ReadFile("deploy.sh")
	if err != nil {
		t.Fatal(err)
	}
	_, overrides, ok := strings.Cut(string(b), "--parameter-overrides")
	if !ok {
		t.Fatal("deploy.sh passes no --parameter-overrides")
	}
	given := map[string]bool{}
	for _, m := range regexp.MustCompile(`"?([A-Z][A-Za-z0-9]*)=`).FindAllStringSubmatch(strings.SplitN(overrides, "\n\n", 2)[0], -1) {
		given[m[1]] = true
	}
	params := templateParameters(t)
	for name := range given {
		if _, ok := params[name]; !ok {
			t.Errorf("deploy.sh overrides %s, which template.yaml does not declare", name)
		}
	}
	for name, hasDefault := range params {
		if !hasDefault && !given[name] {
			t.Errorf("template.yaml's %s has no default and deploy.sh does not give it", name)
		}
	}
}

// Every script is a bash script LocalStack (or the user) can execute, and
// parses (bash -n); shellcheck runs in `make lint-aws`.
func TestLocalStack_ScriptsAreExecutableBash(t *testing.T) {
	scripts, _ := filepath.Glob("*.sh")
	hooks, _ := filepath.Glob("init/ready.d/*")
	scripts = append(scripts, hooks...)
	if len(hooks) == 0 {
		t.Fatal("no ready hooks in init/ready.d")
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(b, []byte("#!/usr/bin/env bash\n")) {
			t.Errorf("%s does not start with #!/usr/bin/env bash", s)
		}
		if !bytes.Contains(b, []byte("set -euo pipefail")) {
			t.Errorf("%s does not `set -euo pipefail`", s)
		}
		if st, err := os.Stat(s); err != nil || st.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable: LocalStack runs hooks as programs", s)
		}
		testenv.MustHaveCommand(t, "bash", "the LocalStack hooks are bash scripts, checked with bash -n")
		if out, err := exec.Command("bash", "-n", s).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", s, err, out)
		}
	}
}
