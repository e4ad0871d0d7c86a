package awstest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// The server answers AWS API calls with static test credentials.
func TestMoto_ServesSQS(t *testing.T) {
	s := Moto(t)
	c := sqs.NewFromConfig(s.Config())
	out, err := c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: aws.String("awstest-probe")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.QueueUrl) == "" {
		t.Fatal("no queue URL")
	}
}
