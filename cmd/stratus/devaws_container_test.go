package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/container/containertest"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/testenv"
)

// runnerImage is the image make image builds, which the stand-in's task
// definitions name by default.
const runnerImage = containertest.RunnerImage

// needRunnerImage skips (fails under STRATUS_REQUIRE_ALL) without moto, a
// container engine or the runner image make image builds.
func needRunnerImage(t *testing.T) {
	t.Helper()
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	containertest.WithImage(t, runnerImage)
}

// On `stratus dev aws` every step of the demo task runs as a container of the
// task definition's image — reaching the worker API over HTTPS with the
// stack's CA, and S3 through the stand-in — the functions as their bootstraps
// under the Lambda emulator, and the run ends done with its branch pulled.
// dev aws names the image of each step's container, and, when it stops, the
// functions' REPORT figures and each task's start to its first call of the
// worker API.
func TestDevAWS_StepsRunInContainersOfTheRunnerImage(t *testing.T) {
	needRunnerImage(t)
	flags, log, stopDevAWS := devAWSLog(t, []string{"--runners", "container"}, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	dir := demoProject(t)
	task := filepath.Join(dir, "task.md")
	r := runCLI(t, append([]string{"run", task, "--dir", dir}, flags...)...)
	if r.code != ExitOK || !strings.Contains(r.stderr, "done") {
		t.Fatalf("the demo task on dev aws with containers: exit %d\n%s\ndev aws:\n%s", r.code, r.stderr, log.String())
	}
	if out, err := exec.Command("git", "-C", dir, "log", "--oneline", "stratus/demo-greeting").CombinedOutput(); err != nil {
		t.Errorf("no branch stratus/demo-greeting pulled: %v\n%s", err, out)
	}
	ran := regexp.MustCompile(`step (\S+) runs in (.*)`).FindAllStringSubmatch(log.String(), -1)
	agents := 0
	for _, m := range ran {
		if !strings.HasPrefix(m[2], "container ") || !strings.HasSuffix(m[2], " of "+runnerImage) {
			t.Errorf("step %s ran in %s; want a container of %s", m[1], m[2], runnerImage)
		}
		if !strings.Contains(m[1], "._supervisor.") {
			agents++
		}
	}
	if agents < 4 { // planning, implementation, review, fixing, review again
		t.Errorf("%d agent steps said where they ran; want every one:\n%s", agents, log.String())
	}
	if strings.Contains(log.String(), "--runners process") {
		t.Errorf("a task ran as a local process:\n%s", log.String())
	}
	// The figures come when the stand-in stops.
	stopDevAWS()
	for _, want := range []string{"lambda WorkerApiFunction: init", "of 512 MB", "lambda DispatchFunction: init", "container start to first worker API call"} {
		if !waitFor(10*time.Second, func() bool { return strings.Contains(log.String(), want) }) {
			t.Errorf("dev aws said no %q when it stopped:\n%s", want, log.String())
		}
	}
}

// demoProject is a git work dir with Stratus installed on the script
// engine of examples/scenario.yaml and examples/task.md in it, as make
// demo-aws makes it.
func demoProject(t *testing.T) string {
	t.Helper()
	return gitProject(t, filepath.Join(testenv.ModuleRoot(t), "examples", "scenario.yaml"))
}

// gitProject is demoProject with the script engine's scenario file
// scenario.
func gitProject(t *testing.T, scenario string) string {
	t.Helper()
	dir := t.TempDir()
	root := testenv.ModuleRoot(t)
	if r := runCLI(t, "install", "--dir", dir, "--primary", "script", "--scenario", scenario); r.code != 0 {
		t.Fatal(r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(root, "examples", "task.md"))
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(dir, "task.md"), string(b))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// With --pool and containers, the pool's runners are the tasks of its two ECS
// services (PoolService, NetworkPoolService), placed on the stand-in as the
// service scheduler places them and run as containers of the image with their
// task definition's command and the task role's credentials: the demo task
// runs on them, no step cold.
func TestDevAWS_PoolRunnersAreServiceTasksInContainers(t *testing.T) {
	needRunnerImage(t)
	flags, log, _ := devAWSLog(t, []string{"--runners", "container", "--pool", "1"}, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	dir := demoProject(t)
	r := runCLI(t, append([]string{"run", filepath.Join(dir, "task.md"), "--dir", dir}, flags...)...)
	if r.code != ExitOK || !strings.Contains(r.stderr, ": done") {
		t.Fatalf("the demo task on the pool in containers: exit %d\n%s\ndev aws:\n%s", r.code, r.stderr, log.String())
	}
	ran := regexp.MustCompile(`task (\S+) of step (\S+) runs in (.*)`).FindAllStringSubmatch(log.String(), -1)
	if len(ran) != 2 {
		t.Errorf("%d tasks ran; want the two pool services' one each (every step on them):\n%s", len(ran), log.String())
	}
	for _, m := range ran {
		if m[1] != m[2] || !strings.HasSuffix(m[3], " of "+runnerImage) {
			t.Errorf("task %s (step %s) ran in %s; want a pool service's task, a container of %s", m[1], m[2], m[3], runnerImage)
		}
	}
}

// waitFor polls cond for up to d.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// Bad input: a runner image that is not built, or functions
// that are not, end dev aws with exit 1 and what builds them.
func TestDevAWS_SaysWhatIsNotBuilt(t *testing.T) {
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	r := runCLI(t, "dev", "aws", "--runners", "process", "--lambdas", filepath.Join(t.TempDir(), "nowhere"))
	if r.code != 1 || !strings.Contains(r.stderr, "make lambdas") || !strings.Contains(r.stderr, "nowhere") {
		t.Errorf("dev aws without the functions built: exit %d\n%s", r.code, r.stderr)
	}
	r = runCLI(t, "dev", "aws", "--runners", "process", "--rie", filepath.Join(t.TempDir(), "no-rie"))
	if r.code != 1 || !strings.Contains(r.stderr, "make rie") || !strings.Contains(r.stderr, "no-rie") || !strings.Contains(r.stderr, "Emulator") {
		t.Errorf("dev aws without the emulator built: exit %d\n%s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"--name", "bad name!"}, {"--stack", "kept"}, {"--endpoint-url", "http://127.0.0.1:1", "--port", "5000"}, {"--pool-pickup", "5s"}} {
		r = runCLI(t, append([]string{"dev", "aws"}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("dev aws %v: exit %d; want 2 naming %s\n%s", args, r.code, args[0], r.stderr)
		}
	}
	needRunnerImage(t)
	r = runCLI(t, "dev", "aws", "--image", "stratus-runner:no-such-tag")
	if r.code != 1 || !strings.Contains(r.stderr, "make image") || !strings.Contains(r.stderr, "no-such-tag") {
		t.Errorf("dev aws with an image not built: exit %d\n%s", r.code, r.stderr)
	}
}
