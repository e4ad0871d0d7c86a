package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
)

// DefinitionKey is the sink key of a run's compiled definition, beside its
// frozen environment (runenv.BundlePrefix): "runs/<run_id>/definition.asl.json".
func DefinitionKey(runID string) string { return "runs/" + runID + "/definition.asl.json" }

// PutDefinition keeps the definition run runID was compiled to, so that a
// resume runs the same machine whatever the flow or Stratus became since.
func PutDefinition(ctx context.Context, sk sink.Sink, runID string, def []byte) error {
	if err := sk.Put(ctx, DefinitionKey(runID), def); err != nil {
		return fmt.Errorf("keep the run's compiled definition: %w", err)
	}
	return nil
}

// GetDefinition reads the definition PutDefinition kept. Errors: ENOTFOUND
// (a run started before definitions were kept) saying so.
func GetDefinition(ctx context.Context, sk sink.Sink, runID string) ([]byte, error) {
	def, err := sk.Get(ctx, DefinitionKey(runID))
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "run %s has no compiled definition kept (%s): it started before this version of Stratus and cannot be resumed; run the task again", runID, DefinitionKey(runID))
	}
	return def, err
}

// resumeSuffix separates a run id from the resume count in an execution
// name; run ids never hold a '.'.
const resumeSuffix = ".resume-"

// ExecutionName names execution n of a run: the run id for the first
// (resumes 0), "<run_id>.resume-<n>" for the nth resume, so that every
// execution of a run has a name unique per state machine and the run id
// can be read back (RunIDOf).
func ExecutionName(runID string, resumes int) string {
	if resumes == 0 {
		return runID
	}
	return fmt.Sprintf("%s%s%d", runID, resumeSuffix, resumes)
}

// RunIDOf returns the run id an execution name (ExecutionName) belongs to.
func RunIDOf(executionName string) string {
	id, _, _ := strings.Cut(executionName, resumeSuffix)
	return id
}

// Describe says in one line where the run resumes, for the progress line.
func (p *ResumePoint) Describe() string {
	switch {
	case p.State == "":
		return "it had no step yet: it starts over"
	case p.Rerun:
		return fmt.Sprintf("%s runs again (a new visit of %s)", p.From, p.State)
	}
	line := fmt.Sprintf("after %s, at %s", p.From, p.State)
	if len(p.Reset) > 0 {
		var parts []string
		for _, k := range sortedKeys(p.Reset) {
			parts = append(parts, fmt.Sprintf("%s %d→0", k, p.Reset[k]))
		}
		line += " (budgets reset: " + strings.Join(parts, ", ") + ")"
	}
	return line
}

func sortedKeys(m map[string]int) []string { return slices.Sorted(maps.Keys(m)) }
