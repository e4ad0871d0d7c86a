package main

import (
	"context"
	"path"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/store"
)

// records opens what `logs` reads: the work dir's store and its .stratus
// files, or with --target aws the stack's table and bucket (as status and
// runs read them). close releases the store.
func (o *LogsOptions) records() (st store.Store, sk sink.Sink, close func(), err error) {
	if o.Target == TargetAWS {
		if st, sk, err = o.AWS.openRecords(awsContext()); err != nil {
			return nil, nil, nil, usageOr(err)
		}
		return st, sk, func() {}, nil
	}
	s, err := openRuns(o.Dir)
	if err != nil {
		return nil, nil, nil, err
	}
	return s, fs.New(o.Dir).Private(orchestrator.StateDir), func() { s.Close() }, nil
}

// maxStepLog bounds the log `logs` reads of one step.
const maxStepLog = 16 << 20

// readStepLog reads a step's runner log at key. A checks or tool step
// without one (on AWS the runner writes its log to CloudWatch, not the
// bucket) is read from the visit's own report beside it — checks.md or
// tool.md, each command's output included — and the key returned is that
// file's. The error is the sink's: ENOTFOUND when neither exists.
func readStepLog(ctx context.Context, sk sink.Sink, key, kind string) (string, []byte, error) {
	b, err := sk.GetMax(ctx, key, maxStepLog)
	if stratus.ErrorCode(err) != stratus.ENOTFOUND || (kind != flow.KindChecks && kind != flow.KindTool) {
		return key, b, err
	}
	alt := path.Join(path.Dir(key), kind+".md")
	if b, altErr := sk.GetMax(ctx, alt, maxStepLog); altErr == nil {
		return alt, b, nil
	}
	return key, nil, err
}
