package sqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/queue"
	"github.com/stratusflow/stratus/internal/queue/queuetest"
	sqsqueue "github.com/stratusflow/stratus/internal/queue/sqs"
)

// The conformance suite on moto's SQS: a fresh queue per subtest, read
// back with ReceiveMessage.
func TestConformanceOnMoto(t *testing.T) {
	c := awssqs.NewFromConfig(awstest.Moto(t).Config())
	queuetest.Run(t, func(t *testing.T) (queue.Queue, queuetest.Received) {
		b := make([]byte, 4)
		rand.Read(b)
		out, err := c.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String("q-" + hex.EncodeToString(b))})
		if err != nil {
			t.Fatal(err)
		}
		url := aws.ToString(out.QueueUrl)
		q, err := sqsqueue.New(c, url)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []string
		return q, func(ctx context.Context) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			r, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
			if err != nil {
				return nil, err
			}
			for _, m := range r.Messages {
				got = append(got, aws.ToString(m.Body))
			}
			return append([]string(nil), got...), nil
		}
	})
}

func TestNew_RefusesAnEmptyURL(t *testing.T) {
	if _, err := sqsqueue.New(nil, ""); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("New(nil, \"\") = %v; want EINVALID", err)
	}
}
