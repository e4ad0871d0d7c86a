package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/testenv"
)

// devAWS starts `stratus dev aws` and returns the flags line it prints.
func devAWS(t *testing.T, env ...string) []string {
	t.Helper()
	return devAWSWith(t, nil, env...)
}

// devAWSWith is devAWS with more arguments to `stratus dev aws`.
func devAWSWith(t *testing.T, args []string, env ...string) []string {
	t.Helper()
	flags, _, _ := devAWSLog(t, args, env...)
	return flags
}

// devAWSLog is devAWSWith, also returning what `stratus dev aws` writes
// on stderr as it goes, and a func that stops it (Ctrl-C) and waits for
// its end (the test's cleanup does too).
func devAWSLog(t *testing.T, args []string, env ...string) ([]string, *syncBuffer, func()) {
	t.Helper()
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	// Runners as local processes unless a test asks for containers: the
	// tests' engines are scripts of this machine.
	if !slices.Contains(args, "--runners") {
		args = append(args, "--runners", "process")
	}
	cmd := exec.Command(stratusBin, append([]string{"dev", "aws"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errb := &syncBuffer{}
	cmd.Stderr = errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Signal(os.Interrupt)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("stratus dev aws ended with %v after Ctrl-C:\n%s", err, errb.String())
				}
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				t.Errorf("stratus dev aws did not stop within 30 s of Ctrl-C")
			}
		})
	}
	t.Cleanup(stop)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "--target aws ") {
			t.Fatalf("stratus dev aws printed %q; want a line starting with --target aws\n%s", l, errb.String())
		}
		return append(strings.Fields(l), "--poll-interval", "200ms"), errb, stop
	case <-time.After(60 * time.Second):
		t.Fatalf("stratus dev aws printed no flags within 60 s:\n%s", errb.String())
	}
	return nil, errb, stop
}

// `stratus dev aws` is AWS without an account. The line it
// prints is all `stratus run --target aws` needs; a run goes to its end on
// the stand-in with the same steps as embedded; its workers run with the
// environment RunTask gives them and nothing else of the operator's; the
// engine's script is the run's frozen copy; a detached run is cancelled
// (its worker stopped) and resumed to its end; runs lists both. No AWS credential is set.
func TestDevAWS_RunCancelAndResumeWithoutAnAccount(t *testing.T) {
	flags := devAWS(t, "STRATUS_OPERATOR_ONLY=the operator's", "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	// The engine leaves its environment behind, and hangs while "slow"
	// exists.
	// The engine leaves its environment, its script's path and its
	// working directory in a spy dir outside the work dir (a worker has
	// none of the operator's: its own checkout is its cwd), and hangs while
	// the spy dir holds "slow".
	spy := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "engine.sh"), `read line
env > "$SPY/env-$STRATUS_TASK_ID.txt"
echo "$0" > "$SPY/self-$STRATUS_TASK_ID.txt"
pwd > "$SPY/pwd-$STRATUS_TASK_ID.txt"
if [ -f "$SPY/slow" ]; then echo $$ > "$SPY/pid-$STRATUS_TASK_ID.txt"; sleep 300; fi
printf '{"subrun_report": "ok"}\n'
`)
	usePrimaryShellEngineEnv(t, dir, "shx", "{SPY: "+spy+"}")
	writeTwoStepFlow(t, dir)
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-dev\ntitle: Dev\ntask_type: tiny\n---\nbody\n")

	r := runCLI(t, append([]string{"run", task, "--dir", dir, "--json"}, flags...)...)
	if r.code != ExitOK || join(steps(r.stderr)) != "first#1:done answer#1:done publish#1:done" {
		t.Fatalf("run on dev aws: exit %d, steps %s\n%s", r.code, join(steps(r.stderr)), r.stderr)
	}
	envs, _ := filepath.Glob(filepath.Join(spy, "env-*.txt"))
	envs = slices.DeleteFunc(envs, func(e string) bool { return strings.Contains(e, "_supervisor") })
	if len(envs) != 2 {
		t.Fatalf("engine environments %v; want one per agent step", envs)
	}
	for _, e := range envs {
		// The engine script is the run's frozen copy the payload carried,
		// not the operator's file (docs/architecture.md § The run lifecycle).
		self := strings.TrimSpace(readFile(t, strings.Replace(e, "env-", "self-", 1)))
		if self == "engine.sh" || strings.HasPrefix(self, dir) || !filepath.IsAbs(self) {
			t.Errorf("the engine ran the operator's script %q, not the run's frozen copy", self)
		}
		if pwd := strings.TrimSpace(readFile(t, strings.Replace(e, "env-", "pwd-", 1))); strings.HasPrefix(pwd, dir) {
			t.Errorf("the engine worked in %s, under the operator's work dir %s", pwd, dir)
		}
		env := readFile(t, e)
		if strings.Contains(env, "STRATUS_OPERATOR_ONLY") || !strings.Contains(env, "STRATUS_HANDLE=wh-") || !strings.Contains(env, "STRATUS_API_URL=https://127.0.0.1:") {
			t.Errorf("a worker's environment (%s) holds the operator's or lacks RunTask's:\n%s", e, env)
		}
	}

	writeTestFile(t, filepath.Join(spy, "slow"), "")
	r = runCLI(t, append([]string{"run", task, "--dir", dir, "--detach", "--json"}, flags...)...)
	var started struct {
		RunID string `json:"run_id"`
	}
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &started) != nil || started.RunID == "" {
		t.Fatalf("run --detach on dev aws: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	var last result
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Running, and its engine started (the worker exchanged its
		// bootstrap value and fetched its prompt first): cancel then.
		last = runCLI(t, append([]string{"status", started.RunID}, flags...)...)
		pids, _ := filepath.Glob(filepath.Join(spy, "pid-*.txt"))
		if strings.Contains(last.stdout, "first#1          first          running") && len(pids) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second run's first step does not run its engine within 60 s:\n%s%s", last.stdout, last.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := runCLI(t, append([]string{"cancel", started.RunID}, flags...)...); r.code != ExitOK || !strings.Contains(r.stdout, ": interrupted (was running)") {
		t.Fatalf("cancel on dev aws: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The cancelled step's worker and engine are stopped
	// (docs/architecture.md § The run lifecycle), and following the run says
	// interrupted, as cancel did.
	pids, _ := filepath.Glob(filepath.Join(spy, "pid-*.txt"))
	if len(pids) != 1 {
		t.Fatalf("slow engines %v; want the one of the cancelled step", pids)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(readFile(t, pids[0])))
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled step's engine (pid %d) still runs 30 s after cancel", pid)
		}
	}
	if r := runCLI(t, append([]string{"status", started.RunID, "--follow"}, flags...)...); r.code != ExitInterrupted || !strings.Contains(r.stdout, "interrupted") {
		t.Errorf("status --follow of the cancelled run: exit %d, want %d (interrupted)\n%s%s", r.code, ExitInterrupted, r.stdout, r.stderr)
	}
	os.Remove(filepath.Join(spy, "slow"))
	r = runCLI(t, append([]string{"resume", started.RunID}, flags...)...)
	if r.code != ExitOK || join(steps(r.stderr)) != "first#2:done answer#1:done publish#1:done" {
		t.Errorf("resume on dev aws: exit %d, steps %s\n%s", r.code, join(steps(r.stderr)), r.stderr)
	}
	r = runCLI(t, append([]string{"runs", "--json"}, flags...)...)
	var lines []RunLine
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &lines) != nil || len(lines) != 2 || lines[0].RunID != started.RunID || lines[0].Status != "done" || lines[0].Resumes != 1 {
		t.Errorf("runs on dev aws: exit %d %s", r.code, r.stdout)
	}
}

// `stratus dev aws` keeps its moto data, logs and workers' directories in
// one stratus-dev-aws-* directory, removed when it stops, on Ctrl-C and on
// SIGTERM (README § Without an account). It was left behind.
func TestDevAWS_RemovesItsDirectoryWhenItStops(t *testing.T) {
	t.Parallel()
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(stratusBin, "dev", "aws", "--runners", "process")
			var errb syncBuffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer cmd.Process.Kill()
			workers := regexp.MustCompile(`workers in (\S+)/workers\n`)
			var dir string
			deadline := time.Now().Add(60 * time.Second)
			for dir == "" && time.Now().Before(deadline) {
				if m := workers.FindStringSubmatch(errb.String()); m != nil {
					dir = m[1]
				} else {
					time.Sleep(50 * time.Millisecond) // polling its stderr for the line
				}
			}
			if dir == "" || !strings.Contains(filepath.Base(dir), "stratus-dev-aws-") {
				t.Fatalf("no stratus-dev-aws-* directory named within 60 s:\n%s", errb.String())
			}
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("its directory %s while it serves: %v", dir, err)
			}
			cmd.Process.Signal(sig)
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("ended with %v after %s:\n%s", err, sig, errb.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("did not stop within 30 s of %s", sig)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s left behind after %s (%v)", dir, sig, err)
			}
		})
	}
}

// A template the SAM translator refuses ends `stratus dev aws` with exit 1
// and the translator's message, which names the resource (README § What dev
// aws emulates).
func TestDevAWS_TemplateThatDoesNotTransformExits1NamingTheResource(t *testing.T) {
	t.Parallel()
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	if why := devstack.MissingTranslator(); why != "" {
		testenv.Missing(t, "aws-sam-translator", why)
	}
	tpl := strings.Replace(string(stratus.SAMTemplate), "            Path: /v1/healthz\n", "            Path: 42\n", 1)
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(stratusBin, "dev", "aws", "--template", path)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != ExitFailed || !strings.Contains(string(out), "WorkerApiFunction") || !strings.Contains(string(out), "Healthz") {
		t.Errorf("stratus dev aws --template (bad): %v; want exit 1 naming WorkerApiFunction's event Healthz:\n%s", err, out)
	}
}

// `stratus dev aws --endpoint-url URL --stack NAME` deploys nothing: it
// serves the stack an earlier dev aws deployed on that stand-in, as its
// outputs say, and a run goes to its end on it (README § What dev aws
// emulates).
func TestDevAWS_StackServesAnExistingStack(t *testing.T) {
	t.Parallel()
	if why := moto.Missing(); why != "" {
		testenv.Missing(t, "moto", why)
	}
	m, err := moto.Start(0, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	// The first dev aws deploys the stack and stops; the stack stays.
	first := exec.Command(stratusBin, "dev", "aws", "--endpoint-url", m.URL, "--name", "kept", "--runners", "process")
	var errb syncBuffer
	first.Stderr = &errb
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "--target aws ") {
		first.Process.Kill()
		t.Fatalf("the first dev aws printed %q:\n%s", line, errb.String())
	}
	first.Process.Signal(os.Interrupt)
	if err := first.Wait(); err != nil {
		t.Fatalf("the first dev aws ended with %v:\n%s", err, errb.String())
	}
	flags := devAWSWith(t, []string{"--endpoint-url", m.URL, "--stack", "kept"})
	if !strings.Contains(strings.Join(flags, " "), "--stack kept") {
		t.Fatalf("dev aws --stack kept printed %v", flags)
	}
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), "read line\nprintf '{\"subrun_report\": \"ok\"}\\n'\n")
	usePrimaryShellEngineEnv(t, dir, "shx", "{}")
	writeTwoStepFlow(t, dir)
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-kept\ntitle: Kept\ntask_type: tiny\n---\nbody\n")
	if r := runCLI(t, append([]string{"run", task, "--dir", dir}, flags...)...); r.code != ExitOK {
		t.Fatalf("run on the kept stack: exit %d\n%s", r.code, r.stderr)
	}
}
