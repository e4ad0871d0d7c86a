package sqs_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

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

// The queue.Polled suite on moto's SQS: a fresh queue per subtest, with a
// dead-letter queue and a RedrivePolicy when it dead-letters (Amazon SQS
// Developer Guide, "Using dead-letter queues in Amazon SQS"), read back
// with ReceiveMessage.
func TestPolledConformanceOnMoto(t *testing.T) {
	c := awssqs.NewFromConfig(awstest.Moto(t).Config())
	queuetest.RunPolled(t, func(t *testing.T, maxReceives int) (queue.Polled, queuetest.DeadLetters) {
		if strings.HasSuffix(t.Name(), "/ExtendRefusesAStaleReceipt") {
			// moto/sqs/models.py change_message_visibility matches a receipt
			// with Message.had_receipt_handle: any receipt the message ever
			// had, so it extends the message for a receiver that lost it.
			t.Skip("moto 5.2.1 ChangeMessageVisibility takes a stale receipt (any the message ever had); SQS refuses one that is not in flight")
		}
		ctx := context.Background()
		name := queueName()
		attrs := map[string]string{}
		var dlqURL string
		if maxReceives > 0 {
			dlqURL = createQueue(t, c, name+"-dlq", nil)
			a, err := c.GetQueueAttributes(ctx, &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(dlqURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
			if err != nil {
				t.Fatal(err)
			}
			policy, _ := json.Marshal(map[string]string{
				"deadLetterTargetArn": a.Attributes[string(types.QueueAttributeNameQueueArn)],
				"maxReceiveCount":     strconv.Itoa(maxReceives),
			})
			attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
		}
		q, err := sqsqueue.New(c, createQueue(t, c, name, attrs))
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var dead []string
		return q, func(ctx context.Context) ([]string, error) {
			if dlqURL == "" {
				return nil, nil
			}
			mu.Lock()
			defer mu.Unlock()
			r, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: 10, VisibilityTimeout: 3600})
			if err != nil {
				return nil, err
			}
			for _, m := range r.Messages {
				dead = append(dead, aws.ToString(m.Body))
			}
			return append([]string(nil), dead...), nil
		}
	})
}

func queueName() string {
	b := make([]byte, 4)
	rand.Read(b)
	return "q-" + hex.EncodeToString(b)
}

func createQueue(t *testing.T, c *awssqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(context.Background(), &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.QueueUrl)
}

// Out-of-range waits and visibilities are refused before any request
// (the conformance suite checks the codes; this, that nothing is sent).
func TestPolled_RefusesBeforeAnyRequest(t *testing.T) {
	q, err := sqsqueue.New(nil, "https://sqs.example/q") // a nil client: any request panics
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := q.Receive(ctx, -time.Second, time.Second); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Receive(wait -1s) = %v; want EINVALID", err)
	}
	if _, _, err := q.Receive(ctx, time.Second, 12*time.Hour+time.Nanosecond); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Receive(visibility 12h+1ns) = %v; want EINVALID", err)
	}
	if err := q.Extend(ctx, "r", 999*time.Millisecond); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("Extend(visibility 999ms) = %v; want EINVALID", err)
	}
}

// What Receive, Delete and Extend send: one message at most, times rounded
// up to whole seconds, the receive count asked for; and how SQS's
// refusals of a receipt map to codes.
func TestPolled_Requests(t *testing.T) {
	f := &fakeAPI{}
	q, _ := sqsqueue.New(f, "https://sqs.example/q")
	ctx := context.Background()
	f.receive = &awssqs.ReceiveMessageOutput{Messages: []types.Message{{Body: aws.String("b"), ReceiptHandle: aws.String("rh"), Attributes: map[string]string{"ApproximateReceiveCount": "3"}}}}
	m, ok, err := q.Receive(ctx, 1500*time.Millisecond, 2*time.Second+time.Millisecond)
	if err != nil || !ok || string(m.Body) != "b" || m.Receipt != "rh" || m.Receives != 3 {
		t.Fatalf("Receive = %+v, %v, %v", m, ok, err)
	}
	in := f.receiveIn
	if in.MaxNumberOfMessages != 1 || in.WaitTimeSeconds != 2 || in.VisibilityTimeout != 3 ||
		len(in.MessageSystemAttributeNames) != 1 || in.MessageSystemAttributeNames[0] != types.MessageSystemAttributeNameApproximateReceiveCount {
		t.Errorf("ReceiveMessageInput = %+v; want 1 message, wait 2 s, visibility 3 s, ApproximateReceiveCount", in)
	}
	if err := q.Extend(ctx, "rh", 1100*time.Millisecond); err != nil || f.changeIn.VisibilityTimeout != 2 || aws.ToString(f.changeIn.ReceiptHandle) != "rh" {
		t.Errorf("Extend = %v, input %+v; want visibility 2 s for rh", err, f.changeIn)
	}

	for _, c := range []struct {
		err         error
		code, field string
	}{
		{&types.ReceiptHandleIsInvalid{Message: aws.String("bad")}, stratus.ENOTFOUND, "receipt"},
		{&types.MessageNotInflight{Message: aws.String("visible")}, stratus.EINVALID, "receipt"},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value rh for parameter ReceiptHandle is invalid. Reason: Message does not exist or is not available for visibility timeout change."}, stratus.EINVALID, "receipt"},
		{&smithy.GenericAPIError{Code: "InvalidParameterValue", Message: "Value 43200 for parameter VisibilityTimeout is invalid. Reason: Total VisibilityTimeout for the message is beyond the limit [43200 seconds]"}, stratus.EINVALID, "visibility"},
	} {
		f.err = c.err
		err := q.Extend(ctx, "rh", time.Second)
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != c.code || se.Field != c.field || !strings.Contains(se.Message, "https://sqs.example/q") {
			t.Errorf("Extend when SQS says %v = %v; want %s on %s naming the queue", c.err, err, c.code, c.field)
		}
	}
	// What no retry changes stops a poller: a queue that is not there,
	// credentials refused.
	for _, c := range []struct {
		err  error
		code string
	}{
		{&types.QueueDoesNotExist{Message: aws.String("no such queue")}, stratus.ENOTFOUND},
		{&smithy.GenericAPIError{Code: "AWS.SimpleQueueService.NonExistentQueue", Message: "gone"}, stratus.ENOTFOUND},
		{&smithy.GenericAPIError{Code: "AccessDenied", Message: "not allowed"}, stratus.EUNAUTHORIZED},
		{&smithy.GenericAPIError{Code: "InvalidClientTokenId", Message: "who"}, stratus.EUNAUTHORIZED},
	} {
		f.err = c.err
		_, _, err := q.Receive(ctx, 0, time.Second)
		if stratus.ErrorCode(err) != c.code || !strings.Contains(err.Error(), "https://sqs.example/q") {
			t.Errorf("Receive when SQS says %v = %v; want %s naming the queue", c.err, err, c.code)
		}
	}
	f.err = errors.New("connection reset")
	for name, err := range map[string]error{
		"Delete":  q.Delete(ctx, "rh"),
		"Extend":  q.Extend(ctx, "rh", time.Second),
		"Receive": func() error { _, _, err := q.Receive(ctx, 0, time.Second); return err }(),
	} {
		if !errors.Is(err, f.err) || !strings.Contains(err.Error(), "https://sqs.example/q") {
			t.Errorf("%s on a transport error = %v; want it wrapped, naming the queue", name, err)
		}
	}
}

type fakeAPI struct {
	sqsqueue.API
	err       error
	receive   *awssqs.ReceiveMessageOutput
	receiveIn *awssqs.ReceiveMessageInput
	changeIn  *awssqs.ChangeMessageVisibilityInput
}

func (f *fakeAPI) ReceiveMessage(_ context.Context, in *awssqs.ReceiveMessageInput, _ ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	f.receiveIn = in
	return f.receive, f.err
}

func (f *fakeAPI) DeleteMessage(context.Context, *awssqs.DeleteMessageInput, ...func(*awssqs.Options)) (*awssqs.DeleteMessageOutput, error) {
	return &awssqs.DeleteMessageOutput{}, f.err
}

func (f *fakeAPI) ChangeMessageVisibility(_ context.Context, in *awssqs.ChangeMessageVisibilityInput, _ ...func(*awssqs.Options)) (*awssqs.ChangeMessageVisibilityOutput, error) {
	f.changeIn = in
	return &awssqs.ChangeMessageVisibilityOutput{}, f.err
}

func TestNew_RefusesAnEmptyURL(t *testing.T) {
	if _, err := sqsqueue.New(nil, ""); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("New(nil, \"\") = %v; want EINVALID", err)
	}
}
