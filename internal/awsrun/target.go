package awsrun

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus/internal/executor/sfn"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Target is a deployed stack opened for runs: its store, its bucket and
// Step Functions, through one SDK configuration.
type Target struct {
	Resources
	Store *dynamodb.Store
	Sink  *s3sink.Sink
	Exec  *sfn.Executor
}

// Open opens r through cfg. A custom endpoint (cfg.BaseEndpoint: moto,
// LocalStack) gets path-style S3 addressing. Nothing is called. Errors:
// Resources.Check's.
func Open(cfg aws.Config, r Resources) (*Target, error) {
	if err := r.Check(); err != nil {
		return nil, err
	}
	if r.BucketPrefix == "" {
		r.BucketPrefix = DefaultBucketPrefix
	}
	pathStyle := cfg.BaseEndpoint != nil
	sk, err := s3sink.New(awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.UsePathStyle = pathStyle
		// Stand-ins (moto, LocalStack) answer GetObject without checksums;
		// the SDK would say so on stderr for every object read.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), r.Bucket, r.BucketPrefix)
	if err != nil {
		return nil, err
	}
	st, err := dynamodb.New(awsdynamodb.NewFromConfig(cfg), dynamodb.Options{Table: r.Table, Blobs: sk})
	if err != nil {
		return nil, err
	}
	return &Target{Resources: r, Store: st, Sink: sk, Exec: sfn.New(sfn.NewClient(cfg), sfn.Options{PollInterval: 2 * time.Second})}, nil
}

// URL is the s3:// address of sink key key.
func (t *Target) URL(key string) string {
	return "s3://" + t.Sink.Bucket() + "/" + t.Sink.ObjectKey(key)
}
