package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/devstack"
)

// probeEngine is an engine that looks for its pooled runner's AWS
// credentials everywhere a process of the runner's uid might read them,
// and answers what it found (README § Warm runners, isolation;
// docs/security.md § A pooled runner's AWS credentials). {key} and
// {secret} stand for the stand-in's credentials of the pool's runners
// (devstack.PoolAccessKeyID, PoolSecretAccessKey): the script writes them
// to a file it greps with -f, so that no process's command line or
// environment holds them but the runner's. It looks at:
//
//   - its own environment: a credential variable, or a value;
//   - its own privileges: a capability (CAP_SYS_PTRACE reads any
//     process), or no_new_privs unset (a setuid program could give one);
//   - /proc/*/environ and /proc/*/cmdline of every process it can read:
//     a value;
//   - its runner (the `runner pool` process above it): whether its
//     environment and memory can be opened at all;
//   - its runner and PID 1 (in a container its first process, where an
//     init or a shell would keep the task's environment): a credential
//     variable in their environment;
//   - file descriptors it inherited beyond stdin, stdout and stderr;
//   - ~/.aws of its HOME, /root and /home/*: a value, or a HOME that has
//     one at all.
//
// Its report, and the file probe.txt it leaves in the workspace (the run's
// commits bring it back), is "probe: N processes; found: none" or the
// findings.
const probeEngine = `read line
ls /proc/$$/fd > "$TMPDIR/probe-fds"
pat=$TMPDIR/probe-pat
printf '%s\n' '{key}' '{secret}' > "$pat"
found=
add() { found="$found; $*"; }
vars='^(AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|AWS_SECURITY_TOKEN|AWS_CONTAINER_CREDENTIALS_RELATIVE_URI|AWS_CONTAINER_CREDENTIALS_FULL_URI|AWS_CONTAINER_AUTHORIZATION_TOKEN|AWS_WEB_IDENTITY_TOKEN_FILE|AWS_PROFILE)=.'
for v in $(env | grep -E "$vars" | cut -d= -f1); do add "own environment has $v"; done
for c in CapPrm CapEff CapAmb; do
  v=$(awk "/^$c:/ {print \$2}" /proc/$$/status)
  [ "$v" = 0000000000000000 ] || add "holds capabilities ($c $v)"
done
[ "$(awk '/^NoNewPrivs:/ {print $2}' /proc/$$/status)" = 1 ] || add "may gain privileges through a setuid program (NoNewPrivs 0)"
if env | grep -q -F -f "$pat"; then add "own environment has a credential value"; fi
for f in $(grep -l -a -F -f "$pat" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null); do
  p=${f#/proc/}; p=${p%%/*}
  add "$f of $p ($(cat /proc/$p/comm 2>/dev/null)) has a credential value"
done
n=$(ls -d /proc/[0-9]* | wc -l)
runner=$PPID
while [ "$runner" -gt 1 ] && ! tr '\0' ' ' < /proc/$runner/cmdline | grep -q 'runner pool'; do
  runner=$(awk '/^PPid:/ {print $2}' /proc/$runner/status)
done
for p in $runner 1; do
  [ "$p" -gt 0 ] || continue
  what="pid $p ($(cat /proc/$p/comm 2>/dev/null))"
  [ "$p" = "$runner" ] && what="the runner $what"
  if [ "$p" = "$runner" ]; then
    if (exec 3< /proc/$p/mem) 2>/dev/null; then add "the memory of $what can be read"; fi
    if (exec 3< /proc/$p/environ) 2>/dev/null; then add "the environment of $what can be read"; fi
  fi
  if (exec 3< /proc/$p/environ) 2>/dev/null; then
    for v in $(tr '\0' '\n' < /proc/$p/environ | grep -E "$vars" | cut -d= -f1); do add "the environment of $what has $v"; done
  fi
done
for n0 in $(cat "$TMPDIR/probe-fds"); do
  case $n0 in 0|1|2) continue ;; esac
  l=$(readlink /proc/$$/fd/$n0 2>/dev/null) || continue
  case $l in *engine.sh) continue ;; esac
  add "inherited fd $n0 ($l)"
done
[ -e "$HOME/.aws" ] && add "HOME has .aws"
for d in "$HOME/.aws" /root/.aws /home/*/.aws; do
  if [ -d "$d" ] && grep -r -q -F -f "$pat" "$d" 2>/dev/null; then add "$d has a credential value"; fi
done
[ -n "$found" ] || found="; none"
found=$(printf '%s' "${found#; }" | tr -d '"\\' | tr '\n' ' ')
printf 'probe: %s processes; found: %s\n' "$n" "$found" > probe.txt
printf '{"subrun_report": "probe: %s processes; found: %s"}\n' "$n" "$found"
`

// probeReport runs a one-step flow whose engine is probeEngine on the
// stand-in of flags and returns the engine's report.
func probeReport(t *testing.T, flags []string) string {
	t.Helper()
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	writeTestFile(t, filepath.Join(dir, "engine.sh"), strings.NewReplacer("{key}", devstack.PoolAccessKeyID, "{secret}", devstack.PoolSecretAccessKey).Replace(probeEngine))
	usePrimaryShellEngineEnv(t, dir, "probe", "")
	writeTwoStepFlow(t, dir)
	task := filepath.Join(dir, "task.md")
	writeTestFile(t, task, "---\nid: t-probe\ntitle: Probe\ntask_type: tiny\n---\nbody\n")
	// A git work dir: the run's commits, probe.txt among them, are pulled
	// into it (stratus/t-probe).
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	r := runCLI(t, append([]string{"run", task, "--dir", dir}, flags...)...)
	if r.code != ExitOK {
		t.Fatalf("the probe's run: exit %d\n%s", r.code, r.stderr)
	}
	out, err := exec.Command("git", "-C", dir, "show", "stratus/t-probe:probe.txt").CombinedOutput()
	if err != nil {
		t.Fatalf("the probe's report: %v\n%s\n%s", err, out, r.stderr)
	}
	return string(out)
}

// checkProbe fails t unless report says the probe looked and found nothing.
func checkProbe(t *testing.T, report string) {
	t.Helper()
	if !strings.Contains(report, "probe: ") {
		t.Fatalf("the engine did not probe: %q", report)
	}
	if !strings.Contains(report, "; found: none") {
		t.Errorf("an engine of a pooled runner reached its runner's AWS credentials:\n%s", report)
	}
}

// README § Warm runners, isolation; docs/security.md § A pooled runner's
// AWS credentials: an engine a pooled runner starts finds its runner's AWS
// credentials nowhere — not in its environment, not in /proc of its
// runner, of PID 1 or of any process, not through an inherited file, not
// in ~/.aws — with the runner a `stratus runner pool` process of the
// stand-in, run as this test's user (root included).
func TestDevAWS_PooledEngineCannotReachTheRunnersCredentials(t *testing.T) {
	flags := devAWSWith(t, []string{"--pool", "1"}, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	report := probeReport(t, flags)
	t.Logf("as uid %d: %s", os.Getuid(), report)
	checkProbe(t, report)
}

// As TestDevAWS_PooledEngineCannotReachTheRunnersCredentials, with the
// pooled runner a container of the runner image, as a pool service's
// Fargate task runs it: the image's user (uid 10001), its entrypoint (PID
// 1, where a shell or an init would keep the task's environment), the task
// role's credentials in its environment. It tests the stratus of the image
// (make image builds it from this tree).
func TestDevAWS_PooledEngineCannotReachTheRunnersCredentialsInAContainer(t *testing.T) {
	needRunnerImage(t)
	flags := devAWSWith(t, []string{"--runners", "container", "--pool", "1"}, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	report := probeReport(t, flags)
	t.Logf("%s", report)
	checkProbe(t, report)
	if t.Failed() {
		t.Logf("this tests the stratus in %s: make image rebuilds it from this tree", runnerImage)
	}
}
