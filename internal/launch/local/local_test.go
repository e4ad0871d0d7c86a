package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/launch"
)

// A worker gets the API URL, handle and task id in its environment
// (docs/architecture.md § The path of one step, 4), and its spool directory
// when the spec names one (docs/security.md § Files under .stratus), writes to
// its log, and OnExit reports its end.
func TestLaunch_EnvironmentLogAndExit(t *testing.T) {
	t.Parallel()
	log := filepath.Join(t.TempDir(), "sub", "runner.log")
	l := &Launcher{Executable: "sh", Args: []string{"-c", `echo "$STRATUS_API_URL $STRATUS_HANDLE $STRATUS_TASK_ID $STRATUS_SPOOL_DIR"; exit 3`}}
	exited := make(chan error, 1)
	if _, err := l.Launch(context.Background(), launch.Spec{APIURL: "http://127.0.0.1:1", Handle: "wh-abcdefgh", TaskID: "r1.a.1", LogPath: log, SpoolDir: filepath.Dir(log),
		OnExit: func(err error) { exited <- err }}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err == nil || !strings.Contains(err.Error(), "exit status 3") {
			t.Errorf("OnExit(%v), want exit status 3", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnExit not called")
	}
	got, _ := os.ReadFile(log)
	if strings.TrimSpace(string(got)) != "http://127.0.0.1:1 wh-abcdefgh r1.a.1 "+filepath.Dir(log) {
		t.Errorf("log = %q", got)
	}
}

// Stop is graceful first: SIGTERM to the runner's group, which a runner
// uses to stop its engine; a worker that ignores it is killed after StopGrace.
func TestStop_TermThenKill(t *testing.T) {
	old := StopGrace
	StopGrace = 300 * time.Millisecond
	defer func() { StopGrace = old }()
	for name, script := range map[string]string{"obeys TERM": "sleep 30", "ignores TERM": "trap '' TERM; sleep 30"} {
		l := &Launcher{Executable: "sh", Args: []string{"-c", script}}
		exited := make(chan error, 1)
		id, err := l.Launch(context.Background(), launch.Spec{OnExit: func(err error) { exited <- err }})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // let sh install its trap
		start := time.Now()
		l.Stop(context.Background(), id)
		select {
		case err := <-exited:
			if err == nil || errors.Is(err, context.Canceled) {
				t.Errorf("%s: exit %v", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: worker still alive after Stop", name)
		}
		if time.Since(start) > 4*time.Second {
			t.Errorf("%s: Stop took %s", name, time.Since(start))
		}
	}
}
