package lambdas_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

// bucketList is a bucket's listing: keys to ETags, one object a page (so
// pagination is exercised); it counts the listings.
type bucketList struct {
	mu      sync.Mutex
	objects map[string]string
	lists   int
	listed  chan struct{}
}

func (b *bucketList) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.objects {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) && k > aws.ToString(in.ContinuationToken) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := &s3.ListObjectsV2Output{}
	if len(keys) > 0 {
		out.Contents = []s3types.Object{{Key: aws.String(keys[0]), ETag: aws.String(`"` + b.objects[keys[0]] + `"`), Size: aws.Int64(7)}}
	}
	if len(keys) > 1 {
		out.IsTruncated, out.NextContinuationToken = aws.Bool(true), aws.String(keys[0])
	} else {
		b.lists++
		select {
		case b.listed <- struct{}{}:
		default:
		}
	}
	return out, nil
}

func (b *bucketList) set(key, etag string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if etag == "" {
		delete(b.objects, key)
	} else {
		b.objects[key] = etag
	}
}

// waitLists waits for n more complete listings.
func (b *bucketList) waitLists(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-b.listed:
		case <-time.After(10 * time.Second):
			t.Fatal("the source stopped listing the bucket")
		}
	}
}

// objectEvents records the key and ETag of each Object Created event it is
// invoked with, failing the keys in fail once each.
type objectEvents struct {
	mu   sync.Mutex
	got  []string
	fail map[string]bool
}

func (o *objectEvents) Invoke(_ context.Context, payload []byte) ([]byte, error) {
	var ev events.CloudWatchEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	var d struct {
		Bucket struct{ Name string } `json:"bucket"`
		Object struct {
			Key  string `json:"key"`
			ETag string `json:"etag"`
		} `json:"object"`
	}
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if ev.DetailType != lambdas.ObjectCreatedDetailType || d.Bucket.Name != "data" {
		o.got = append(o.got, "unexpected "+string(payload))
		return nil, nil
	}
	if o.fail[d.Object.Key] {
		delete(o.fail, d.Object.Key)
		return nil, errors.New("function error")
	}
	o.got = append(o.got, d.Object.Key+"@"+d.Object.ETag)
	return []byte("null"), nil
}

func (o *objectEvents) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.got)
}

func (o *objectEvents) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.got
	o.got = nil
	slices.Sort(got)
	return got
}

// The S3 rule's stand-in delivers each object under the rule's prefix
// once: a new key, a key written again (new ETag), a key deleted then
// written again; a failed invocation is delivered again; nothing outside
// the prefix, nothing twice.
func TestRunObjectCreatedSource_DeliversEachWrittenObjectOnce(t *testing.T) {
	b := &bucketList{objects: map[string]string{"stratus/tasks/pending/a.md": "e1", "stratus/tasks/pending/b.md": "e1", "stratus/tasks/done/c.md": "e1"}, listed: make(chan struct{}, 1)}
	fn := &objectEvents{fail: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	var errs []error
	var errMu sync.Mutex
	go func() {
		done <- lambdas.RunObjectCreatedSource(ctx, b, "data", "us-east-1", lambdas.ObjectCreatedRule{Event: "TaskFileWritten", Bucket: "DataBucket", KeyPrefix: "stratus/tasks/pending/"},
			fn, time.Millisecond, func(err error) { errMu.Lock(); errs = append(errs, err); errMu.Unlock() })
	}()
	step := func(what string, want ...string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); fn.count() < len(want) && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		b.waitLists(t, 3) // listings after the change that must deliver nothing more
		if got := fn.take(); !slices.Equal(got, want) {
			t.Errorf("%s: delivered %v; want %v", what, got, want)
		}
	}
	step("at the start", "stratus/tasks/pending/a.md@e1", "stratus/tasks/pending/b.md@e1")

	fn.mu.Lock()
	fn.fail["stratus/tasks/pending/d.md"] = true
	fn.mu.Unlock()
	b.set("stratus/tasks/pending/d.md", "e1")
	step("a new key whose first invocation fails", "stratus/tasks/pending/d.md@e1")

	b.set("stratus/tasks/pending/a.md", "e2")
	step("a key written again", "stratus/tasks/pending/a.md@e2")

	b.set("stratus/tasks/pending/b.md", "")
	step("a key deleted")
	b.set("stratus/tasks/pending/b.md", "e1")
	step("the key written again with the same content", "stratus/tasks/pending/b.md@e1")

	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunObjectCreatedSource returned %v; want context.Canceled", err)
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "d.md") {
		t.Errorf("errors %v; want the one failed invocation of d.md", errs)
	}
}

// The schedule's stand-in invokes the function with the rule's Scheduled
// Event each period.
func TestRunSchedule_InvokesWithScheduledEvents(t *testing.T) {
	got := make(chan events.CloudWatchEvent, 1)
	fn := invokerFunc(func(_ context.Context, p []byte) ([]byte, error) {
		var ev events.CloudWatchEvent
		if err := json.Unmarshal(p, &ev); err != nil {
			return nil, err
		}
		select {
		case got <- ev:
		default:
		}
		return nil, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	arn := "arn:aws:events:us-east-1:123456789012:rule/backstop"
	go lambdas.RunSchedule(ctx, fn, arn, "us-east-1", time.Millisecond, nil)
	for range 2 {
		select {
		case ev := <-got:
			if ev.DetailType != "Scheduled Event" || !slices.Equal(ev.Resources, []string{arn}) {
				t.Errorf("event %+v", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no scheduled event")
		}
	}
}
