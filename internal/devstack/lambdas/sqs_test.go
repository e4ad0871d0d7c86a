package lambdas_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/devstack/lambdas"
)

// The event source mapping invokes the function with the queue's
// messages as an SQS event and deletes what it handled: with
// ReportBatchItemFailures, every message but the batch item failures it
// reports, which come back after their visibility timeout.
func TestRunSQSSource_DeletesAllButTheBatchItemFailures(t *testing.T) {
	m := awstest.Moto(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := sqs.NewFromConfig(m.Config())
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("lambdas-sqs-source"),
		Attributes: map[string]string{"VisibilityTimeout": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{"ok-1", "fail", "ok-2"} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body),
			MessageAttributes: map[string]sqstypes.MessageAttributeValue{"kind": {DataType: aws.String("String"), StringValue: aws.String("test")}}}); err != nil {
			t.Fatal(err)
		}
	}
	fake := startFake(t, lambdas.Config{})
	var mu sync.Mutex
	var bodies []string
	var events []string
	fn := invokerFunc(func(ctx context.Context, p []byte) ([]byte, error) {
		mu.Lock()
		events = append(events, string(p))
		for _, b := range []string{"ok-1", "ok-2", "fail"} {
			if strings.Contains(string(p), `"body":"`+b+`"`) {
				bodies = append(bodies, b)
			}
		}
		mu.Unlock()
		return fake.Invoke(ctx, p)
	})
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- lambdas.RunSQSSource(sctx, client, aws.ToString(q.QueueUrl), fn,
			lambdas.SQSMapping{BatchSize: 5, ReportBatchItemFailures: true}, lambdas.SQSOptions{Wait: time.Second, OnError: func(err error) { t.Log(err) }})
	}()
	// "fail" is redelivered after its 1 s visibility timeout, the others not.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := 0
		for _, b := range bodies {
			if b == "fail" {
				n++
			}
		}
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed message was not redelivered; bodies seen %v", bodies)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunSQSSource returned %v; want context.Canceled", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, b := range []string{"ok-1", "ok-2"} {
		if c := countOf(bodies, b); c != 1 {
			t.Errorf("%s was delivered %d times; want once (deleted after success)", b, c)
		}
	}
	ev := events[0]
	for _, want := range []string{`"eventSource":"aws:sqs"`, `"eventSourceARN":"arn:aws:sqs:us-east-1:`, `"receiptHandle":"`, `"messageId":"`, `"ApproximateReceiveCount":"1"`, `"stringValue":"test"`} {
		if !strings.Contains(ev, want) {
			t.Errorf("the SQS event lacks %s: %s", want, ev)
		}
	}
}

func countOf(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
