package awsrun

import (
	"context"

	"github.com/stratusflow/stratus"
)

// SetBeforeCreateRun sets what runs just before a start records its run.
func SetBeforeCreateRun(f func(ctx context.Context, run stratus.Run)) { testBeforeCreateRun = f }
