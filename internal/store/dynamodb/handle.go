package dynamodb

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
)

func handleKey(h string) item { return key(pkHandle+h, skHandle) }

// TTLShards is how many partitions of the HandlesByTTL index handles are
// spread over (one constant partition key made every handle write hit one hot
// partition of the index).
const TTLShards = 16

// legacyTTLBucket is the one partition handles used before the index was
// sharded; Sweep still reads it.
const legacyTTLBucket = "handle"

// ttlBucket is handle's partition of the HandlesByTTL index:
// "handle#00" … "handle#15" by an FNV-1a hash of the handle.
func ttlBucket(handle string) string {
	h := fnv.New32a()
	h.Write([]byte(handle))
	return fmt.Sprintf("handle#%02d", h.Sum32()%TTLShards)
}

// ttlBuckets are the partitions Sweep reads.
func ttlBuckets() []string {
	out := []string{legacyTTLBucket}
	for i := range TTLShards {
		out = append(out, fmt.Sprintf("handle#%02d", i))
	}
	return out
}

// ttlSeconds is the TTL attribute of a handle expiring at t: epoch seconds
// rounded up, so DynamoDB never deletes a handle before it expires.
func ttlSeconds(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

// PutHandle stores h; ECONFLICT if h.Handle exists. A handle with an
// expiry carries the TTL attribute (DESIGN.md § Limits: handles expire
// through DynamoDB TTL) and an entry in the HandlesByTTL index, which
// Sweep reads.
func (s *Store) PutHandle(ctx context.Context, h stratus.Handle) error {
	it := handleKey(h.Handle).setAll(map[string]av{
		attrRecord: str("handle"), attrWID: str(newWID()),
		"handle": str(h.Handle), "run_id": text(h.RunID), "tid": text(h.TID), "attempt": num(int64(h.Attempt)), "expires_at": millis(h.ExpiresAt),
	})
	if !h.ExpiresAt.IsZero() {
		it[TTLAttribute], it[TTLBucketAttribute] = num(ttlSeconds(h.ExpiresAt)), str(ttlBucket(h.Handle))
	}
	exists, err := s.create(ctx, it)
	if err != nil {
		return wrap("put handle "+quote(h.Handle), err)
	} else if exists {
		return stratus.Errorf(stratus.ECONFLICT, "handle %q already exists (DynamoDB ConditionalCheckFailedException)", h.Handle)
	}
	return nil
}

// GetHandle returns the handle; ENOTFOUND if it is absent. An expired
// handle is returned like any other while its item exists, whatever its
// TTL says: expiry is the caller's check. (DynamoDB deletes expired items
// only eventually, and moto never does; Sweep deletes them for sure.)
func (s *Store) GetHandle(ctx context.Context, handle string) (stratus.Handle, error) {
	it, err := s.get(ctx, handleKey(handle))
	if err != nil {
		return stratus.Handle{}, wrap("get handle "+quote(handle), err)
	} else if it == nil || it[attrTaken] != nil {
		return stratus.Handle{}, stratus.Errorf(stratus.ENOTFOUND, "handle %q not found", handle)
	}
	return handleOf(it), nil
}

// handleOf is the Handle an item holds; an item stored before handles
// named their run has no run_id ("").
func handleOf(it item) stratus.Handle {
	return stratus.Handle{Handle: it.str("handle"), RunID: it.str("run_id"), TID: it.str("tid"), Attempt: int(it.int("attempt")), ExpiresAt: it.time("expires_at")}
}

// attrTaken marks a handle TakeHandle took (Sweep deletes it once it
// expires): marking is one conditional UpdateItem, which the functions'
// policy already allows, where a delete would need DeleteItem.
const attrTaken = "taken"

// TakeHandle marks the handle taken and returns it, once: a conditional
// update on its not being taken; ENOTFOUND when it is absent or taken.
func (s *Store) TakeHandle(ctx context.Context, handle string) (stratus.Handle, error) {
	out, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       handleKey(handle),
		UpdateExpression:          aws.String("SET #t = :t"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#t)"),
		ExpressionAttributeNames:  map[string]string{"#t": attrTaken, "#pk": PartitionKey},
		ExpressionAttributeValues: map[string]av{":t": num(1)},
		ReturnValues:              types.ReturnValueAllOld,
	})
	if awsCode(err) == "ConditionalCheckFailedException" {
		return stratus.Handle{}, stratus.Errorf(stratus.ENOTFOUND, "handle %q not found (or already taken)", handle)
	} else if err != nil {
		return stratus.Handle{}, wrap("take handle "+quote(handle), err)
	}
	it := item(out.Attributes)
	return handleOf(it), nil
}

// RenewHandle sets the handle's expiry and its TTL attribute (one
// conditional UpdateItem: the handle exists and is not taken); ENOTFOUND
// otherwise. Its partition of the HandlesByTTL index stays.
func (s *Store) RenewHandle(ctx context.Context, handle string, expiresAt time.Time) error {
	_, err := s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       handleKey(handle),
		UpdateExpression:          aws.String("SET #e = :e, #ttl = :ttl, #b = :b"),
		ConditionExpression:       aws.String("attribute_exists(#pk) AND attribute_not_exists(#t)"),
		ExpressionAttributeNames:  map[string]string{"#e": "expires_at", "#ttl": TTLAttribute, "#b": TTLBucketAttribute, "#t": attrTaken, "#pk": PartitionKey},
		ExpressionAttributeValues: map[string]av{":e": millis(expiresAt), ":ttl": num(ttlSeconds(expiresAt)), ":b": str(ttlBucket(handle))},
	})
	if awsCode(err) == "ConditionalCheckFailedException" {
		return stratus.Errorf(stratus.ENOTFOUND, "handle %q not found (or already taken)", handle)
	} else if err != nil {
		return wrap("renew handle "+quote(handle), err)
	}
	return nil
}

// Sweep deletes the handles that expired before now (every handle whose
// TTL, its expiry rounded up to the second, is before now's second) and
// returns how many it deleted. It does not rely on DynamoDB's TTL
// deletion, which is eventual (and which moto never does); run it from a
// scheduled cleanup. A handle without an expiry is never swept.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	deleted := 0
	for _, b := range ttlBuckets() {
		n, err := s.sweep(ctx, b, now)
		deleted += n
		if err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// sweep deletes the expired handles of one partition of the index.
func (s *Store) sweep(ctx context.Context, bucket string, now time.Time) (int, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(HandlesByTTL),
		KeyConditionExpression:    aws.String("#b = :b AND #ttl < :now"),
		ExpressionAttributeNames:  map[string]string{"#b": TTLBucketAttribute, "#ttl": TTLAttribute},
		ExpressionAttributeValues: map[string]av{":b": str(bucket), ":now": num(now.Unix())},
	}
	deleted := 0
	for {
		out, err := s.c.Query(ctx, in)
		if err != nil {
			return deleted, wrap("sweep expired handles", err)
		}
		keys := make([]item, len(out.Items))
		for i, it := range out.Items {
			keys[i] = key(item(it).str(PartitionKey), item(it).str(SortKey))
		}
		if err := s.batchDelete(ctx, keys); err != nil {
			return deleted, wrap("sweep expired handles", err)
		}
		deleted += len(keys)
		if len(out.LastEvaluatedKey) == 0 {
			return deleted, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// batchDelete deletes items by key, 25 per request, asking again for
// those the service leaves unprocessed.
func (s *Store) batchDelete(ctx context.Context, keys []item) error {
	for len(keys) > 0 {
		n := min(len(keys), 25)
		var pending []types.WriteRequest
		for _, k := range keys[:n] {
			pending = append(pending, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
		}
		keys = keys[n:]
		err := contend(ctx, fmt.Sprintf("delete %d items", len(pending)), func() (bool, error) {
			out, err := s.c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: pending}})
			if err != nil {
				return false, err
			}
			pending = out.UnprocessedItems[s.table]
			return len(pending) > 0, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}
