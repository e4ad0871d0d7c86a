package functions_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/runenv"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/worker"
)

// docs/security.md § Retention: the bucket expires a run's own files after
// RetentionDays (default 30, 0 disables the rule) — the prefix the rule
// names holds every key the code writes for a run (bundle, definition,
// workspace bundles) under the functions' STRATUS_BUCKET_PREFIX, and none
// of what is shared between runs (the store's spilled bodies) — and an
// expired file's old versions go a day later.
func TestTemplate_RetentionExpiresEveryFileOfARunAndNothingShared(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	p := tp.params["RetentionDays"]
	if p["Default"] != float64(30) || p["MinValue"] != float64(0) {
		t.Errorf("RetentionDays default %v, min %v; want 30 and 0 (for ever)", p["Default"], p["MinValue"])
	}
	var rule map[string]any
	for _, r := range asList(asMap(tp.props("DataBucket")["LifecycleConfiguration"])["Rules"]) {
		if str(asMap(r)["Id"]) == "expire-runs" {
			rule = asMap(r)
		}
	}
	if rule == nil {
		t.Fatal("the data bucket has no expire-runs lifecycle rule")
	}
	if got := fmt.Sprint(rule["ExpirationInDays"]); !strings.Contains(got, "Ref:RetentionDays") || !strings.Contains(fmt.Sprint(rule["Status"]), "HasRetention") {
		t.Errorf("expire-runs expires after %s, status %v; want RetentionDays, disabled when it is 0", got, rule["Status"])
	}
	if nc := asMap(rule["NoncurrentVersionExpiration"]); nc["NoncurrentDays"] != float64(1) {
		t.Errorf("expire-runs keeps old versions %v days; want 1", nc["NoncurrentDays"])
	}
	if cond := fmt.Sprint(asMap(rawDoc(t)["Conditions"])["HasRetention"]); !strings.Contains(cond, "RetentionDays") || !strings.Contains(cond, "0") {
		t.Errorf("condition HasRetention = %s; want RetentionDays != 0", cond)
	}
	prefix := str(rule["Prefix"])
	bucketPrefix := str(asMap(asMap(tp.globals["Environment"])["Variables"])["STRATUS_BUCKET_PREFIX"])
	if bucketPrefix == "" || !strings.HasPrefix(prefix, bucketPrefix) {
		t.Fatalf("expire-runs prefix %q is not under the functions' STRATUS_BUCKET_PREFIX %q", prefix, bucketPrefix)
	}
	const id = "r-20250101T000000-abcdef"
	for _, key := range []string{
		runenv.BundlePrefix(id) + runenv.ManifestFile,
		runenv.BundlePrefix(id) + "flows/implementation.yaml",
		lifecycle.DefinitionKey(id),
		worker.WorkspaceKeys("", id) + "/base.bundle",
		worker.WorkspaceKeys("", id) + "/" + id + ".implementation.1.a1.bundle",
	} {
		if !strings.HasPrefix(bucketPrefix+key, prefix) {
			t.Errorf("a run's file %s%s is not under the expire-runs prefix %s", bucketPrefix, key, prefix)
		}
	}
	if shared := bucketPrefix + dynamodb.BlobKey(strings.Repeat("a", 64)); strings.HasPrefix(shared, prefix) {
		t.Errorf("a spilled body %s, which runs share, is under the expire-runs prefix %s", shared, prefix)
	}
}
