package reaper

import (
	"bufio"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary plays two parts besides the tests: the reaper itself
// (REAPER_TEST_MODE=reap, as `stratus-runner reap`), and an owner that
// starts a reaper and an engine whose child is a grandchild of the owner,
// prints their pids and waits to be killed (REAPER_TEST_MODE=owner).
func TestMain(m *testing.M) {
	switch os.Getenv("REAPER_TEST_MODE") {
	case "reap":
		os.Exit(Main(os.Stdin))
	case "owner":
		os.Exit(owner())
	}
	os.Exit(m.Run())
}

func self(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func startReaper(exe string) (*Reaper, error) {
	os.Setenv("REAPER_TEST_MODE", "reap")
	defer os.Unsetenv("REAPER_TEST_MODE")
	return Start(exe)
}

func owner() int {
	exe, _ := os.Executable()
	r, err := startReaper(exe)
	if err != nil {
		return 3
	}
	// An engine in a group of its own, as internal/contract starts one,
	// whose own child is what Pdeathsig would not reach.
	eng := exec.Command("sh", "-c", "sleep 300 & echo $$ $!; wait")
	eng.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, _ := eng.StdoutPipe()
	if err := eng.Start(); err != nil {
		return 3
	}
	r.Track(eng.Process.Pid)
	line, _ := bufio.NewReader(out).ReadString('\n')
	os.Stdout.WriteString(strconv.Itoa(r.Pid()) + " " + line)
	time.Sleep(time.Minute)
	return 0
}

// alive says whether pid is a live process (not a zombie).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("%s: pid %d still runs 10 s later", what, pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// docs/architecture.md § The run lifecycle: the owner SIGKILLed, its engine's whole
// group ends — the grandchild too, which Pdeathsig alone leaves running —
// and the reaper exits.
func TestReaper_OwnerKilledEndsTheEnginesWholeGroup(t *testing.T) {
	cmd := exec.Command(self(t))
	cmd.Env = append(os.Environ(), "REAPER_TEST_MODE=owner")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		t.Fatalf("the owner printed no pids: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(line) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	if len(pids) != 3 {
		cmd.Process.Kill()
		t.Fatalf("owner printed %q; want reaper, engine and grandchild pids", line)
	}
	if !alive(pids[2]) {
		t.Fatalf("the grandchild (pid %d) is not running before the owner is killed", pids[2])
	}
	cmd.Process.Kill() // SIGKILL: no clean-up in the owner
	cmd.Wait()
	waitGone(t, "after the owner's SIGKILL", pids[1], pids[2], pids[0])
}

// A group forgotten ("-PGID") is left alone at the end; a tracked one is
// killed; Close ends the reaper.
func TestReaper_ForgottenGroupIsLeftAlone(t *testing.T) {
	r, err := startReaper(self(t))
	if err != nil {
		t.Fatal(err)
	}
	start := func() *exec.Cmd {
		c := exec.Command("sleep", "300")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		go c.Wait()
		t.Cleanup(func() { c.Process.Kill() })
		return c
	}
	kept, forgotten := start(), start()
	if _, err := r.Track(kept.Process.Pid); err != nil {
		t.Fatal(err)
	}
	forget, err := r.Track(forgotten.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	forget()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the tracked group after Close", kept.Process.Pid, r.Pid())
	if !alive(forgotten.Process.Pid) {
		t.Error("the forgotten group was killed")
	}
	if _, err := r.Track(1234); err == nil {
		t.Error("Track after Close: no error")
	}
}

// The reaper skips what is not a "+PGID" or "-PGID" line, and never
// signals pid 1 or every process (0, -1): the test process survives it.
func TestReap_SkipsMalformedLines(t *testing.T) {
	reap(strings.NewReader("+0\n+1\n-\nhello\n+-1\n+abc\n+" + strconv.Itoa(syscall.Getpgrp()) + "x\n"))
}
