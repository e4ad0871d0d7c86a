package main

import (
	"context"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/store"
)

// runArgHelp is the paragraph of each command taking RUN that says how
// RUN names a run (resolveRunArg).
const runArgHelp = `RUN is a run id, a unique prefix of one, a task id (its newest run) or
latest (the newest run): README § Naming a run. A prefix of several runs
lists them.
`

// resolveRunArg is RUN as typed on the command line made a run id
// (README § Naming a run: a run id, a unique prefix of one, a task id,
// or latest; runview.Resolve), among the runs of work dir dir or, with
// target aws, of the stack aws names. A whole run id is taken as typed,
// without opening the store, and so is any ref in a work dir where no run
// was made: the command says if there is no such run.
// Errors: ENOTFOUND naming ref, EINVALID listing the candidates of an
// ambiguous prefix (both exit 2 through usageOr), the store's.
func resolveRunArg(ctx context.Context, target, dir string, aws *AWSOptions, ref string) (string, error) {
	if lifecycle.CheckRunID(ref) == nil {
		return ref, nil
	}
	var st store.Store
	if target == TargetAWS {
		s, _, err := aws.openRecords(ctx)
		if err != nil {
			return "", err
		}
		st = s
	} else {
		s, err := openRuns(dir)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			return ref, nil // no run was made there: the command says so
		} else if err != nil {
			return "", err
		}
		defer s.Close()
		st = s
	}
	r, err := runview.Resolve(ctx, st, ref)
	return r.ID, err
}
