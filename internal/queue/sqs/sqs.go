// Package sqs is the AWS implementation of queue.Queue: SendMessage to the
// stack's dispatch queue (template.yaml DispatchQueue), whose messages the
// dispatch function handles (functions/dispatch, awsapp.HandleMessage).
package sqs

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/queue"
)

// API is the part of the SQS client Queue calls.
type API interface {
	SendMessage(ctx context.Context, in *awssqs.SendMessageInput, optFns ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error)
}

// Queue sends to one SQS queue.
type Queue struct {
	c   API
	url string
}

var _ queue.Queue = (*Queue)(nil)

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
