package sink

import (
	"context"
	"strings"
	"time"
)

// RunKeyed is a sink that the runs of many work dirs share (a stack's
// bucket: internal/sink/s3). It keeps the files of each run's work dir —
// its ctx dir, its logs and summary, its report dir — under the run, so
// that two runs of one task id, from two projects or one after another,
// never share an object (README § On an AWS account, the bucket's layout). A
// sink that is one work dir (internal/sink/fs) is not RunKeyed: there the
// runs of a task take turns under the task's lock, and a later run
// archives an earlier one's files.
type RunKeyed interface {
	// RunKey returns where this sink keeps key of run runID's work dir
	// (a work-dir relative key such as "workspace/tasks/T1/ctx/plan.md"),
	// as a key of the sink itself. key is a valid key (CheckKey).
	RunKey(runID, key string) string
}

// RunKey returns where sk keeps key of run runID's work dir: sk's RunKey
// when sk is RunKeyed, key itself otherwise.
func RunKey(sk Sink, runID, key string) string {
	if rk, ok := sk.(RunKeyed); ok {
		return rk.RunKey(runID, key)
	}
	return key
}

// ForRun returns the sink of run runID's work-dir files: its keys are
// work-dir relative, as the projection, the worker and the summary write
// them, and each is stored in sk under RunKey(sk, runID, key). For a sink
// that is not RunKeyed that is sk itself. The view presigns (Presigner)
// when sk does, and List returns work-dir relative keys. Keys that are
// the run's own already in sk (its bundle and workspace bundles under
// runs/<run_id>/, its uploads) are read and written through sk, not
// through the view.
func ForRun(sk Sink, runID string) Sink {
	rk, ok := sk.(RunKeyed)
	if !ok {
		return sk
	}
	v := runView{base: sk, runID: runID, rk: rk}
	if p, ok := sk.(Presigner); ok {
		return presignRunView{v, p}
	}
	return v
}

// runView is ForRun's view of a RunKeyed sink.
type runView struct {
	base  Sink
	runID string
	rk    RunKeyed
}

// key maps a work-dir key to the base sink's, refusing an invalid one
// with the work-dir key named.
func (v runView) key(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return v.rk.RunKey(v.runID, key), nil
}

func (v runView) Put(ctx context.Context, key string, body []byte) error {
	k, err := v.key(key)
	if err != nil {
		return err
	}
	return v.base.Put(ctx, k, body)
}

func (v runView) Get(ctx context.Context, key string) ([]byte, error) {
	k, err := v.key(key)
	if err != nil {
		return nil, err
	}
	return v.base.Get(ctx, k)
}

func (v runView) GetMax(ctx context.Context, key string, max int64) ([]byte, error) {
	k, err := v.key(key)
	if err != nil {
		return nil, err
	}
	return v.base.GetMax(ctx, k, max)
}

func (v runView) Size(ctx context.Context, key string) (int64, error) {
	k, err := v.key(key)
	if err != nil {
		return 0, err
	}
	return v.base.Size(ctx, k)
}

func (v runView) Delete(ctx context.Context, key string) error {
	k, err := v.key(key)
	if err != nil {
		return err
	}
	return v.base.Delete(ctx, k)
}

// List lists the base sink's RunKey(dir) and gives each key back as the
// work-dir key it stores.
func (v runView) List(ctx context.Context, dir string) ([]string, error) {
	k, err := v.key(dir)
	if err != nil {
		return nil, err
	}
	keys, err := v.base.List(ctx, k)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(keys))
	for _, key := range keys {
		if rest, ok := strings.CutPrefix(key, k+"/"); ok {
			out = append(out, dir+"/"+rest)
		}
	}
	return out, nil
}

// presignRunView is a runView of a sink that presigns.
type presignRunView struct {
	runView
	p Presigner
}

func (v presignRunView) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	k, err := v.key(key)
	if err != nil {
		return "", err
	}
	return v.p.PresignGet(ctx, k, ttl)
}

func (v presignRunView) PresignPutSize(ctx context.Context, key string, size int64, ttl time.Duration) (string, error) {
	k, err := v.key(key)
	if err != nil {
		return "", err
	}
	return v.p.PresignPutSize(ctx, k, size, ttl)
}
