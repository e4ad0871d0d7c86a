package lifecycle

import (
	"time"

	"github.com/stratusflow/stratus"
)

// FilesGone is the refusal of what needs a run's file under key that is
// no longer stored: ENOTFOUND saying a run's files are removed after the
// retention period (docs/security.md § Retention): embedded
// retention_days after the run ended (the run is then marked pruned, and
// stratus.PrunedError says so first); on AWS the bucket's lifecycle rule
// removes each file the stack's RetentionDays after it was written. what
// says what was asked ("resume it").
func FilesGone(run stratus.Run, key, what string) error {
	return stratus.Errorf(stratus.ENOTFOUND, "run %s (task %s, started %s) no longer has its file %s: a run's files are removed after the retention period "+
		"(retention_days embedded, the stack's RetentionDays on AWS; docs/security.md § Retention); cannot %s",
		run.ID, run.TaskID, run.CreatedAt.UTC().Format(time.RFC3339), key, what)
}
