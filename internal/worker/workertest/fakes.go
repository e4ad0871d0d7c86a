package workertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/executor/embedded"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/core"
)

// RefusingSink is a sink whose Put of a key ending in Suffix fails with
// Err, as an fs sink on a disk that filled up names the file; OnPut, when
// set, sees every Put first.
type RefusingSink struct {
	sink.Sink
	Suffix string
	Err    error
	OnPut  func(key string)
}

// Put refuses a key ending in Suffix and passes any other to the sink.
func (s *RefusingSink) Put(ctx context.Context, key string, body []byte) error {
	if s.OnPut != nil {
		s.OnPut(key)
	}
	if strings.HasSuffix(key, s.Suffix) {
		return fmt.Errorf("fs sink: write /work/%s: %w", key, s.Err)
	}
	return s.Sink.Put(ctx, key, body)
}

// RefusingStore is a store that refuses to record a step completed (a
// SQLite database on a disk that filled up).
type RefusingStore struct{ store.Store }

// UpdateStep refuses a completed step and passes any other to the store.
func (s RefusingStore) UpdateStep(ctx context.Context, st stratus.Step) error {
	if st.Status == stratus.StepCompleted {
		return fmt.Errorf("update step %s: database or disk is full (13)", st.StepRef)
	}
	return s.Store.UpdateStep(ctx, st)
}

// DiskFullSpy records what a service tells its DiskFull (set
// Config.DiskFull to its Hook).
type DiskFullSpy struct {
	mu   sync.Mutex
	errs []error
}

// Hook records err.
func (d *DiskFullSpy) Hook(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

// Told returns the errors recorded so far.
func (d *DiskFullSpy) Told() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// FailingLauncher fails every launch with Err.
type FailingLauncher struct{ Err error }

// Launch fails with l.Err.
func (l FailingLauncher) Launch(context.Context, launch.Spec) (string, error) { return "", l.Err }

// Stop does nothing.
func (FailingLauncher) Stop(context.Context, string) error { return nil }

// SendToDispatch is the embedded executor's sqs:sendMessage resource as
// `stratus run` wires it: each message's body goes to svc.Dispatch on a
// goroutine of its own, counted in dispatches; a dispatch error is given
// to onErr with the message.
func SendToDispatch(svc *worker.Service, dispatches *sync.WaitGroup, onErr func(core.Message, error)) embedded.TaskHandler {
	return func(_ context.Context, call embedded.TaskCall) (json.RawMessage, error) {
		var p struct {
			MessageBody core.Message `json:"MessageBody"`
		}
		if err := json.Unmarshal(call.Parameters, &p); err != nil {
			return nil, err
		}
		dispatches.Add(1)
		go func() {
			defer dispatches.Done()
			if err := svc.Dispatch(context.Background(), p.MessageBody); err != nil {
				onErr(p.MessageBody, err)
			}
		}()
		return json.RawMessage(`{"MessageId":"m"}`), nil
	}
}

// Instances returns n worker services as separate dispatch Lambda
// instances are: each its own Service value (its own mutexes and memory),
// all on the one store st — a DynamoDB table on the moto server in the
// tests that use it, which applies one request at a time, as DynamoDB makes
// each request atomic, and nothing more — and r's sink, tokens, minter, run
// environment and log. They share one FakeLauncher; r.Run is created in st.
func (r *Rig) Instances(t *testing.T, st store.Store, n int) []*worker.Service {
	t.Helper()
	if err := st.CreateRun(context.Background(), r.Run); err != nil {
		t.Fatal(err)
	}
	launcher := &FakeLauncher{}
	svcs := make([]*worker.Service, n)
	for i := range svcs {
		svcs[i] = worker.New(worker.Config{Store: st, Sink: r.Svc.Sink, Tokens: r.Tokens, Launcher: launcher, Minter: r.Svc.Minter,
			Env: r.Svc.Env, Log: r.Svc.Log, Commits: r.Svc.Commits})
	}
	launcher.Exchange = func(ctx context.Context, v string) (string, error) {
		b, err := svcs[0].ExchangeBootstrap(ctx, "Bearer "+v)
		return b.Handle, err
	}
	return svcs
}

// AllAtOnce runs fn(0..n-1) on n goroutines released together and waits
// for them all.
func AllAtOnce(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

// ListlessStore is a store whose ListSteps fails: a path that reads one
// node's steps (store.Store NodeSteps) and not the run's whole step list
// works on it (README.md § Performance).
type ListlessStore struct{ store.Store }

// ListSteps fails, naming the run.
func (s ListlessStore) ListSteps(_ context.Context, runID string) ([]stratus.Step, error) {
	return nil, fmt.Errorf("ListSteps(%q): this path reads the run's whole step list", runID)
}
