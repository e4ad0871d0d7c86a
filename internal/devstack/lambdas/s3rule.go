package lambdas

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3ListAPI is the part of the S3 client RunObjectCreatedSource uses.
type S3ListAPI interface {
	ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input, optFns ...func(*s3.Options)) (*s3.ListObjectsV2Output, error)
}

// RunObjectCreatedSource stands in for rule r of a function on the bucket
// named bucket (S3 → EventBridge → the function), where the stand-in's S3
// sends no events: every poll it lists the bucket under r.KeyPrefix and
// invokes fn with the ObjectCreated event of each object not delivered
// before — a key new, or written again (its ETag changed). A failed
// invocation is tried again next poll (EventBridge retries a failed
// asynchronous invocation too); a key gone from the listing is forgotten,
// so one written again after is delivered again. The objects already
// there at the start are delivered on the first poll. It runs until ctx
// ends and returns ctx's error; onError (nil = ignored) hears each failed
// listing or invocation.
func RunObjectCreatedSource(ctx context.Context, client S3ListAPI, bucket, region string, r ObjectCreatedRule, fn Invoker, poll time.Duration, onError func(error)) error {
	if poll <= 0 {
		poll = time.Second
	}
	report := func(err error) {
		if onError != nil && ctx.Err() == nil {
			onError(err)
		}
	}
	delivered := map[string]string{} // key → the ETag delivered
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
		present := map[string]bool{}
		complete := true
		p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(r.KeyPrefix)})
		for p.HasMorePages() && ctx.Err() == nil {
			page, err := p.NextPage(ctx)
			if err != nil {
				report(fmt.Errorf("lambdas: list %s/%s: %w", bucket, r.KeyPrefix, err))
				complete = false
				break
			}
			for _, o := range page.Contents {
				key, etag := aws.ToString(o.Key), strings.Trim(aws.ToString(o.ETag), `"`)
				present[key] = true
				if d, ok := delivered[key]; ok && d == etag {
					continue
				}
				ev, err := ObjectCreated(bucket, key, etag, aws.ToInt64(o.Size), region)
				if err == nil {
					_, err = fn.Invoke(ctx, ev)
				}
				if err != nil {
					report(fmt.Errorf("lambdas: the Object Created event of %s/%s (%s; tried again): %w", bucket, key, r.Event, err))
					continue
				}
				delivered[key] = etag
			}
		}
		if complete {
			for k := range delivered {
				if !present[k] {
					delete(delivered, k)
				}
			}
		}
	}
}

// RunSchedule stands in for a function's Schedule event: every period it
// invokes fn with the ScheduledEvent of the rule ruleARN, until ctx ends
// (it returns ctx's error). onError (nil = ignored) hears each failed
// invocation; the next tick comes anyway, as EventBridge's does.
func RunSchedule(ctx context.Context, fn Invoker, ruleARN, region string, period time.Duration, onError func(error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(period):
		}
		ev, err := ScheduledEvent(ruleARN, region)
		if err == nil {
			_, err = fn.Invoke(ctx, ev)
		}
		if err != nil && onError != nil && ctx.Err() == nil {
			onError(fmt.Errorf("lambdas: the scheduled event of %s: %w", ruleARN, err))
		}
	}
}
