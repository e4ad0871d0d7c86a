package lifecycle

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// docs/architecture.md § The run lifecycle: a run whose owner is gone must
// not say running; the owner identity tells this process from a dead one and
// from a reused pid.
func TestOwnerAlive_TellsALiveOwnerFromADeadOne(t *testing.T) {
	t.Parallel()
	if alive, known := OwnerAlive(Owner()); !alive || !known {
		t.Errorf("this process: alive %v known %v", alive, known)
	}
	cmd := exec.Command("sh", "-c", "exit 0")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := ownerOf(cmd.Process.Pid)
	if alive, known := OwnerAlive(dead); alive || !known {
		t.Errorf("an exited process %s: alive %v known %v", dead, alive, known)
	}
	if processStart(os.Getpid()) != "" {
		// The same pid with another start time is another process.
		parts := strings.Split(Owner(), "/")
		reused := parts[0] + "/" + parts[1] + "/1"
		if alive, known := OwnerAlive(reused); alive || !known {
			t.Errorf("a reused pid %s: alive %v known %v", reused, alive, known)
		}
	}
	for _, o := range []string{"", "other-host.example/1/1", "garbage", "host/x/1"} {
		if _, known := OwnerAlive(o); known {
			t.Errorf("OwnerAlive(%q) claims to know", o)
		}
	}
}
