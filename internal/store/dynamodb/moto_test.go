package dynamodb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
)

// serialTransport serializes one table's DynamoDB requests to moto. moto
// 5.2.1 serves requests on concurrent threads without a lock: a
// conditional write checks and then writes, and a transaction deep-copies
// the table and restores the copy when it is canceled, so a concurrent
// request can pass a condition it should fail or be rolled back by
// somebody else's transaction. DynamoDB makes each request atomic, and
// the store relies on nothing more; one request at a time gives moto that
// property. Concurrency tests still interleave at request granularity.
// Every fixture has a table and a client of its own, so one lock per
// fixture is enough (moto's races stay within a table).
type serialTransport struct {
	mu   *sync.Mutex
	next http.RoundTripper
}

func (t serialTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	// moto has applied the request once it answers; read the whole answer
	// before the next request goes out anyway.
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp, nil
}

// fixture is one test's view of moto: a DynamoDB client whose responses
// a test can lose on purpose, an S3 bucket for spilled bodies and a table
// of its own.
type fixture struct {
	ctx    context.Context
	ddb    *dynamodb.Client
	s3     *s3.Client
	bucket string
	table  string
	faults *faults
	blobs  *s3Blobs
}

var fixtures atomic.Int64

func newFixture(t *testing.T) *fixture {
	t.Helper()
	cfg := awstest.Moto(t).Config()
	n := fixtures.Add(1)
	f := &fixture{ctx: t.Context(), faults: &faults{}, bucket: fmt.Sprintf("stratus-store-%d", n)}
	ddbCfg := cfg.Copy()
	ddbCfg.HTTPClient = &http.Client{Transport: serialTransport{&sync.Mutex{}, http.DefaultTransport}}
	f.ddb = dynamodb.NewFromConfig(ddbCfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, f.faults.register) })
	f.s3 = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	if _, err := f.s3.CreateBucket(f.ctx, &s3.CreateBucketInput{Bucket: aws.String(f.bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", f.bucket, err)
	}
	prefix := fmt.Sprintf("t%d-", n)
	if err := CreateTables(f.ctx, f.ddb, prefix); err != nil {
		t.Fatalf("CreateTables(%q): %v", prefix, err)
	}
	f.table = TableName(prefix)
	f.blobs = &s3Blobs{c: f.s3, bucket: f.bucket}
	return f
}

func (f *fixture) store(t *testing.T, o Options) *Store {
	t.Helper()
	o.Table, o.Blobs = f.table, f.blobs
	s, err := New(f.ddb, o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// s3Blobs is Blobs on an S3 bucket (the S3 sink plays this part when
// deployed; the store must not depend on it).
type s3Blobs struct {
	c      *s3.Client
	bucket string
	puts   atomic.Int64
}

func (b *s3Blobs) Put(ctx context.Context, key string, body []byte) error {
	b.puts.Add(1)
	_, err := b.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	return err
}

func (b *s3Blobs) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.bucket), Key: aws.String(key)})
	var nsk *s3types.NoSuchKey
	if errors.As(err, &nsk) {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "no object %s", key)
	} else if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// faults injects failures into DynamoDB calls, per operation name, once
// per armed fault. It sits after the SDK's retry middleware, so a fault
// the SDK deems retryable is retried like a network failure would be.
type faults struct {
	mu    sync.Mutex
	armed map[string][]fault
	fired atomic.Int64
}

type fault struct {
	after bool  // send the request, then fail (the response was lost)
	err   error // what the attempt fails with
}

// lost is a response that never arrived: the SDK retries it.
type lost struct{}

func (lost) Error() string        { return "the response was lost (injected by the test)" }
func (lost) RetryableError() bool { return true }

func (f *faults) arm(op string, ft fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.armed == nil {
		f.armed = map[string][]fault{}
	}
	f.armed[op] = append(f.armed[op], ft)
}

func (f *faults) take(op string) (fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.armed[op]
	if len(q) == 0 {
		return fault{}, false
	}
	f.armed[op] = q[1:]
	return q[0], true
}

func (f *faults) register(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("InjectFault",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			ft, ok := f.take(middleware.GetOperationName(ctx))
			if !ok {
				return next.HandleFinalize(ctx, in)
			}
			f.fired.Add(1)
			if !ft.after {
				return middleware.FinalizeOutput{}, middleware.Metadata{}, ft.err
			}
			out, md, err := next.HandleFinalize(ctx, in)
			if err != nil {
				return out, md, err
			}
			return middleware.FinalizeOutput{}, md, ft.err
		}), "Retry", middleware.After)
}

// raw reads an item as stored.
func (f *fixture) raw(t *testing.T, pk, sk string) item {
	t.Helper()
	out, err := f.ddb.GetItem(f.ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("GetItem(%s, %s): %v", pk, sk, err)
	}
	return out.Item
}

func mustContain(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s %q does not contain %q", what, s, sub)
		}
	}
}
