package lambdas

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// SQSAPI is the part of the SQS client an event source mapping uses.
type SQSAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// SQSOptions tunes RunSQSSource.
type SQSOptions struct {
	Pollers int           // batches in flight at once (Lambda's scaling; the template's MaximumConcurrency); 0 = 1
	Wait    time.Duration // long-poll wait of each receive; 0 = 1 s (so a cancelled ctx is seen soon)
	OnError func(error)   // each failed poll, invocation or delete; nil = ignored (the source keeps polling)
}

// RunSQSSource is the event source mapping of m on the queue at queueURL:
// it receives up to m.BatchSize messages (at most 10 a receive), invokes
// fn with them as an SQS event (Records with messageId, receiptHandle,
// body, attributes, messageAttributes, md5OfBody, eventSource "aws:sqs",
// eventSourceARN, awsRegion), and deletes what the function handled: the
// whole batch when it returns without error; with
// m.ReportBatchItemFailures, all but the batchItemFailures it names (an
// item it names that is not in the batch fails the whole batch, as on
// Lambda). A function error or timeout deletes nothing: the messages come
// back after their visibility timeout. It runs until ctx ends and returns
// ctx's error, or an error reading the queue's ARN at the start.
func RunSQSSource(ctx context.Context, client SQSAPI, queueURL string, fn Invoker, m SQSMapping, o SQSOptions) error {
	if o.Pollers <= 0 {
		o.Pollers = 1
	}
	if o.Wait <= 0 {
		o.Wait = time.Second
	}
	if m.BatchSize <= 0 {
		m.BatchSize = 10
	}
	report := func(err error) {
		if o.OnError != nil && ctx.Err() == nil {
			o.OnError(err)
		}
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("lambdas: the ARN of queue %s: %w", queueURL, err)
	}
	arn := attrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	region := ""
	if p := strings.Split(arn, ":"); len(p) > 3 {
		region = p[3]
	}
	var wg sync.WaitGroup
	for range o.Pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := pollOnce(ctx, client, queueURL, arn, region, fn, m, o.Wait); err != nil {
					report(err)
					select {
					case <-ctx.Done():
					case <-time.After(200 * time.Millisecond):
					}
				}
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

func pollOnce(ctx context.Context, client SQSAPI, queueURL, arn, region string, fn Invoker, m SQSMapping, wait time.Duration) error {
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(queueURL),
		MaxNumberOfMessages:         int32(min(m.BatchSize, 10)),
		WaitTimeSeconds:             int32(max(wait/time.Second, 1)),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return fmt.Errorf("lambdas: receive from %s: %w", queueURL, err)
	}
	if len(out.Messages) == 0 {
		return nil
	}
	ev := SQSEvent(out.Messages, arn, region)
	payload, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	// The invocation runs to its end even when ctx ends meanwhile, as a
	// Lambda invocation does; only waiting for an instance is cut short.
	resp, err := fn.Invoke(ctx, payload)
	if err != nil {
		return fmt.Errorf("lambdas: %d messages of %s stay on the queue: %w", len(out.Messages), queueURL, err)
	}
	failed := map[string]bool{}
	if m.ReportBatchItemFailures {
		var r events.SQSEventResponse
		if len(resp) > 0 && string(resp) != "null" {
			if err := json.Unmarshal(resp, &r); err != nil {
				return fmt.Errorf("lambdas: the batch response of %s does not decode (%v): the batch stays on the queue", queueURL, err)
			}
		}
		inBatch := map[string]bool{}
		for _, msg := range out.Messages {
			inBatch[aws.ToString(msg.MessageId)] = true
		}
		for _, f := range r.BatchItemFailures {
			if !inBatch[f.ItemIdentifier] {
				return fmt.Errorf("lambdas: the batch response names item %q, not in the batch: the batch stays on the queue", f.ItemIdentifier)
			}
			failed[f.ItemIdentifier] = true
		}
	}
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, msg := range out.Messages {
		if !failed[aws.ToString(msg.MessageId)] {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: msg.ReceiptHandle})
		}
	}
	if len(del) == 0 {
		return nil
	}
	dout, err := client.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: del})
	if err != nil {
		return fmt.Errorf("lambdas: delete from %s: %w", queueURL, err)
	}
	if len(dout.Failed) > 0 {
		return fmt.Errorf("lambdas: delete from %s: %d of %d failed (%s)", queueURL, len(dout.Failed), len(del), aws.ToString(dout.Failed[0].Message))
	}
	return nil
}

// SQSEvent is the event Lambda hands a function for messages received
// from the queue arn in region.
func SQSEvent(msgs []sqstypes.Message, arn, region string) events.SQSEvent {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, msg := range msgs {
		rec := events.SQSMessage{
			MessageId:              aws.ToString(msg.MessageId),
			ReceiptHandle:          aws.ToString(msg.ReceiptHandle),
			Body:                   aws.ToString(msg.Body),
			Md5OfBody:              aws.ToString(msg.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(msg.MD5OfMessageAttributes),
			Attributes:             msg.Attributes,
			MessageAttributes:      map[string]events.SQSMessageAttribute{},
			EventSource:            "aws:sqs",
			EventSourceARN:         arn,
			AWSRegion:              region,
		}
		if rec.Attributes == nil {
			rec.Attributes = map[string]string{}
		}
		for k, a := range msg.MessageAttributes {
			rec.MessageAttributes[k] = events.SQSMessageAttribute{
				DataType:         aws.ToString(a.DataType),
				StringValue:      a.StringValue,
				BinaryValue:      a.BinaryValue,
				StringListValues: a.StringListValues,
				BinaryListValues: a.BinaryListValues,
			}
		}
		ev.Records = append(ev.Records, rec)
	}
	return ev
}
