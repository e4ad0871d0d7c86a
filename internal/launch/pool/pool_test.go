package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/pool"
)

// fakeQueue records what is sent; err, when set, refuses every send.
type fakeQueue struct {
	mu   sync.Mutex
	sent [][]byte
	err  error
}

func (q *fakeQueue) Send(_ context.Context, body []byte) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	q.sent = append(q.sent, append([]byte(nil), body...))
	return nil
}

func (q *fakeQueue) bodies() [][]byte {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sent
}

// fakeCold records the specs it launched.
type fakeCold struct {
	mu    sync.Mutex
	specs []launch.Spec
	stops []string
}

func (c *fakeCold) Launch(_ context.Context, s launch.Spec) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.specs = append(c.specs, s)
	return "cold-" + s.TaskID, nil
}

func (c *fakeCold) Stop(_ context.Context, id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stops = append(c.stops, id)
	return nil
}

func spec(network bool) launch.Spec {
	return launch.Spec{APIURL: "https://api.example/", Handle: "wb-one-time", TaskID: "r1.review.2", Attempt: 3, NetworkAccess: network}
}

func newPool(t *testing.T, c pool.Config) *pool.Launcher {
	t.Helper()
	if c.Poll == 0 {
		c.Poll = 10 * time.Millisecond
	}
	l, err := pool.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// README.md § Warm runners (pool mode): the assignment goes to the queue of
// the node's profile, carrying what RunTask's overrides carry; once a runner
// exchanged the bootstrap, Launch returns a pool id and no cold task is
// started.
func TestLaunch_APooledRunnerTakesTheStep(t *testing.T) {
	t.Parallel()
	offline, online, cold := &fakeQueue{}, &fakeQueue{}, &fakeCold{}
	var polls atomic.Int32
	l := newPool(t, pool.Config{Offline: offline, Online: online, Cold: cold,
		Taken: func(_ context.Context, b string) (bool, error) {
			if b != "wb-one-time" {
				t.Errorf("Taken(%q); want the spec's bootstrap", b)
			}
			return polls.Add(1) >= 3, nil
		}})
	for _, network := range []bool{false, true} {
		polls.Store(0)
		id, err := l.Launch(context.Background(), spec(network))
		if err != nil || id != pool.IDPrefix+"r1.review.2" {
			t.Fatalf("Launch(network %v) = %q, %v; want the pool's id", network, id, err)
		}
	}
	if len(cold.specs) != 0 {
		t.Errorf("a cold task was started: %+v", cold.specs)
	}
	for _, c := range []struct {
		q       *fakeQueue
		network bool
	}{{offline, false}, {online, true}} {
		if len(c.q.bodies()) != 1 {
			t.Fatalf("the network_access %v queue got %d assignments; want 1", c.network, len(c.q.bodies()))
		}
		a, err := launch.DecodeAssignment(c.q.bodies()[0])
		if err != nil {
			t.Fatal(err)
		}
		if a.APIURL != "https://api.example/" || a.Handle != "wb-one-time" || a.TaskID != "r1.review.2" || a.Attempt != 3 || a.NetworkAccess != c.network || a.SentAtMS == 0 {
			t.Errorf("assignment %+v does not carry the spec", a)
		}
	}
}

// README.md § Warm runners (pool mode): nobody takes the assignment within
// the pickup window: the task token is heartbeaten while it waits, then the
// same spec goes cold.
func TestLaunch_NoTakerFallsBackToColdHeartbeatingMeanwhile(t *testing.T) {
	t.Parallel()
	q, cold := &fakeQueue{}, &fakeCold{}
	l := newPool(t, pool.Config{Offline: q, Cold: cold, Pickup: 300 * time.Millisecond, Heartbeat: 40 * time.Millisecond,
		Taken: func(context.Context, string) (bool, error) { return false, nil }})
	var beats atomic.Int32
	s := spec(false)
	s.Waiting = func() error { beats.Add(1); return nil }
	id, err := l.Launch(context.Background(), s)
	if err != nil || id != "cold-r1.review.2" {
		t.Fatalf("Launch = %q, %v; want the cold launcher's id", id, err)
	}
	if len(cold.specs) != 1 || cold.specs[0].Handle != "wb-one-time" || cold.specs[0].TaskID != s.TaskID {
		t.Errorf("cold launches %+v; want the same spec once", cold.specs)
	}
	if beats.Load() < 2 {
		t.Errorf("Waiting was called %d times over a 300 ms wait with a 40 ms heartbeat; want the task token kept alive", beats.Load())
	}
	if len(q.bodies()) != 1 {
		t.Errorf("%d assignments sent; want 1", len(q.bodies()))
	}
}

// A profile with no pool, or a queue that refuses the send, goes cold at
// once; a pickup that cannot be checked is an error, as is a cancelled
// dispatch.
func TestLaunch_NoPoolOrNoQueueGoesColdAtOnce(t *testing.T) {
	t.Parallel()
	cold := &fakeCold{}
	never := func(context.Context, string) (bool, error) { return false, nil }
	l := newPool(t, pool.Config{Offline: &fakeQueue{err: errors.New("throttled")}, Cold: cold, Taken: never, Pickup: time.Hour})
	start := time.Now()
	for _, network := range []bool{true, false} { // no online pool; the offline queue refuses
		if id, err := l.Launch(context.Background(), spec(network)); err != nil || id != "cold-r1.review.2" {
			t.Fatalf("Launch(network %v) = %q, %v; want cold at once", network, id, err)
		}
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("going cold waited %s", time.Since(start))
	}

	broken := newPool(t, pool.Config{Offline: &fakeQueue{}, Cold: cold, Taken: func(context.Context, string) (bool, error) {
		return false, errors.New("store down")
	}})
	if _, err := broken.Launch(context.Background(), spec(false)); err == nil {
		t.Error("Launch with a failing pickup check = nil; want its error")
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	waiting := newPool(t, pool.Config{Offline: &fakeQueue{}, Cold: cold, Taken: never, Pickup: time.Hour})
	if _, err := waiting.Launch(ctx, spec(false)); !errors.Is(err, context.Canceled) {
		t.Errorf("Launch after cancel = %v; want context.Canceled", err)
	}
	if n := len(cold.specs); n != 2 {
		t.Errorf("%d cold launches; want the 2 that had no pool", n)
	}
	if err := l.Stop(context.Background(), pool.IDPrefix+"x"); err != nil || len(cold.stops) != 0 {
		t.Errorf("Stop(pool id) = %v, cold stops %v; want nothing stopped", err, cold.stops)
	}
	if err := l.Stop(context.Background(), "cold-x"); err != nil || len(cold.stops) != 1 {
		t.Errorf("Stop(cold id) = %v, cold stops %v; want the cold launcher's stop", err, cold.stops)
	}
}

// A publisher's spec never goes to a pool: its task definition alone holds
// the git credential (launch.Spec.Publisher), so it is launched cold at
// once, on either profile, and nothing is queued.
func TestLaunch_APublisherAlwaysGoesCold(t *testing.T) {
	t.Parallel()
	cold := &fakeCold{}
	offline, online := &fakeQueue{}, &fakeQueue{}
	always := func(context.Context, string) (bool, error) { return true, nil } // a runner would take anything queued
	l := newPool(t, pool.Config{Offline: offline, Online: online, Cold: cold, Taken: always, Pickup: time.Hour})
	for _, network := range []bool{true, false} {
		s := spec(network)
		s.Publisher = true
		if id, err := l.Launch(context.Background(), s); err != nil || id != "cold-r1.review.2" {
			t.Fatalf("Launch(publisher, network %v) = %q, %v; want the cold launcher's id", network, id, err)
		}
	}
	if n, m := len(offline.bodies()), len(online.bodies()); n+m != 0 {
		t.Errorf("%d offline and %d online assignments queued for a publisher; want none", n, m)
	}
	if len(cold.specs) != 2 || !cold.specs[0].Publisher || !cold.specs[1].Publisher {
		t.Errorf("cold launches %+v; want the 2 publisher specs, Publisher kept", cold.specs)
	}
}

func TestNew_NeedsColdAndTaken(t *testing.T) {
	t.Parallel()
	if _, err := pool.New(pool.Config{Cold: &fakeCold{}}); err == nil {
		t.Error("New without Taken = nil error")
	}
	if _, err := pool.New(pool.Config{Taken: func(context.Context, string) (bool, error) { return false, nil }}); err == nil {
		t.Error("New without Cold = nil error")
	}
}

func TestDecodeAssignment_RefusesWhatIsNotOne(t *testing.T) {
	t.Parallel()
	good := launch.Assignment{APIURL: "https://a", Handle: "wb-x", TaskID: "t"}.Encode()
	if _, err := launch.DecodeAssignment(good); err != nil {
		t.Fatalf("DecodeAssignment(%s) = %v", good, err)
	}
	for body, field := range map[string]string{
		`not json`: "body",
		`{"v":2,"api_url":"https://a","handle":"wb-x","task_id":"t"}`: "v",
		`{"v":1,"api_url":"ftp://a","handle":"wb-x","task_id":"t"}`:   "api_url",
		`{"v":1,"api_url":"https://a","task_id":"t"}`:                 "handle",
		`{"v":1,"api_url":"https://a","handle":"wb-x"}`:               "task_id",
	} {
		if _, err := launch.DecodeAssignment([]byte(body)); err == nil || !containsField(err, field) {
			t.Errorf("DecodeAssignment(%s) = %v; want EINVALID naming %s", body, err, field)
		}
	}
}

func containsField(err error, field string) bool {
	var se *stratus.Error
	return errors.As(err, &se) && se.Code == stratus.EINVALID && se.Field == field
}

// A step whose state stopped waiting while its assignment did (its
// execution ended, its heartbeat refused) gets no cold task: Launch gives
// up with launch.ErrStepGone.
func TestLaunch_AStepGoneWhileWaitingGetsNoColdTask(t *testing.T) {
	t.Parallel()
	cold := &fakeCold{}
	l := newPool(t, pool.Config{Offline: &fakeQueue{}, Cold: cold, Pickup: time.Hour, Heartbeat: 20 * time.Millisecond,
		Taken: func(context.Context, string) (bool, error) { return false, nil }})
	var beats atomic.Int32
	s := spec(false)
	s.Waiting = func() error {
		if beats.Add(1) >= 3 {
			return stratus.Errorf(stratus.ECONFLICT, "TaskTimedOut: the task has timed out")
		}
		return nil
	}
	if _, err := l.Launch(context.Background(), s); !errors.Is(err, launch.ErrStepGone) {
		t.Fatalf("Launch of a step gone = %v; want launch.ErrStepGone", err)
	}
	if len(cold.specs) != 0 {
		t.Errorf("a cold task was started for a step gone: %+v", cold.specs)
	}
}
