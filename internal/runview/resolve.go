package runview

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

// Latest is the RUN that names the newest run of a store (README § Naming
// a run).
const Latest = "latest"

// ambiguousShown is how many candidates an ambiguous RUN lists.
const ambiguousShown = 10

// Resolve finds the run that ref names, as every command taking a RUN
// reads it (README § Naming a run): `latest` is the store's newest run; a
// whole run id is that run; a whole task id names the newest run of that
// task (before any prefix: a name given whole wins over a partial one);
// otherwise ref is a unique prefix of a run id. Errors:
// ENOTFOUND (field "run") naming ref when no run matches; EINVALID (field
// "run") listing the candidates (id, task, status, start), newest first,
// when ref matches more than one run; the store's reads.
func Resolve(ctx context.Context, st store.Store, ref string) (stratus.Run, error) {
	if strings.TrimSpace(ref) == "" {
		return stratus.Run{}, stratus.FieldErrorf(stratus.EINVALID, "run", "the run is empty; give a run id, a unique prefix of one, a task id or %s", Latest)
	}
	if ref == Latest {
		runs, err := st.ListRuns(ctx, 1)
		if err != nil {
			return stratus.Run{}, err
		}
		if len(runs) == 0 {
			return stratus.Run{}, stratus.FieldErrorf(stratus.ENOTFOUND, "run", "%s: no run was made yet", Latest)
		}
		return runs[0], nil
	}
	r, err := st.GetRun(ctx, ref)
	if err == nil {
		return r, nil
	} else if stratus.ErrorCode(err) != stratus.ENOTFOUND {
		return stratus.Run{}, err
	}
	byTask, err := st.FindRuns(ctx, store.RunQuery{TaskID: ref, Limit: 1})
	if err != nil {
		return stratus.Run{}, err
	}
	if len(byTask) == 1 {
		return byTask[0], nil
	}
	cands, err := st.FindRuns(ctx, store.RunQuery{IDPrefix: ref, Limit: ambiguousShown + 1})
	if err != nil {
		return stratus.Run{}, err
	}
	switch {
	case len(cands) == 1:
		return cands[0], nil
	case len(cands) == 0:
		return stratus.Run{}, stratus.FieldErrorf(stratus.ENOTFOUND, "run", "run %q not found: no run has that id, or an id starting so, and no task of that id has a run (`stratus runs` lists them)", ref)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %q is ambiguous: it names more than one run; give more of the id:\n", ref)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for i, c := range cands {
		if i == ambiguousShown {
			fmt.Fprint(tw, "  …\n")
			break
		}
		fmt.Fprintf(tw, "  %s\ttask %s\t%s\tstarted %s\n", c.ID, c.TaskID, c.Status, c.CreatedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	return stratus.Run{}, stratus.FieldErrorf(stratus.EINVALID, "run", "%s", strings.TrimSuffix(b.String(), "\n"))
}
