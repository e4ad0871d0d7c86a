package dynamodb

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/stratusflow/stratus"
)

// The stack's task pool (README.md § Task pool) keeps two kinds of items
// here: one claim per task taken from tasks/pending/ (the claim function's
// conditional write: a task is claimed once, whoever claims it), and the
// pool's lease, which serializes claims (one claim decides at a time, so
// the count of claims under way is exact). Like the task lock they are not
// part of store.Store: an embedded pool claims with files
// (internal/taskpool).

const (
	pkPool      = "pool"
	skPoolClaim = "claim#" // + task id
	skPoolLease = "lease"
)

// PoolClaim is the claim of one task of the stack's pool.
type PoolClaim struct {
	TaskID    string
	File      string    // the task file's name under tasks/pending/
	RunID     string    // the run that runs it
	ClaimedAt time.Time // ms precision
}

// ClaimPoolTask records claim c: a conditional put that succeeds only when
// no claim of c.TaskID exists. Errors: ECONFLICT naming the run that
// holds the claim; the AWS error, wrapped.
func (s *Store) ClaimPoolTask(ctx context.Context, c PoolClaim) error {
	it := key(pkPool, skPoolClaim+c.TaskID).setAll(map[string]av{
		attrRecord: str("pool_claim"), "task_id": str(c.TaskID), "file": str(c.File), "run_id": str(c.RunID), "claimed_at": millis(c.ClaimedAt),
	})
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
	if old, ok := conditionFailed(err); ok {
		return stratus.Errorf(stratus.ECONFLICT, "task %q is claimed already (run %s)", c.TaskID, old.str("run_id"))
	}
	return wrap("claim task "+quote(c.TaskID), err)
}

// PoolClaims lists the pool's claims, by task id.
func (s *Store) PoolClaims(ctx context.Context) ([]PoolClaim, error) {
	items, err := s.query(ctx, pkPool, skPoolClaim, false, 0)
	if err != nil {
		return nil, wrap("list the task pool's claims", err)
	}
	out := make([]PoolClaim, 0, len(items))
	for _, it := range items {
		out = append(out, PoolClaim{TaskID: it.str("task_id"), File: it.str("file"), RunID: it.str("run_id"), ClaimedAt: it.time("claimed_at")})
	}
	return out, nil
}

// ReleasePoolClaim deletes the claim of task taskID when run runID holds
// it; a claim another run holds, or none, is left as it is (not an
// error). Errors: the AWS error, wrapped.
func (s *Store) ReleasePoolClaim(ctx context.Context, taskID, runID string) error {
	_, err := s.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pkPool, skPoolClaim+taskID),
		ConditionExpression: aws.String("#run = :run"), ExpressionAttributeNames: map[string]string{"#run": "run_id"},
		ExpressionAttributeValues: map[string]av{":run": str(runID)}})
	if _, ok := conditionFailed(err); ok {
		return nil
	}
	return wrap("release the claim of task "+quote(taskID), err)
}

// LeasePool takes the pool's lease for owner until now+ttl: a conditional
// put that succeeds when no lease exists, the one there has expired, or
// owner holds it. Errors: ECONFLICT naming the owner that holds it and
// until when; the AWS error, wrapped.
func (s *Store) LeasePool(ctx context.Context, owner string, ttl time.Duration) error {
	now := time.Now()
	it := key(pkPool, skPoolLease).setAll(map[string]av{attrRecord: str("pool_lease"), "owner": str(owner), "until": millis(now.Add(ttl))})
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #until < :now OR #owner = :owner"),
		ExpressionAttributeNames:            map[string]string{"#pk": PartitionKey, "#until": "until", "#owner": "owner"},
		ExpressionAttributeValues:           map[string]av{":now": millis(now), ":owner": str(owner)},
		ReturnValuesOnConditionCheckFailure: "ALL_OLD"})
	if old, ok := conditionFailed(err); ok {
		return stratus.Errorf(stratus.ECONFLICT, "the task pool is being claimed by %s (lease until %s)", old.str("owner"), old.time("until").UTC().Format(time.RFC3339))
	}
	return wrap("take the task pool's lease", err)
}

// ReleasePoolLease deletes the pool's lease when owner holds it.
func (s *Store) ReleasePoolLease(ctx context.Context, owner string) error {
	_, err := s.c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: key(pkPool, skPoolLease),
		ConditionExpression: aws.String("#owner = :owner"), ExpressionAttributeNames: map[string]string{"#owner": "owner"},
		ExpressionAttributeValues: map[string]av{":owner": str(owner)}})
	if _, ok := conditionFailed(err); ok {
		return nil
	}
	return wrap("release the task pool's lease", err)
}
