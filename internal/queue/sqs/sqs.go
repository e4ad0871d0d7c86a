// Package sqs is the AWS implementation of queue.Queue and queue.Polled:
// SendMessage to the stack's dispatch queue (template.yaml DispatchQueue),
// whose messages the dispatch function handles (functions/dispatch,
// awsapp.HandleMessage); and ReceiveMessage, DeleteMessage and
// ChangeMessageVisibility on a queue a runner pool polls
// (README.md § Warm runners (pool mode)).
package sqs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
)

// API is the part of the SQS client Queue calls.
type API interface {
	SendMessage(ctx context.Context, in *awssqs.SendMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *awssqs.DeleteMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *awssqs.ChangeMessageVisibilityInput, optFns ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error)
}

// Queue sends to, and receives from, one SQS queue.
type Queue struct {
	c   API
	url string
}

var (
	_ queue.Queue  = (*Queue)(nil)
	_ queue.Polled = (*Queue)(nil)
)

// New returns a Queue sending to the queue at url. Errors: EINVALID
// (Field "queue_url") for an empty url.
func New(c API, url string) (*Queue, error) {
	if url == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "queue_url", "empty; valid: the dispatch queue's URL (STRATUS_QUEUE_URL)")
	}
	return &Queue{c: c, url: url}, nil
}

// Send is one SendMessage of body. Errors: queue.Check's, before any
// request; the AWS error, wrapped and naming the queue.
func (q *Queue) Send(ctx context.Context, body []byte) error {
	if err := queue.Check(body); err != nil {
		return err
	}
	if _, err := q.c.SendMessage(ctx, &awssqs.SendMessageInput{QueueUrl: aws.String(q.url), MessageBody: aws.String(string(body))}); err != nil {
		return fmt.Errorf("sqs queue: send to %s: %w", q.url, err)
	}
	return nil
}

// Receive is one ReceiveMessage of at most one message (Amazon SQS API
// Reference, ReceiveMessage): WaitTimeSeconds is wait and
// VisibilityTimeout is visibility, each rounded up to whole seconds; the
// message's ApproximateReceiveCount is Message.Receives. A wait under a
// second rounds up to a 1 s long poll; a wait of 0 sends no
// WaitTimeSeconds (the SDK omits a zero), so the queue's
// ReceiveMessageWaitTimeSeconds applies: 0 by default, a short poll,
// which samples some of SQS's servers and may miss a message that is
// there (Amazon SQS Developer Guide, "Amazon SQS short and long
// polling"). ctx ending ends the request; a message SQS took for it
// meanwhile stays hidden for visibility.
//
// Errors: queue.CheckWait's and queue.CheckVisibility's, before any
// request; the AWS error, wrapped and naming the queue (ctx's error
// within it when ctx ended the request).
func (q *Queue) Receive(ctx context.Context, wait, visibility time.Duration) (queue.Message, bool, error) {
	if err := queue.CheckWait(wait); err != nil {
		return queue.Message{}, false, err
	}
	if err := queue.CheckVisibility(visibility); err != nil {
		return queue.Message{}, false, err
	}
	out, err := q.c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(q.url),
		MaxNumberOfMessages:         1,
		WaitTimeSeconds:             seconds(wait),
		VisibilityTimeout:           seconds(visibility),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		return queue.Message{}, false, q.receiveError(err)
	}
	if len(out.Messages) == 0 {
		return queue.Message{}, false, nil
	}
	m := out.Messages[0]
	count := m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 {
		// The message stays hidden for visibility, then comes back.
		return queue.Message{}, false, fmt.Errorf("sqs queue: receive from %s: ApproximateReceiveCount %q of message %s is not a count", q.url, count, aws.ToString(m.MessageId))
	}
	return queue.Message{Body: []byte(aws.ToString(m.Body)), Receipt: aws.ToString(m.ReceiptHandle), Receives: n}, true, nil
}

// Delete is one DeleteMessage of the receipt (Amazon SQS API Reference,
// DeleteMessage). SQS takes without error a stale receipt (its message
// was received again since), though the message then "might not be
// deleted", and the receipt of a message already deleted. Errors:
// ENOTFOUND (Field "receipt") for a receipt SQS does not recognise at all
// (ReceiptHandleIsInvalid: malformed, or another queue's); the AWS error
// otherwise, wrapped and naming the queue.
func (q *Queue) Delete(ctx context.Context, receipt string) error {
	_, err := q.c.DeleteMessage(ctx, &awssqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: aws.String(receipt)})
	if err != nil {
		return q.receiptError("delete from", err)
	}
	return nil
}

// Extend is one ChangeMessageVisibility of the receipt's message to
// visibility, rounded up to whole seconds, from now (Amazon SQS API
// Reference, ChangeMessageVisibility; Amazon SQS Developer Guide, "Amazon
// SQS visibility timeout": at most 12 hours in all from the receive).
// Errors: queue.CheckVisibility's, before any request; EINVALID (Field
// "receipt") when the message is not in flight under the receipt
// (MessageNotInflight, or InvalidParameterValue naming ReceiptHandle: it
// is visible again, received again, or deleted); EINVALID (Field
// "visibility") when SQS refuses the timeout (InvalidParameterValue
// naming VisibilityTimeout: past the 12 hours); ENOTFOUND (Field
// "receipt") for a receipt SQS does not recognise
// (ReceiptHandleIsInvalid); the AWS error otherwise, wrapped and naming
// the queue.
func (q *Queue) Extend(ctx context.Context, receipt string, visibility time.Duration) error {
	if err := queue.CheckVisibility(visibility); err != nil {
		return err
	}
	_, err := q.c.ChangeMessageVisibility(ctx, &awssqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(q.url),
		ReceiptHandle:     aws.String(receipt),
		VisibilityTimeout: seconds(visibility),
	})
	if err != nil {
		return q.receiptError("change the visibility of a message in", err)
	}
	return nil
}

// receiptError maps SQS's refusals of a receipt or a visibility timeout
// to stratus codes (a caller branches on them: its message is no longer
// its own), keeping SQS's words; anything else is wrapped as is.
func (q *Queue) receiptError(op string, err error) error {
	var (
		invalid     *types.ReceiptHandleIsInvalid
		notInflight *types.MessageNotInflight
		api         smithy.APIError
	)
	switch {
	case errors.As(err, &invalid):
		return stratus.FieldErrorf(stratus.ENOTFOUND, "receipt", "sqs queue %s does not recognise the receipt (ReceiptHandleIsInvalid: %s)", q.url, invalid.ErrorMessage())
	case errors.As(err, &notInflight):
		return stratus.FieldErrorf(stratus.EINVALID, "receipt", "the receipt's message is not in flight in sqs queue %s: it is visible again (MessageNotInflight: %s)", q.url, notInflight.ErrorMessage())
	case errors.As(err, &api) && api.ErrorCode() == "InvalidParameterValue":
		field := "receipt"
		if strings.Contains(api.ErrorMessage(), "parameter VisibilityTimeout") {
			field = "visibility"
		}
		return stratus.FieldErrorf(stratus.EINVALID, field, "sqs queue %s refused it (InvalidParameterValue: %s)", q.url, api.ErrorMessage())
	}
	return fmt.Errorf("sqs queue: %s %s: %w", op, q.url, err)
}

// seconds is d in whole seconds, rounded up.
func seconds(d time.Duration) int32 {
	return int32((d + time.Second - 1) / time.Second)
}

// receiveError says a ReceiveMessage failure. What no retry changes is
// coded, so a poller stops on it rather than poll forever: ENOTFOUND
// (Field "queue_url") for a queue that does not exist, EUNAUTHORIZED for
// credentials SQS refuses or that may not receive from it. Anything else
// (throttling after the SDK's retries, a network error) is wrapped,
// naming the queue.
func (q *Queue) receiveError(err error) error {
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "NonExistentQueue":
			return stratus.FieldErrorf(stratus.ENOTFOUND, "queue_url", "sqs queue %s does not exist (%s)", q.url, api.ErrorCode())
		case "AccessDenied", "AccessDeniedException", "InvalidClientTokenId", "UnrecognizedClientException", "SignatureDoesNotMatch", "ExpiredToken", "InvalidSecurity":
			return stratus.Errorf(stratus.EUNAUTHORIZED, "sqs queue %s refused the receive: %s: %s; its credentials need sqs:ReceiveMessage, sqs:DeleteMessage and sqs:ChangeMessageVisibility on it", q.url, api.ErrorCode(), api.ErrorMessage())
		}
	}
	return fmt.Errorf("sqs queue: receive from %s: %w", q.url, err)
}
