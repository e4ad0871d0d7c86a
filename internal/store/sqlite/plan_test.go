package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// A dispatch's look-up of its dedup key (createStep) seeks the partial
// index steps_dedup_key, and a prune's check of a blob outputs_blob.
// Without the query's own test that the value is not empty (the index's
// WHERE) the planner cannot use a partial index for a bound value: each
// dispatch scanned every step of every run the work dir ever held.
func TestPartialIndexes_TheirLookUpsSeekThem(t *testing.T) {
	t.Parallel()
	s := openT(t, filepath.Join(t.TempDir(), "s.db"))
	for query, index := range map[string]string{selectStepByDedupSQL: "steps_dedup_key", blobInUseSQL: "outputs_blob"} {
		if p := queryPlan(t, s, query, "k"); !strings.Contains(p, "INDEX "+index) || strings.Contains(p, "SCAN ") {
			t.Errorf("plan of %q: %s; want a search of %s", query, p, index)
		}
	}
}

// queryPlan is EXPLAIN QUERY PLAN of query with args, its lines joined.
func queryPlan(t *testing.T, s *Store, query string, args ...any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; ")
}
