package lambdas_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

// oneBatch is an SQS queue holding one batch: it hands it out once and
// records what is deleted.
type oneBatch struct {
	mu      sync.Mutex
	batch   []sqstypes.Message
	given   bool
	deleted []string
	polled  chan struct{}
}

func (q *oneBatch) ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.given {
		select {
		case q.polled <- struct{}{}:
		default:
		}
		return &sqs.ReceiveMessageOutput{}, nil
	}
	q.given = true
	return &sqs.ReceiveMessageOutput{Messages: q.batch}, nil
}

func (q *oneBatch) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range in.Entries {
		q.deleted = append(q.deleted, aws.ToString(e.ReceiptHandle))
	}
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func (q *oneBatch) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"QueueArn": "arn:aws:sqs:us-east-1:123456789012:q"}}, nil
}

// runOneBatch runs the source over a batch of messages m1..m3 until it
// polls again, and returns the receipt handles it deleted.
func runOneBatch(t *testing.T, fn lambdas.Invoker, m lambdas.SQSMapping) []string {
	t.Helper()
	q := &oneBatch{polled: make(chan struct{}, 1)}
	for _, id := range []string{"m1", "m2", "m3"} {
		q.batch = append(q.batch, sqstypes.Message{MessageId: aws.String(id), ReceiptHandle: aws.String("rh-" + id), Body: aws.String(id)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- lambdas.RunSQSSource(ctx, q, "https://sqs.test/q", fn, m, lambdas.SQSOptions{}) }()
	select {
	case <-q.polled:
	case <-ctx.Done():
		t.Fatal("the source did not poll again")
	}
	cancel()
	<-done
	q.mu.Lock()
	defer q.mu.Unlock()
	slices.Sort(q.deleted)
	return q.deleted
}

// What the source deletes after an invocation, by the function's answer.
func TestRunSQSSource_DeletesByTheFunctionsAnswer(t *testing.T) {
	for _, c := range []struct {
		name    string
		m       lambdas.SQSMapping
		answer  string
		err     error
		deleted []string
	}{
		{"success deletes the batch", lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, `{"batchItemFailures":[]}`, nil, []string{"rh-m1", "rh-m2", "rh-m3"}},
		{"batch item failures stay", lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`, nil, []string{"rh-m1", "rh-m3"}},
		{"an item not in the batch keeps the batch", lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, `{"batchItemFailures":[{"itemIdentifier":"zz"}]}`, nil, nil},
		{"without ReportBatchItemFailures the answer is not read", lambdas.SQSMapping{BatchSize: 5}, `{"batchItemFailures":[{"itemIdentifier":"m2"}]}`, nil, []string{"rh-m1", "rh-m2", "rh-m3"}},
		{"a function error keeps the batch", lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, "", &lambdas.FunctionError{Type: "errorString", Message: "no"}, nil},
		{"a timeout keeps the batch", lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, "", lambdas.ErrTimeout, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			fn := invokerFunc(func(context.Context, []byte) ([]byte, error) {
				if c.err != nil {
					return nil, c.err
				}
				return []byte(c.answer), nil
			})
			if got := runOneBatch(t, fn, c.m); !slices.Equal(got, c.deleted) {
				t.Errorf("deleted %v; want %v", got, c.deleted)
			}
		})
	}
}
