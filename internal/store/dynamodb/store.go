package dynamodb

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	smithytime "github.com/aws/smithy-go/time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/store"
)

var _ store.Store = (*Store)(nil)

// Client is what the store needs of a DynamoDB client (*dynamodb.Client).
type Client interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Blobs is where bodies too large for an item go: S3 on AWS. Keys are
// relative slash-separated paths (BlobKey); a Put of an existing key
// stores the same bytes again. Get fails with ENOTFOUND for a missing key.
// internal/sink.Sink has this shape, so an S3 sink under a prefix serves.
type Blobs interface {
	Put(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
}

// DefaultSpillBytes is the output body size above which a body is stored in
// Blobs by pointer rather than in its tail item (docs/architecture.md § Limits:
// an item holds at most 400 KB). The threshold is a price choice, well below
// the size limit: at on-demand list prices (us-east-1) a write unit buys 1 KB
// and a strongly consistent read unit 4 KB, and one S3 PUT costs about as much
// as 8 write units and one GET about as much as 13 KB of reads, so a body read
// back a few times is cheaper in S3 from about 8-16 KiB up. 16 KiB is also the
// SQLite store's threshold. ListOutput fetches a tail's spilled bodies
// concurrently.
const DefaultSpillBytes = 16 << 10

// DefaultPromptSpillBytes is the same threshold for an attempt's system
// prompt and prompt. It is higher because every worker request reads the
// latest attempt (to authorize and fence it): prompts of a usual size stay
// in the item and that read needs no S3 round trip, and two prompts at
// the threshold still leave the item far below the budget.
const DefaultPromptSpillBytes = 96 << 10

// MaxItemBytes is the store's budget for one item: 350 KB, below
// DynamoDB's 400 KB so that attribute names and numbers never tip an item
// over. A write of a larger item (a reason or a step value that large)
// fails with ETOOLARGE before it reaches DynamoDB; bodies and prompts
// spill instead.
const MaxItemBytes = 350 << 10

// maxSpillBytes bounds the spill options: two attempt prompts at it still
// fit in MaxItemBytes.
const maxSpillBytes = 160 << 10

// Options configure a Store.
type Options struct {
	// Table is the table name (TableName(prefix)). Required.
	Table string
	// Blobs holds spilled bodies and prompts. Required.
	Blobs Blobs
	// SpillBytes overrides DefaultSpillBytes (0 = default; at most 160 KiB).
	SpillBytes int
	// PromptSpillBytes overrides DefaultPromptSpillBytes (0 = default; at
	// most 160 KiB).
	PromptSpillBytes int
}

// Store is a store.Store on one DynamoDB table and a Blobs for large
// bodies. It is safe for concurrent use, by any number of processes.
type Store struct {
	c           Client
	table       string
	blobs       Blobs
	spillBytes  int
	promptBytes int
}

// New returns a store on client. It does not check that the table exists
// (CreateTables makes it for tests; on AWS the template does).
func New(client Client, o Options) (*Store, error) {
	switch {
	case client == nil:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "client", "DynamoDB store needs a client; got nil")
	case o.Table == "":
		return nil, stratus.FieldErrorf(stratus.EINVALID, "table", "DynamoDB store needs a table name; got \"\" (want TableName(prefix))")
	case o.Blobs == nil:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "blobs", "DynamoDB store needs a blob store for bodies over %d bytes; got nil", DefaultSpillBytes)
	case o.SpillBytes < 0 || o.SpillBytes > maxSpillBytes:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "spill_bytes", "spill threshold %d is out of range; want 0 (default %d) to %d", o.SpillBytes, DefaultSpillBytes, maxSpillBytes)
	case o.PromptSpillBytes < 0 || o.PromptSpillBytes > maxSpillBytes:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "prompt_spill_bytes", "prompt spill threshold %d is out of range; want 0 (default %d) to %d", o.PromptSpillBytes, DefaultPromptSpillBytes, maxSpillBytes)
	}
	s := &Store{c: client, table: o.Table, blobs: o.Blobs, spillBytes: o.SpillBytes, promptBytes: o.PromptSpillBytes}
	if s.spillBytes == 0 {
		s.spillBytes = DefaultSpillBytes
	}
	if s.promptBytes == 0 {
		s.promptBytes = DefaultPromptSpillBytes
	}
	return s, nil
}

// Close releases nothing: the client belongs to the caller. It exists for
// store.Store.
func (s *Store) Close() error { return nil }

// ErrThrottled is wrapped by every error of a request DynamoDB kept
// throttling after the SDK's retries: an infrastructure failure worth
// retrying later (a queue redelivery), never the caller's fault.
var ErrThrottled = errors.New("DynamoDB is throttling")

// wrap maps an AWS error of the operation what to a Go error naming the
// AWS error: throttling wraps ErrThrottled; the rest are internal.
// ConditionalCheckFailed is mapped by each caller, which knows whether it
// means ECONFLICT or ENOTFOUND.
func wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	code := awsCode(err)
	if _, ok := retry.DefaultThrottleErrorCodes[code]; ok {
		return fmt.Errorf("%s: DynamoDB %s after the SDK's retries: %w: %w", what, code, ErrThrottled, err)
	}
	if code != "" {
		return fmt.Errorf("%s: DynamoDB %s: %w", what, code, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// awsCode is the AWS error code of err ("" for none).
func awsCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// conditionFailed returns the item DynamoDB returned with a
// ConditionalCheckFailedException (ReturnValuesOnConditionCheckFailure
// ALL_OLD: nil when there was none), and whether err is one.
func conditionFailed(err error) (item, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// canceled returns the cancellation reason codes of a canceled
// transaction, one per item ("None" for an item that passed), and the old
// items of those that failed their condition; ok is false for any other
// error.
func canceled(err error) (codes []string, olds []item, ok bool) {
	var tc *types.TransactionCanceledException
	if !errors.As(err, &tc) {
		return nil, nil, false
	}
	for _, r := range tc.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
		olds = append(olds, r.Item)
	}
	return codes, olds, true
}

const (
	codeConditionFailed     = "ConditionalCheckFailed"
	codeTransactionConflict = "TransactionConflict"
)

// reason returns the code of transaction item i ("" when absent).
func reason(codes []string, i int) string {
	if i < len(codes) {
		return codes[i]
	}
	return ""
}

// newWID returns a write id: a random token stored with every item the
// store creates, so that a conditional create which fails because the item
// exists can tell its own earlier write (an SDK retry of a request whose
// response was lost) from somebody else's.
func newWID() string { return strings.ToLower(rand.Text()[:20]) }

// mine reports whether old (an item returned with a failed condition) was
// written by the write wid.
func mine(old item, wid string) bool {
	return old != nil && wid != "" && old.str(attrWID) == wid
}

// maxContention bounds how often a write that lost a race for a sequence
// number (or hit a conflicting transaction) tries again.
const maxContention = 50

// contend runs op until it neither fails nor reports lost (another writer
// took the slot it tried; a conflicting transaction), waiting a jittered,
// exponentially growing delay between tries.
func contend(ctx context.Context, what string, op func() (lost bool, err error)) error {
	for try := 0; ; try++ {
		lost, err := op()
		if err != nil || !lost {
			return err
		}
		if try+1 >= maxContention {
			return fmt.Errorf("%s: still contended after %d tries; giving up", what, maxContention)
		}
		if err := smithytime.SleepWithContext(ctx, backoff(try)); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
}

// backoff is "full jitter": uniform in [0, min(100 ms, 2 ms * 2^try)).
func backoff(try int) time.Duration {
	ceiling := min(100*time.Millisecond, 2*time.Millisecond<<min(try, 10))
	return time.Duration(mrand.Int64N(int64(ceiling)))
}

// key is the primary key of an item.
func key(pk, sk string) item {
	return item{PartitionKey: str(pk), SortKey: str(sk)}
}

// putInput is a conditional create of it: it succeeds only when no item
// has its key, and returns the existing one when it fails.
func (s *Store) createInput(it item) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                it,
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames:            map[string]string{"#pk": PartitionKey},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// create writes it unless its key exists. exists is true when the key
// was taken by another write; a write the SDK retried after it had
// succeeded (the item carries this write's wid) is a success.
func (s *Store) create(ctx context.Context, it item) (exists bool, err error) {
	if err := checkSize(it, it); err != nil {
		return false, err
	}
	_, err = s.c.PutItem(ctx, s.createInput(it))
	if old, ok := conditionFailed(err); ok {
		return !mine(old, it.str(attrWID)), nil
	}
	return false, err
}

// createTx is a transaction item creating it.
func (s *Store) createTx(it item) types.TransactWriteItem {
	in := s.createInput(it)
	return types.TransactWriteItem{Put: &types.Put{
		TableName: in.TableName, Item: in.Item, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// update replaces the attributes of set on the item at k (a nil value
// removes the attribute) if the item exists.
type update struct {
	k   item
	set map[string]av
}

// expr renders the update: "SET #a0 = :a0, ... REMOVE #a1, ..." with the
// condition that the item exists, in a stable order.
func (u update) expr() (expr, cond string, names map[string]string, values map[string]av) {
	names = map[string]string{"#pk": PartitionKey}
	values = map[string]av{}
	attrs := make([]string, 0, len(u.set))
	for a := range u.set {
		attrs = append(attrs, a)
	}
	sort.Strings(attrs)
	var sets, removes []string
	for i, a := range attrs {
		n := fmt.Sprintf("#a%d", i)
		names[n] = a
		if v := u.set[a]; v != nil {
			values[fmt.Sprintf(":a%d", i)] = v
			sets = append(sets, fmt.Sprintf("%s = :a%d", n, i))
		} else {
			removes = append(removes, n)
		}
	}
	if len(sets) > 0 {
		expr = "SET " + strings.Join(sets, ", ")
	}
	if len(removes) > 0 {
		expr = strings.TrimSpace(expr + " REMOVE " + strings.Join(removes, ", "))
	}
	if len(values) == 0 {
		values = nil
	}
	return expr, "attribute_exists(#pk)", names, values
}

// apply runs the update; missing is true when there is no item at u.k.
func (s *Store) apply(ctx context.Context, u update) (missing bool, err error) {
	if err := checkSize(u.k, u.set); err != nil {
		return false, err
	}
	expr, cond, names, values := u.expr()
	_, err = s.c.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: u.k, UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	})
	if _, ok := conditionFailed(err); ok {
		return true, nil
	}
	return false, err
}

func (s *Store) updateTx(u update) types.TransactWriteItem {
	expr, cond, names, values := u.expr()
	return types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: u.k, UpdateExpression: aws.String(expr), ConditionExpression: aws.String(cond),
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
	}}
}

// get reads one item with a strongly consistent read; nil when absent.
func (s *Store) get(ctx context.Context, k item) (item, error) {
	out, err := s.c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	return out.Item, nil
}

// query returns the items of partition pk whose sort key starts with
// prefix, in sort-key order (reverse: descending), strongly consistent, at
// most limit of them (0: all).
func (s *Store) query(ctx context.Context, pk, prefix string, reverse bool, limit int) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: map[string]av{":pk": str(pk), ":prefix": str(prefix)},
		ConsistentRead:            aws.Bool(true),
		ScanIndexForward:          aws.Bool(!reverse),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(limit))
	}
	return s.queryAll(ctx, in, limit)
}

// queryAll runs in page after page until the last, or until limit (> 0)
// items were read.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput, limit int) ([]item, error) {
	var items []item
	for {
		out, err := s.c.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range out.Items {
			items = append(items, it)
		}
		if len(out.LastEvaluatedKey) == 0 || (limit > 0 && len(items) >= limit) {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// lastSeq returns the highest sequence number among the items of pk whose
// sort key is prefix + a zero-padded number; 0 when there are none.
func (s *Store) lastSeq(ctx context.Context, pk, prefix string) (int, error) {
	items, err := s.query(ctx, pk, prefix, true, 1)
	if err != nil || len(items) == 0 {
		return 0, err
	}
	sk := items[0].str(SortKey)
	n, err := strconv.Atoi(strings.TrimPrefix(sk, prefix))
	if err != nil {
		return 0, fmt.Errorf("item %s/%s: sort key is not %s<number>", pk, sk, prefix)
	}
	return n, nil
}

func (s *Store) transact(ctx context.Context, items ...types.TransactWriteItem) error {
	for _, ti := range items {
		var err error
		if ti.Put != nil {
			err = checkSize(ti.Put.Item, ti.Put.Item)
		} else if ti.Update != nil {
			err = checkSize(ti.Update.Key, ti.Update.ExpressionAttributeValues)
		}
		if err != nil {
			return err
		}
	}
	_, err := s.c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return err
}

// checkSize refuses an item (or the values an update writes into the item
// at k) larger than MaxItemBytes, counting as DynamoDB does: each
// attribute's name and value, a number by its digits (an upper bound).
func checkSize(k item, m map[string]av) error {
	n := 0
	for name, v := range m {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		default:
			n++
		}
	}
	if n > MaxItemBytes {
		return stratus.Errorf(stratus.ETOOLARGE, "item %s / %s would be %d bytes; the DynamoDB store keeps items under %d (DynamoDB holds at most 400 KB)",
			k.str(PartitionKey), k.str(SortKey), n, MaxItemBytes)
	}
	return nil
}
