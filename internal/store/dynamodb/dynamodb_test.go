package dynamodb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/store/storetest"
)

// The one conformance suite, against DynamoDB and S3 on moto; every test
// gets a table and a bucket of its own.
func TestStore_Conformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return newFixture(t).store(t, Options{})
	})
}

// A small spill threshold runs the same suite with most bodies and
// prompts in S3, so the pointer path sees every case the inline path does.
func TestStore_Conformance_EverythingSpilled(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return newFixture(t).store(t, Options{SpillBytes: 1, PromptSpillBytes: 1})
	})
}

// parents creates a run, a step and attempt 1 of it.
func parents(t *testing.T, s *Store, id string) (stratus.Step, stratus.Attempt) {
	t.Helper()
	ctx := t.Context()
	if err := s.CreateRun(ctx, stratus.Run{ID: "run-" + id, Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	st := stratus.Step{TID: "tid-" + id, RunID: "run-" + id, Node: "impl", Visit: 1, StepRef: "impl#1", DedupKey: "dk-" + id, Status: stratus.StepRunning}
	if _, _, err := s.CreateStep(ctx, st); err != nil {
		t.Fatal(err)
	}
	a := stratus.Attempt{TID: st.TID, N: 1, Agent: "impl", Status: stratus.AttemptRunning}
	if err := s.CreateAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	return st, a
}

// docs/architecture.md § Limits: a body over the threshold is stored in Blobs
// under its SHA-256; the tail item keeps the pointer and the digest, not the
// body, and reading returns the body byte for byte.
func TestSpill_1MiBBody_RoundTripsByPointer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	_, a := parents(t, s, "spill")
	body := make([]byte, 1<<20)
	mrand.NewChaCha8([32]byte{'s', 'p', 'i', 'l', 'l'}).Read(body)
	atLimit := bytes.Repeat([]byte{'x'}, DefaultSpillBytes)
	for i, b := range [][]byte{atLimit, body} {
		if seq, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputArtifact, Name: "big.bin", Body: b}); err != nil || seq != i+1 {
			t.Fatalf("AppendOutput(%d bytes) = %d, %v; want seq %d", len(b), seq, err, i+1)
		}
	}

	inline := f.raw(t, pkTask+a.TID, tailPrefix(1)+pad(1))
	if got := inline.bytes("body"); !bytes.Equal(got, atLimit) || inline.str("body"+suffixBlob) != "" {
		t.Errorf("a body of exactly %d bytes is not inline: body %d bytes, blob %q", DefaultSpillBytes, len(got), inline.str("body"+suffixBlob))
	}
	it := f.raw(t, pkTask+a.TID, tailPrefix(1)+pad(2))
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	if _, ok := it["body"]; ok {
		t.Errorf("the spilled item still holds the body")
	}
	if it.str("body"+suffixSHA256) != want || it.str("body"+suffixBlob) != BlobKey(want) || it.int("body"+suffixSize) != 1<<20 {
		t.Errorf("pointer = blob %q sha256 %q size %d; want %q, %q, %d",
			it.str("body"+suffixBlob), it.str("body"+suffixSHA256), it.int("body"+suffixSize), BlobKey(want), want, 1<<20)
	}
	stored, err := f.blobs.Get(f.ctx, BlobKey(want))
	if err != nil || !bytes.Equal(stored, body) {
		t.Fatalf("blob %s = %d bytes, %v; want the body", BlobKey(want), len(stored), err)
	}
	tail, err := s.ListOutput(f.ctx, a.TID, 1)
	if err != nil || len(tail) != 2 || !bytes.Equal(tail[1].Body, body) || !bytes.Equal(tail[0].Body, atLimit) {
		t.Fatalf("ListOutput = %d events, %v; want both bodies back", len(tail), err)
	}
}

// A spilled body that no longer matches its digest is refused, not
// returned.
func TestSpill_TamperedBlob_Refused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{SpillBytes: 4})
	_, a := parents(t, s, "tamper")
	body := []byte("a body longer than four bytes")
	if _, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputArtifact, Body: body}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if err := f.blobs.Put(f.ctx, BlobKey(hex.EncodeToString(sum[:])), []byte("something else")); err != nil {
		t.Fatal(err)
	}
	_, err := s.ListOutput(f.ctx, a.TID, 1)
	if err == nil || !strings.Contains(err.Error(), "does not match its SHA-256") {
		t.Errorf("ListOutput of a tampered blob: err = %v, want a digest mismatch", err)
	}
}

// Attempts spill their system prompt and prompt the same way, and an
// update that shrinks one back under the threshold drops the pointer.
func TestSpill_AttemptPrompts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	_, a := parents(t, s, "prompts")
	a.System, a.Prompt = strings.Repeat("system ✓ ", 40<<10), strings.Repeat("p", 300<<10)
	if err := s.UpdateAttempt(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	it := f.raw(t, pkTask+a.TID, skAttempt+pad(1))
	if it.str("system"+suffixBlob) == "" || it.str("prompt"+suffixBlob) == "" || it["system"] != nil || it["prompt"] != nil {
		t.Errorf("large prompts are not spilled: item attributes %v", keys(it))
	}
	got, err := s.GetAttempt(f.ctx, a.TID, 1)
	if err != nil || got.System != a.System || got.Prompt != a.Prompt {
		t.Fatalf("GetAttempt = %d/%d bytes, %v; want %d/%d", len(got.System), len(got.Prompt), err, len(a.System), len(a.Prompt))
	}
	a.System, a.Prompt = "small", ""
	if err := s.UpdateAttempt(f.ctx, a); err != nil {
		t.Fatal(err)
	}
	it = f.raw(t, pkTask+a.TID, skAttempt+pad(1))
	for _, name := range []string{"system" + suffixBlob, "system" + suffixSHA256, "prompt" + suffixBlob, "prompt"} {
		if _, ok := it[name]; ok {
			t.Errorf("after shrinking, the item still has %s", name)
		}
	}
	if got, err := s.GetAttempt(f.ctx, a.TID, 1); err != nil || got.System != "small" || got.Prompt != "" {
		t.Errorf("GetAttempt after shrinking = %q/%q, %v", got.System, got.Prompt, err)
	}
}

func keys(it item) []string {
	var out []string
	for k := range it {
		out = append(out, k)
	}
	return out
}

// An item over the store's budget is refused with ETOOLARGE before it
// reaches DynamoDB (whose own refusal would be an opaque
// ValidationException); bodies and prompts never are, they spill.
func TestItemBudget_TooLargeRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	st, a := parents(t, s, "big")
	huge := strings.Repeat("r", MaxItemBytes)
	a.Reason = huge
	if err := s.UpdateAttempt(f.ctx, a); stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("UpdateAttempt with a %d-byte reason: %v, want ETOOLARGE", len(huge), err)
	}
	a.N = 2
	if err := s.CreateAttempt(f.ctx, a); stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("CreateAttempt with a %d-byte reason: %v, want ETOOLARGE", len(huge), err)
	}
	a.N, a.Reason = 1, ""
	st.Value = []byte(`"` + huge + `"`)
	_, err := s.CompleteAttempt(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputFinal}, a, st)
	if stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("CompleteAttempt with a %d-byte step value: %v, want ETOOLARGE", len(st.Value), err)
	}
	if tail, _ := s.ListOutput(f.ctx, a.TID, 1); len(tail) != 0 {
		t.Errorf("the refused completion appended %d events", len(tail))
	}
	// A body and prompts far larger than the budget are fine.
	a.System, a.Prompt = huge, huge
	if err := s.UpdateAttempt(f.ctx, a); err != nil {
		t.Errorf("UpdateAttempt with %d-byte prompts: %v", len(huge), err)
	}
	if _, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputFinal, Body: []byte(huge + huge)}); err != nil {
		t.Errorf("AppendOutput of a %d-byte body: %v", 2*len(huge), err)
	}
}

// moto never deletes TTL items (docs/architecture.md § Testing stand-ins), and
// DynamoDB only eventually: Sweep deletes expired handles itself, and
// only those. Each handle carries its expiry, rounded up to the second, in
// the TTL attribute.
func TestSweep_DeletesExpiredHandlesOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	handles := []struct {
		h       stratus.Handle
		swept   bool
		ttlSecs int64
	}{
		{stratus.Handle{Handle: "wh-hourago", ExpiresAt: now.Add(-time.Hour)}, true, now.Add(-time.Hour).Unix()},
		{stratus.Handle{Handle: "wh-secondag", ExpiresAt: now.Add(-1500 * time.Millisecond)}, true, now.Unix() - 1},
		{stratus.Handle{Handle: "wh-justnow1", ExpiresAt: now.Add(-time.Millisecond)}, false, now.Unix()}, // swept by the next sweep
		{stratus.Handle{Handle: "wh-tomorrow", ExpiresAt: now.Add(24 * time.Hour)}, false, now.Add(24 * time.Hour).Unix()},
		{stratus.Handle{Handle: "wh-noexpiry"}, false, 0},
	}
	for _, c := range handles {
		c.h.TID, c.h.Attempt = "tid-sweep", 1
		if err := s.PutHandle(f.ctx, c.h); err != nil {
			t.Fatal(err)
		}
		it := f.raw(t, pkHandle+c.h.Handle, skHandle)
		if got := it.int(TTLAttribute); got != c.ttlSecs {
			t.Errorf("handle %s: %s = %d, want %d", c.h.Handle, TTLAttribute, got, c.ttlSecs)
		}
	}
	// Expired but not swept: GetHandle still returns it, whatever TTL says.
	if h, err := s.GetHandle(f.ctx, "wh-hourago"); err != nil || !h.ExpiresAt.Equal(now.Add(-time.Hour)) {
		t.Errorf("GetHandle of an expired, unswept handle = %+v, %v", h, err)
	}
	n, err := s.Sweep(f.ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 deleted", n, err)
	}
	for _, c := range handles {
		_, err := s.GetHandle(f.ctx, c.h.Handle)
		if c.swept && stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("GetHandle(%s) after Sweep: %v, want ENOTFOUND", c.h.Handle, err)
		} else if !c.swept && err != nil {
			t.Errorf("GetHandle(%s) after Sweep: %v, want it kept", c.h.Handle, err)
		}
	}
	if n, err := s.Sweep(f.ctx, now.Add(2*time.Second)); err != nil || n != 1 {
		t.Errorf("second Sweep = %d, %v; want 1 (the handle that expired a millisecond before the first)", n, err)
	}
}

// Sweep pages through more expired handles than one batch delete takes.
func TestSweep_ManyHandles(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	now := time.Now()
	for i := range 60 {
		if err := s.PutHandle(f.ctx, stratus.Handle{Handle: fmt.Sprintf("wh-%08d", i), TID: "t", Attempt: 1, ExpiresAt: now.Add(-time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	// The handles are spread over the index's shards, not one hot partition.
	shards := map[string]bool{}
	for i := range 60 {
		shards[f.raw(t, pkHandle+fmt.Sprintf("wh-%08d", i), skHandle).str(TTLBucketAttribute)] = true
	}
	if len(shards) < TTLShards/2 {
		t.Errorf("60 handles in %d index partitions %v; want them spread over the %d shards", len(shards), shards, TTLShards)
	}
	// One written before the index was sharded is swept all the same.
	legacy := key(pkHandle+"wh-legacy01", skHandle).setAll(map[string]av{attrRecord: str("handle"), attrWID: str(newWID()), "handle": str("wh-legacy01"),
		"tid": text("t"), "attempt": num(1), "expires_at": millis(now.Add(-time.Minute)), TTLAttribute: num(now.Add(-time.Minute).Unix()), TTLBucketAttribute: str(legacyTTLBucket)})
	if _, err := s.create(f.ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Sweep(f.ctx, now); err != nil || n != 61 {
		t.Errorf("Sweep = %d, %v; want 61 (60 sharded, 1 legacy)", n, err)
	}
}

// A conditional create that fails because the item exists reads the
// item back (ALL_OLD): the same write again (the SDK retrying a request
// whose response was lost) is a success; a different write is a conflict.
func TestCreate_SameWriteAgainSucceeds_DifferentWriteConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	it := key("run#retry", skRun).setAll(map[string]av{attrWID: str(newWID()), "status": str("running")})
	for i := range 2 {
		if exists, err := s.create(f.ctx, it); err != nil || exists {
			t.Fatalf("create #%d of the same write = exists %v, %v; want success", i+1, exists, err)
		}
	}
	other := key("run#retry", skRun).setAll(map[string]av{attrWID: str(newWID()), "status": str("running")})
	if exists, err := s.create(f.ctx, other); err != nil || !exists {
		t.Errorf("create of a different write = exists %v, %v; want exists", exists, err)
	}
	if err := s.CreateRun(f.ctx, stratus.Run{ID: "retry"}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("CreateRun over it: %v, want ECONFLICT", err)
	}
}

// Every conditional write, when the SDK retries it after it took effect
// (the response was lost), reports success and writes nothing twice.
func TestSDKRetry_AfterSuccess_Idempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{SpillBytes: 8})
	ctx := f.ctx
	arm := func(op string) { f.faults.arm(op, fault{after: true, err: lost{}}) }
	fired := func(what string) {
		t.Helper()
		if f.faults.fired.Swap(0) != 1 {
			t.Fatalf("%s: the injected lost response did not fire", what)
		}
	}

	arm("TransactWriteItems") // the run and its run-list entry
	if err := s.CreateRun(ctx, stratus.Run{ID: "run-r", Status: stratus.RunRunning}); err != nil {
		t.Fatalf("CreateRun retried by the SDK: %v", err)
	}
	fired("CreateRun")
	if runs, err := s.ListRuns(ctx, 0); err != nil || len(runs) != 1 || runs[0].ID != "run-r" {
		t.Fatalf("ListRuns after the retried CreateRun = %v, %v; want run-r once", runs, err)
	}

	arm("TransactWriteItems")
	st := stratus.Step{TID: "tid-r", RunID: "run-r", Node: "impl", Visit: 1, DedupKey: "dk-r", Status: stratus.StepRunning}
	if _, created, err := s.CreateStep(ctx, st); err != nil || !created {
		t.Fatalf("CreateStep retried by the SDK = created %v, %v; want created", created, err)
	}
	fired("CreateStep")

	arm("TransactWriteItems") // the count moved, and its condition fails on the retry
	next, created, err := s.CreateNextStep(ctx, "run-r", "impl", "dk-r2", func(v int) (stratus.Step, error) {
		return stratus.Step{TID: fmt.Sprintf("tid-r.%d", v), RunID: "run-r", Node: "impl", Visit: v, DedupKey: "dk-r2", Status: stratus.StepRunning}, nil
	})
	if err != nil || !created || next.Visit != 2 {
		t.Fatalf("CreateNextStep retried by the SDK = visit %d, created %v, %v; want visit 2, created", next.Visit, created, err)
	}
	fired("CreateNextStep")

	arm("PutItem")
	a := stratus.Attempt{TID: "tid-r", N: 1, Status: stratus.AttemptRunning}
	if err := s.CreateAttempt(ctx, a); err != nil {
		t.Fatalf("CreateAttempt retried by the SDK: %v", err)
	}
	fired("CreateAttempt")

	arm("PutItem")
	if seq, err := s.AppendOutput(ctx, stratus.OutputEvent{TID: "tid-r", Attempt: 1, Kind: stratus.OutputArtifact, Body: []byte("a spilled artifact")}); err != nil || seq != 1 {
		t.Fatalf("AppendOutput retried by the SDK = %d, %v; want seq 1", seq, err)
	}
	fired("AppendOutput")

	arm("PutItem")
	if err := s.PutHandle(ctx, stratus.Handle{Handle: "wh-retried1", TID: "tid-r", Attempt: 1}); err != nil {
		t.Fatalf("PutHandle retried by the SDK: %v", err)
	}
	fired("PutHandle")

	arm("PutItem")
	if err := s.AppendDegradation(ctx, stratus.Degradation{RunID: "run-r", Tool: "git"}); err != nil {
		t.Fatalf("AppendDegradation retried by the SDK: %v", err)
	}
	fired("AppendDegradation")

	arm("TransactWriteItems")
	a.Status, st.Status = stratus.AttemptSubmitted, stratus.StepCompleted
	if seq, err := s.CompleteAttempt(ctx, stratus.OutputEvent{TID: "tid-r", Attempt: 1, Kind: stratus.OutputFinal, Body: []byte("done"), OK: true}, a, st); err != nil || seq != 2 {
		t.Fatalf("CompleteAttempt retried by the SDK = %d, %v; want seq 2", seq, err)
	}
	fired("CompleteAttempt")

	// Nothing was written twice.
	if steps, err := s.ListSteps(ctx, "run-r"); err != nil || len(steps) != 2 {
		t.Errorf("ListSteps = %d, %v; want 2", len(steps), err)
	}
	if n, err := s.CountVisits(ctx, "run-r", "impl"); err != nil || n != 2 {
		t.Errorf("CountVisits = %d, %v; want 2", n, err)
	}
	if tail, err := s.ListOutput(ctx, "tid-r", 1); err != nil || len(tail) != 2 || tail[1].Kind != stratus.OutputFinal {
		t.Errorf("ListOutput = %+v, %v; want the artifact and the Final", tail, err)
	}
	if ds, err := s.ListDegradations(ctx, "run-r"); err != nil || len(ds) != 1 {
		t.Errorf("ListDegradations = %d, %v; want 1", len(ds), err)
	}
	if got, err := s.GetAttempt(ctx, "tid-r", 1); err != nil || got.Status != stratus.AttemptSubmitted {
		t.Errorf("GetAttempt = %+v, %v; want submitted", got, err)
	}
	// And the retried writes still refuse what is not theirs.
	if _, err := s.AppendOutput(ctx, stratus.OutputEvent{TID: "tid-r", Attempt: 1, Kind: stratus.OutputFinal}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("a second Final: %v, want ECONFLICT", err)
	}
	if err := s.CreateRun(ctx, stratus.Run{ID: "run-r"}); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("CreateRun again: %v, want ECONFLICT", err)
	}
}

// A run created before visit counts were kept (no visit_counts mark, no
// visits# items) goes on: its visits are counted from its step list until
// its next step of the node sets the count, numbered after them. A run
// created with counts reads one item per count, never its step list.
func TestVisitCounts_RunCreatedBeforeThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	queries := &atomic.Int64{}
	counting := dynamodb.NewFromConfig(awstest.Moto(t).Config(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Finalize.Add(middleware.FinalizeMiddlewareFunc("CountQueries",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					if middleware.GetOperationName(ctx) == "Query" {
						queries.Add(1)
					}
					return next.HandleFinalize(ctx, in)
				}), middleware.After)
		})
	})
	s, err := New(counting, Options{Table: f.table, Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	number := func(runID string) func(int) (stratus.Step, error) {
		return func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.impl.%d", runID, v), RunID: runID, Node: "impl", Visit: v, Status: stratus.StepRunning}, nil
		}
	}
	for _, id := range []string{"old", "new"} {
		if err := s.CreateRun(f.ctx, stratus.Run{ID: id, Status: stratus.RunRunning}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, _, err := s.CreateNextStep(f.ctx, id, "impl", "", number(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// "old" as a run of a release before counts: no mark, no count.
	if _, err := f.ddb.UpdateItem(f.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(f.table), Key: runKey("old"),
		UpdateExpression: aws.String("REMOVE visit_counts")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ddb.DeleteItem(f.ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: visitsKey("old", "impl")}); err != nil {
		t.Fatal(err)
	}

	queries.Store(0)
	if n, err := s.CountVisits(f.ctx, "new", "impl"); err != nil || n != 2 {
		t.Errorf("CountVisits(new) = %d, %v; want 2", n, err)
	}
	if n, err := s.CountVisits(f.ctx, "new", "review"); err != nil || n != 0 {
		t.Errorf("CountVisits(new, a node not visited) = %d, %v; want 0", n, err)
	}
	if q := queries.Load(); q != 0 {
		t.Errorf("CountVisits of a run with counts ran %d queries; want none (one item each)", q)
	}

	if n, err := s.CountVisits(f.ctx, "old", "impl"); err != nil || n != 2 {
		t.Errorf("CountVisits(old) = %d, %v; want 2, counted from its steps", n, err)
	}
	st, created, err := s.CreateNextStep(f.ctx, "old", "impl", "", number("old"))
	if err != nil || !created || st.Visit != 3 {
		t.Fatalf("CreateNextStep(old) = visit %d, created %v, %v; want visit 3", st.Visit, created, err)
	}
	if it := f.raw(t, pkRun+"old", skVisits+"impl"); item(it).int("n") != 3 || item(it).str("tid") != "old.impl.3" {
		t.Errorf("the old run's count after its next step = %v; want n 3, tid old.impl.3", it)
	}
	queries.Store(0)
	if n, err := s.CountVisits(f.ctx, "old", "impl"); err != nil || n != 3 || queries.Load() != 0 {
		t.Errorf("CountVisits(old) after = %d, %v (%d queries); want 3 from its count", n, err, queries.Load())
	}
}

// DynamoDB cancels a transaction that collides with another one in flight
// (TransactionConflict, which moto never does); the write tries again.
func TestTransactionConflict_Retried(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	_, a := parents(t, s, "txc")
	conflict := &types.TransactionCanceledException{
		Message:             aws.String("Transaction cancelled [TransactionConflict, None]"),
		CancellationReasons: []types.CancellationReason{{Code: aws.String(codeTransactionConflict)}, {Code: aws.String("None")}},
	}
	f.faults.arm("TransactWriteItems", fault{err: conflict})
	seq, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputFinal, OK: true})
	if err != nil || seq != 1 || f.faults.fired.Load() != 1 {
		t.Fatalf("AppendOutput after a TransactionConflict = %d, %v (fired %d); want seq 1", seq, err, f.faults.fired.Load())
	}
}

// Throttling that outlasts the SDK's retries is an infrastructure error:
// it wraps ErrThrottled and names the AWS error and the key.
func TestThrottling_WrapsErrThrottled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	f.faults.arm("GetItem", fault{err: &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "slow down"}})
	s.c = clientWithOptions{f.ddb, func(o *dynamodb.Options) { o.RetryMaxAttempts = 1 }}
	_, err := s.GetRun(f.ctx, "run-hot")
	if !errors.Is(err, ErrThrottled) || stratus.ErrorCode(err) != stratus.EINTERNAL {
		t.Fatalf("GetRun while throttled: %v; want an internal error wrapping ErrThrottled", err)
	}
	mustContain(t, "error", err.Error(), "ProvisionedThroughputExceededException", `"run-hot"`)
}

// clientWithOptions applies per-call options to every call.
type clientWithOptions struct {
	*dynamodb.Client
	opt func(*dynamodb.Options)
}

func (c clientWithOptions) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return c.Client.GetItem(ctx, in, append(o, c.opt)...)
}

// Errors carry the stratus code, name the key and, where DynamoDB
// decided, the AWS error.
func TestErrors_NameTheKeyAndTheAWSError(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	st, a := parents(t, s, "x")
	if _, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputFinal}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutHandle(f.ctx, stratus.Handle{Handle: "wh-abcdefgh", TID: a.TID, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	errOf := func(_ any, err error) error { return err }
	errOf3 := func(_ any, _ bool, err error) error { return err }
	const ccf, canceled = "ConditionalCheckFailedException", "TransactionCanceledException: ConditionalCheckFailed"
	for _, c := range []struct {
		name string
		err  error
		code string
		subs []string
	}{
		{"CreateRun", s.CreateRun(f.ctx, stratus.Run{ID: "run-x"}), stratus.ECONFLICT, []string{`"run-x"`, ccf}},
		{"GetRun", errOf(s.GetRun(f.ctx, "run-y")), stratus.ENOTFOUND, []string{`"run-y"`}},
		{"UpdateRun", s.UpdateRun(f.ctx, stratus.Run{ID: "run-y"}), stratus.ENOTFOUND, []string{`"run-y"`, ccf}},
		{"CreateStep", errOf3(s.CreateStep(f.ctx, stratus.Step{TID: st.TID, RunID: "run-x", DedupKey: "d2"})), stratus.ECONFLICT, []string{`"tid-x"`, canceled}},
		{"GetStep", errOf(s.GetStep(f.ctx, "tid-y")), stratus.ENOTFOUND, []string{`"tid-y"`}},
		{"UpdateStep", s.UpdateStep(f.ctx, stratus.Step{TID: "tid-y"}), stratus.ENOTFOUND, []string{`"tid-y"`, ccf}},
		{"CreateAttempt", s.CreateAttempt(f.ctx, stratus.Attempt{TID: "tid-x", N: 1}), stratus.ECONFLICT, []string{`"tid-x"`, "1", ccf}},
		{"CreateAttempt/negative", s.CreateAttempt(f.ctx, stratus.Attempt{TID: "tid-x", N: -1}), stratus.EINVALID, []string{`"tid-x"`, "-1"}},
		{"GetAttempt", errOf(s.GetAttempt(f.ctx, "tid-x", 8)), stratus.ENOTFOUND, []string{`"tid-x"`, "8"}},
		{"LatestAttempt", errOf(s.LatestAttempt(f.ctx, "tid-y")), stratus.ENOTFOUND, []string{`"tid-y"`}},
		{"UpdateAttempt", s.UpdateAttempt(f.ctx, stratus.Attempt{TID: "tid-x", N: 8}), stratus.ENOTFOUND, []string{`"tid-x"`, "8", ccf}},
		{"AppendOutput", errOf(s.AppendOutput(f.ctx, stratus.OutputEvent{TID: "tid-x", Attempt: 1, Kind: stratus.OutputFinal})), stratus.ECONFLICT, []string{`"tid-x"`, "1", "final", canceled}},
		{"CompleteAttempt", errOf(s.CompleteAttempt(f.ctx, stratus.OutputEvent{TID: "tid-x", Attempt: 2, Kind: stratus.OutputFinal}, stratus.Attempt{TID: "tid-x", N: 2}, st)), stratus.ENOTFOUND, []string{`"tid-x"`, "2", ccf}},
		{"PutHandle", s.PutHandle(f.ctx, stratus.Handle{Handle: "wh-abcdefgh"}), stratus.ECONFLICT, []string{`"wh-abcdefgh"`, ccf}},
		{"GetHandle", errOf(s.GetHandle(f.ctx, "wh-zzzzzzzz")), stratus.ENOTFOUND, []string{`"wh-zzzzzzzz"`}},
	} {
		if got := stratus.ErrorCode(c.err); got != c.code {
			t.Errorf("%s: error %v has code %q, want %q", c.name, c.err, got, c.code)
			continue
		}
		mustContain(t, c.name+" message", stratus.ErrorMessage(c.err), c.subs...)
	}
}

// A store over a missing table fails with an internal error naming the
// AWS error, never ENOTFOUND (which callers read as "no such record").
func TestMissingTable_InternalNotNotFound(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, err := New(f.ddb, Options{Table: "no-such-table", Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.GetHandle(f.ctx, "wh-abcdefgh")
	if stratus.ErrorCode(err) != stratus.EINTERNAL || !strings.Contains(err.Error(), "ResourceNotFoundException") {
		t.Errorf("GetHandle on a missing table: %v; want an internal error naming ResourceNotFoundException", err)
	}
}

// Many writers appending to one tail get every sequence number once, and
// each writer's events appear in the order it appended them.
func TestAppendOutput_ConcurrentWriters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{SpillBytes: 16})
	_, a := parents(t, s, "conc")
	const writers, each = 8, 6
	errs := make(chan error, writers*each)
	done := make(chan struct{})
	start := make(chan struct{})
	for w := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			for i := range each {
				body := fmt.Appendf(nil, "writer %d event %d", w, i) // over the threshold: spilled
				if _, err := s.AppendOutput(f.ctx, stratus.OutputEvent{TID: a.TID, Attempt: 1, Kind: stratus.OutputArtifact, Name: fmt.Sprint(w), Body: body}); err != nil {
					errs <- err
				}
			}
		}()
	}
	close(start)
	for range writers {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Errorf("AppendOutput: %v", err)
	}
	tail, err := s.ListOutput(f.ctx, a.TID, 1)
	if err != nil || len(tail) != writers*each {
		t.Fatalf("ListOutput = %d events, %v; want %d", len(tail), err, writers*each)
	}
	next := map[string]int{}
	for i, e := range tail {
		if e.Seq != i+1 {
			t.Errorf("tail[%d].Seq = %d", i, e.Seq)
		}
		if want := fmt.Sprintf("writer %s event %d", e.Name, next[e.Name]); string(e.Body) != want {
			t.Errorf("tail[%d] = %q, want %q (writer order)", i, e.Body, want)
		}
		next[e.Name]++
	}
}

// Tables describes the table CreateTables makes: the key schema, the
// sparse TTL index and TTL on; a second CreateTables changes nothing.
func TestCreateTables_MatchesTablesAndIsRepeatable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	prefix := fmt.Sprintf("again%d-", fixtures.Add(1))
	for range 2 {
		if err := CreateTables(f.ctx, f.ddb, prefix); err != nil {
			t.Fatalf("CreateTables: %v", err)
		}
	}
	spec := Tables(prefix)
	if len(spec) != 1 {
		t.Fatalf("Tables = %d tables, want 1", len(spec))
	}
	d, err := f.ddb.DescribeTable(f.ctx, &dynamodb.DescribeTableInput{TableName: aws.String(spec[0].Name)})
	if err != nil {
		t.Fatal(err)
	}
	tbl := d.Table
	ks := func(k []types.KeySchemaElement) string {
		var parts []string
		for _, e := range k {
			parts = append(parts, aws.ToString(e.AttributeName)+":"+string(e.KeyType))
		}
		return strings.Join(parts, ",")
	}
	if got := ks(tbl.KeySchema); got != "pk:HASH,sk:RANGE" {
		t.Errorf("key schema = %s", got)
	}
	if len(tbl.GlobalSecondaryIndexes) != 1 || aws.ToString(tbl.GlobalSecondaryIndexes[0].IndexName) != HandlesByTTL ||
		ks(tbl.GlobalSecondaryIndexes[0].KeySchema) != TTLBucketAttribute+":HASH,"+TTLAttribute+":RANGE" {
		t.Errorf("indexes = %+v", tbl.GlobalSecondaryIndexes)
	}
	defs := map[string]string{}
	for _, ad := range tbl.AttributeDefinitions {
		defs[aws.ToString(ad.AttributeName)] = string(ad.AttributeType)
	}
	if fmt.Sprint(defs) != fmt.Sprint(map[string]string{"pk": "S", "sk": "S", TTLBucketAttribute: "S", TTLAttribute: "N"}) {
		t.Errorf("attribute definitions = %v", defs)
	}
	ttl, err := f.ddb.DescribeTimeToLive(f.ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(spec[0].Name)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != TTLAttribute {
		t.Errorf("TTL = %+v, %v; want enabled on %s", ttl.TimeToLiveDescription, err, TTLAttribute)
	}
}

// New refuses options it cannot work with, naming the field.
func TestNew_Invalid(t *testing.T) {
	t.Parallel()
	c := dynamodb.New(dynamodb.Options{Region: "us-east-1"})
	blobs := &s3Blobs{c: s3.New(s3.Options{Region: "us-east-1"})}
	for _, c := range []struct {
		client Client
		o      Options
		field  string
	}{
		{nil, Options{Table: "t", Blobs: blobs}, "client"},
		{c, Options{Blobs: blobs}, "table"},
		{c, Options{Table: "t"}, "blobs"},
		{c, Options{Table: "t", Blobs: blobs, SpillBytes: 400 << 10}, "spill_bytes"},
		{c, Options{Table: "t", Blobs: blobs, PromptSpillBytes: -1}, "prompt_spill_bytes"},
	} {
		_, err := New(c.client, c.o)
		var e *stratus.Error
		if !errors.As(err, &e) || e.Code != stratus.EINVALID || e.Field != c.field {
			t.Errorf("New(%+v) = %v; want EINVALID on %s", c.o, err, c.field)
		}
	}
}

// itemCounter counts the items DynamoDB reads return (GetItem, BatchGetItem,
// and the items a Query evaluated), so a test can assert how many a call
// reads.
type itemCounter struct{ n atomic.Int64 }

func (c *itemCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountItemsRead",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			switch r := out.Result.(type) {
			case *dynamodb.GetItemOutput:
				if len(r.Item) > 0 {
					c.n.Add(1)
				}
			case *dynamodb.QueryOutput:
				c.n.Add(int64(r.ScannedCount))
			case *dynamodb.BatchGetItemOutput:
				for _, items := range r.Responses {
					c.n.Add(int64(len(items)))
				}
			}
			return out, md, err
		}), middleware.After)
}

// counted is a store on f's table whose client counts the items it reads.
func (f *fixture) counted(t *testing.T) (*Store, *itemCounter) {
	t.Helper()
	c := &itemCounter{}
	client := dynamodb.NewFromConfig(awstest.Moto(t).Config(), func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.register) })
	s, err := New(client, Options{Table: f.table, Blobs: f.blobs})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// LatestSteps reads per node, not per step (README.md § Performance): at
// step 200 of a run of five nodes — one of them with steps of a kind the
// query skips, as the supervisor's turns — it reads no more items than at
// step 5 but a few, where ListSteps reads every step. Its answer is store.Latest
// over ListSteps.
func TestLatestSteps_ItemsReadFlat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, c := f.counted(t)
	ctx := f.ctx
	const runID = "flat"
	if err := s.CreateRun(ctx, stratus.Run{ID: runID, Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"plan", "impl", "review", "fix", "_supervisor"} // the last's steps are of a kind the query skips
	read := map[int]int64{}
	listed := map[int]int64{}
	for n := 1; n <= 200; n++ {
		node := nodes[(n-1)%len(nodes)]
		kind := "agent"
		if node == "_supervisor" {
			kind = "supervisor"
		}
		st, _, err := s.CreateNextStep(ctx, runID, node, "", func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", runID, node, v), RunID: runID, Node: node, Visit: v,
				Kind: kind, Status: stratus.StepRunning}, nil
		})
		if err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if n != 5 && n != 200 {
			st.Status, st.Verdict = stratus.StepCompleted, "done"
			if n%7 == 0 {
				st.Verdict = "skipped" // now and then a visit the query skips: walked past
			}
			if err := s.UpdateStep(ctx, st); err != nil {
				t.Fatal(err)
			}
			continue
		}
		q := store.LatestQuery{Status: stratus.StepCompleted, ExceptTID: st.TID, SkipVerdicts: []string{"skipped"}, SkipKinds: []string{"supervisor"}}
		c.n.Store(0)
		got, err := s.LatestSteps(ctx, runID, q)
		if err != nil {
			t.Fatalf("LatestSteps at step %d: %v", n, err)
		}
		read[n] = c.n.Load()
		c.n.Store(0)
		all, err := s.ListSteps(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		listed[n] = c.n.Load()
		if want := store.Latest(all, q); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("LatestSteps at step %d = %v; want %v (store.Latest over ListSteps)", n, got, want)
		}
	}
	t.Logf("items read by LatestSteps at step 5: %d, at step 200: %d (ListSteps + Latest: %d, %d)", read[5], read[200], listed[5], listed[200])
	if read[200] > read[5]+4 {
		t.Errorf("LatestSteps read %d items at step 200 and %d at step 5; want at most 4 more at step 200 (O(nodes), not O(steps))", read[200], read[5])
	}
}

// A run with steps created before latest# items were kept (here: the
// item of "impl" deleted, as a release before them would have left it)
// reads its step list: the step before impl's latest is not named by it,
// and LatestSteps still finds it.
func TestLatestSteps_StepsFromBeforeLatestItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	ctx := f.ctx
	if err := s.CreateRun(ctx, stratus.Run{ID: "old", Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	create := func(node string, visit int, status string) stratus.Step {
		t.Helper()
		st, _, err := s.CreateStep(ctx, stratus.Step{TID: fmt.Sprintf("old.%s.%d", node, visit), RunID: "old", Node: node, Visit: visit, Status: status})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	create("impl", 1, stratus.StepCompleted)
	create("plan", 1, stratus.StepCompleted)
	create("impl", 2, stratus.StepCompleted)
	if _, err := f.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: latestKey("old", "impl")}); err != nil {
		t.Fatal(err)
	}
	create("impl", 3, stratus.StepRunning)
	got, err := s.LatestSteps(ctx, "old", store.LatestQuery{Status: stratus.StepCompleted})
	var tids []string
	for _, st := range got {
		tids = append(tids, st.TID)
	}
	if want := []string{"old.plan.1", "old.impl.2"}; err != nil || fmt.Sprint(tids) != fmt.Sprint(want) {
		t.Errorf("LatestSteps = %v, %v; want %v (read from the step list)", tids, err, want)
	}
}

// NodeSteps(limit 1) reads the node's latest# item and its latest step —
// as many items at step 200 as at step 5 — where the ListSteps its
// callers read before it reads every step of the run (README.md §
// Performance). Its answer is ListSteps' steps of the node, newest first.
func TestNodeSteps_ItemsReadFlat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, c := f.counted(t)
	ctx := f.ctx
	const runID = "flat"
	if err := s.CreateRun(ctx, stratus.Run{ID: runID, Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"plan", "impl", "review", "fix"}
	read := map[int]int64{}
	listed := map[int]int64{}
	for n := 1; n <= 200; n++ {
		node := nodes[(n-1)%len(nodes)]
		if _, _, err := s.CreateNextStep(ctx, runID, node, "", func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", runID, node, v), RunID: runID, Node: node, Visit: v,
				Kind: "agent", Status: stratus.StepRunning}, nil
		}); err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if n != 5 && n != 200 {
			continue
		}
		c.n.Store(0)
		got, err := s.NodeSteps(ctx, runID, node, 1)
		if err != nil {
			t.Fatalf("NodeSteps at step %d: %v", n, err)
		}
		read[n] = c.n.Load()
		c.n.Store(0)
		all, err := s.ListSteps(ctx, runID)
		if err != nil {
			t.Fatal(err)
		}
		listed[n] = c.n.Load()
		var want []stratus.Step
		for i := len(all) - 1; i >= 0 && len(want) < 1; i-- {
			if all[i].Node == node {
				want = append(want, all[i])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("NodeSteps(%s, 1) at step %d = %v; want %v (ListSteps' latest of the node)", node, n, got, want)
		}
	}
	t.Logf("items read by NodeSteps(limit 1) at step 5: %d, at step 200: %d (ListSteps: %d, %d)", read[5], read[200], listed[5], listed[200])
	if read[200] != read[5] || read[5] > 2 {
		t.Errorf("NodeSteps(limit 1) read %d items at step 5 and %d at step 200; want 2 at each (the latest# item and the step)", read[5], read[200])
	}
}

// A node with steps created before latest# items were kept (here: the
// item of "impl" deleted, as a release before them would have left it):
// NodeSteps reads the step list for the steps the walk back cannot name,
// and needs not for those it can.
func TestNodeSteps_StepsFromBeforeLatestItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s := f.store(t, Options{})
	ctx := f.ctx
	if err := s.CreateRun(ctx, stratus.Run{ID: "old", Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	create := func(node string, visit int) {
		t.Helper()
		if _, _, err := s.CreateStep(ctx, stratus.Step{TID: fmt.Sprintf("old.%s.%d", node, visit), RunID: "old", Node: node, Visit: visit}); err != nil {
			t.Fatal(err)
		}
	}
	create("impl", 1)
	create("plan", 1)
	create("impl", 2)
	if _, err := f.ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(f.table), Key: latestKey("old", "impl")}); err != nil {
		t.Fatal(err)
	}
	create("impl", 3)
	for _, q := range []struct {
		node  string
		limit int
		want  []string
	}{
		{"impl", 1, []string{"old.impl.3"}},
		{"impl", 2, []string{"old.impl.3", "old.impl.2"}},
		{"impl", 0, []string{"old.impl.3", "old.impl.2", "old.impl.1"}},
		{"plan", 0, []string{"old.plan.1"}},
		{"ship", 0, nil},
	} {
		got, err := s.NodeSteps(ctx, "old", q.node, q.limit)
		var tids []string
		for _, st := range got {
			tids = append(tids, st.TID)
		}
		if err != nil || fmt.Sprint(tids) != fmt.Sprint(q.want) {
			t.Errorf("NodeSteps(%s, %d) = %v, %v; want %v", q.node, q.limit, tids, err, q.want)
		}
	}
	// NodesSteps likewise: impl's walk ends at impl.3, and the older
	// plan.1 must not come before impl.2.
	for _, q := range []struct {
		nodes []string
		limit int
		want  []string
	}{
		{[]string{"impl", "plan"}, 1, []string{"old.impl.3"}},
		{[]string{"impl", "plan"}, 2, []string{"old.impl.3", "old.impl.2"}},
		{[]string{"plan", "impl"}, 0, []string{"old.impl.3", "old.impl.2", "old.plan.1", "old.impl.1"}},
		{[]string{"plan", "ship"}, 0, []string{"old.plan.1"}},
	} {
		got, err := s.NodesSteps(ctx, "old", q.nodes, q.limit)
		var tids []string
		for _, st := range got {
			tids = append(tids, st.TID)
		}
		if err != nil || fmt.Sprint(tids) != fmt.Sprint(q.want) {
			t.Errorf("NodesSteps(%v, %d) = %v, %v; want %v", q.nodes, q.limit, tids, err, q.want)
		}
	}
}

// RecentSteps and NodeLatest read what they return and O(1) more, not
// the run (README.md § Performance): at step 200 of a run of four nodes
// as many items as at step 20.
func TestRecentStepsNodeLatest_ItemsReadFlat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	s, c := f.counted(t)
	ctx := f.ctx
	const runID = "flat"
	if err := s.CreateRun(ctx, stratus.Run{ID: runID, Status: stratus.RunRunning}); err != nil {
		t.Fatal(err)
	}
	nodes := []string{"plan", "impl", "review", "fix"}
	recent, heads := map[int]int64{}, map[int]int64{}
	for n := 1; n <= 200; n++ {
		node := nodes[(n-1)%len(nodes)]
		if _, _, err := s.CreateNextStep(ctx, runID, node, "", func(v int) (stratus.Step, error) {
			return stratus.Step{TID: fmt.Sprintf("%s.%s.%d", runID, node, v), RunID: runID, Node: node, Visit: v,
				Kind: "agent", Status: stratus.StepRunning}, nil
		}); err != nil {
			t.Fatalf("step %d: %v", n, err)
		}
		if n != 20 && n != 200 {
			continue
		}
		c.n.Store(0)
		page, total, err := s.RecentSteps(ctx, runID, 0, 10)
		if err != nil || total != n || len(page) != 10 || page[9].Visit != n/4 {
			t.Fatalf("RecentSteps at step %d = %d steps of %d, %v; want the newest 10 of %d", n, len(page), total, err, n)
		}
		recent[n] = c.n.Load()
		c.n.Store(0)
		got, err := s.NodeLatest(ctx, runID)
		if err != nil || len(got) != 4 || got[3].Node != "fix" || got[3].Visit != n/4 {
			t.Fatalf("NodeLatest at step %d = %v, %v; want each node's latest", n, got, err)
		}
		heads[n] = c.n.Load()
	}
	t.Logf("items read at step 20, 200: RecentSteps(10) %d, %d; NodeLatest %d, %d", recent[20], recent[200], heads[20], heads[200])
	if recent[200] != recent[20] || heads[200] != heads[20] {
		t.Errorf("items read grow with the run: RecentSteps %d at step 20, %d at step 200; NodeLatest %d, %d", recent[20], recent[200], heads[20], heads[200])
	}
}
