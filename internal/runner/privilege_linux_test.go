package runner

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// envPrivilegeHelper makes this test binary the runner of
// TestDropPrivileges_AnEngineCannotReadItsRunner: it drops its privileges
// as `stratus runner pool` does, then runs probeChild and copies its
// output.
const envPrivilegeHelper = "STRATUS_TEST_PRIVILEGE_HELPER"

// probeChild is what the helper runs, as a runner runs an engine: it says
// whether it could open its parent's environment and memory, its own
// capability sets and no_new_privs, and the file descriptors it holds.
const probeChild = `p=$PPID
if (exec 3< /proc/$p/environ) 2>/dev/null; then echo "environ: read"; else echo "environ: denied"; fi
if (exec 3< /proc/$p/mem) 2>/dev/null; then echo "mem: read"; else echo "mem: denied"; fi
grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status
ls /proc/self/fd > "$FDS"; echo "fds: $(cat "$FDS" | tr '\n' ' ')"
`

func init() {
	if os.Getenv(envPrivilegeHelper) == "" {
		return
	}
	// The runner: as runRunnerPool begins. DropPrivileges re-executes
	// this binary with the same arguments and environment.
	fail := func(what string, err error) {
		os.Stdout.WriteString("helper: " + what + ": " + err.Error() + "\n")
		os.Exit(3)
	}
	if err := CloseInheritedFiles(); err != nil {
		fail("CloseInheritedFiles", err)
	}
	if err := DropPrivileges(); err != nil {
		fail("DropPrivileges", err)
	}
	if err := ProtectCredentials(); err != nil {
		fail("ProtectCredentials", err)
	}
	cmd := exec.Command("sh", "-c", probeChild)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "FDS=" + os.Getenv("FDS")}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	if err := cmd.Run(); err != nil {
		fail("the child", err)
	}
	os.Exit(0)
}

// docs/security.md § A pooled runner's AWS credentials: once a pooled
// runner has dropped its privileges and made itself non-dumpable, a
// process it starts can open neither its environment nor its memory,
// holds no capability and can gain none (no_new_privs), and inherits no
// file the runner inherited. As this test's user; when that is root, also
// as root whose engines would otherwise keep CAP_SYS_PTRACE, and as an
// unprivileged user started with CAP_SYS_PTRACE ambient (as a service
// manager can start one), which its engines would otherwise inherit.
func TestDropPrivileges_AnEngineCannotReadItsRunner(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// A copy every user may run, in a directory every user may enter.
	dir, err := os.MkdirTemp("", "stratus-privilege-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "runner.test")
	copyExecutable(t, self, bin)
	type runAs struct {
		name string
		attr *syscall.SysProcAttr
	}
	cases := []runAs{{"this test's user", nil}}
	if os.Getuid() == 0 {
		const nobody = 65534
		const capSysPtrace = 19
		cases = append(cases, runAs{"uid 65534 with CAP_SYS_PTRACE ambient", &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, AmbientCaps: []uintptr{capSysPtrace}}})
	}
	for _, c := range cases {
		// An open file the runner inherits: it must not reach the child.
		inherited, err := os.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = []string{envPrivilegeHelper + "=1", "PATH=" + os.Getenv("PATH"), "FDS=" + filepath.Join(dir, "fds-"+strings.ReplaceAll(c.name, " ", "-")),
			"AWS_SECRET_ACCESS_KEY=the-runner's-secret"}
		cmd.SysProcAttr = c.attr
		cmd.ExtraFiles = []*os.File{inherited} // fd 3, not close-on-exec in the runner
		out, err := cmd.CombinedOutput()
		inherited.Close()
		if err != nil {
			t.Errorf("%s: the runner: %v\n%s", c.name, err, out)
			continue
		}
		got := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			k, v, _ := strings.Cut(l, ":")
			got[k] = strings.TrimSpace(v)
		}
		for k, want := range map[string]string{"environ": "denied", "mem": "denied", "CapInh": zeroCaps, "CapPrm": zeroCaps,
			"CapEff": zeroCaps, "CapAmb": zeroCaps, "NoNewPrivs": "1"} {
			if got[k] != want {
				t.Errorf("%s: the engine's %s is %q; want %q\n%s", c.name, k, got[k], want, out)
			}
		}
		if os.Getuid() == 0 && c.attr == nil && got["CapBnd"] != zeroCaps {
			t.Errorf("%s: the engine of a root runner has the bounding set %s; want it empty (root's execve fills its capabilities from it)\n%s", c.name, got["CapBnd"], out)
		}
		// sh's own: 0, 1, 2 and the directory ls reads (3).
		if fds := strings.Fields(got["fds"]); len(fds) > 4 {
			t.Errorf("%s: the engine holds file descriptors %v; want stdin, stdout and stderr alone\n%s", c.name, fds, out)
		}
	}
}

const zeroCaps = "0000000000000000"

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
