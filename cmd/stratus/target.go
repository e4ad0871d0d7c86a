package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Targets a run can use: the embedded executor (the default) or a deployed
// stack.
const (
	TargetEmbedded = "embedded"
	TargetAWS      = "aws"
)

// AWSOptions are the flags that name a deployed stack (`--target aws`),
// shared by run and status. Unset flags fall back to the environment:
// STRATUS_STACK, STRATUS_STATE_MACHINE_ARN, STRATUS_TABLE, STRATUS_BUCKET,
// STRATUS_BUCKET_PREFIX; the SDK reads AWS_ENDPOINT_URL, AWS_REGION and
// credentials itself.
type AWSOptions struct {
	EndpointURL  string
	Region       string
	Stack        string
	StateMachine string
	Table        string
	TablePrefix  string
	Bucket       string
	BucketPrefix string
	Poll         time.Duration
}

// flagsHint is " --target aws" and the flags o was given, as a hint
// printed for the operator to copy (a region, stack or endpoint that came
// from the environment is not repeated: the same environment gives it).
func (o AWSOptions) flagsHint() string {
	h := " --target aws"
	for _, f := range []struct{ name, v string }{{"endpoint-url", o.EndpointURL}, {"region", o.Region}, {"stack", o.Stack},
		{"state-machine", o.StateMachine}, {"table", o.Table}, {"table-prefix", o.TablePrefix}, {"bucket", o.Bucket}, {"bucket-prefix", o.BucketPrefix}} {
		if f.v != "" {
			h += " --" + f.name + " " + f.v
		}
	}
	return h
}

// awsFlags are the names addTargetFlags registers besides --target.
var awsFlags = []string{"endpoint-url", "region", "stack", "state-machine", "table", "table-prefix", "bucket", "bucket-prefix", "poll-interval"}

func addTargetFlags(cmd *cobra.Command, target *string, o *AWSOptions) {
	f := cmd.Flags()
	f.StringVar(target, "target", TargetEmbedded, "where the run is: embedded (this machine) or aws (a deployed stack)")
	f.StringVar(&o.EndpointURL, "endpoint-url", "", "--target aws: the AWS endpoint of every service (moto, LocalStack); default AWS_ENDPOINT_URL or AWS itself")
	f.StringVar(&o.Region, "region", "", "--target aws: AWS region (default: AWS_REGION / the profile's; us-east-1 with --endpoint-url)")
	f.StringVar(&o.Stack, "stack", "", "--target aws: the deployed CloudFormation stack whose outputs name the resources (default STRATUS_STACK)")
	f.StringVar(&o.StateMachine, "state-machine", "", "--target aws: the state machine ARN to run (default: the stack's <Flow>StateMachineArn output, or STRATUS_STATE_MACHINE_ARN)")
	f.StringVar(&o.Table, "table", "", "--target aws: the store's DynamoDB table (default: the stack's, or STRATUS_TABLE)")
	f.StringVar(&o.TablePrefix, "table-prefix", "", "--target aws: the store's table prefix (the table is PREFIX"+dynamodb.TableBaseName+"), instead of --table")
	f.StringVar(&o.Bucket, "bucket", "", "--target aws: the data bucket (default: the stack's, or STRATUS_BUCKET)")
	f.StringVar(&o.BucketPrefix, "bucket-prefix", "", "--target aws: key prefix in the bucket (default STRATUS_BUCKET_PREFIX, else "+awsrun.DefaultBucketPrefix+")")
	f.DurationVar(&o.Poll, "poll-interval", awsrun.DefaultPoll, "--target aws: how often a follower reads the run's records")
	f.MarkHidden("poll-interval")
}

// checkTarget refuses an unknown target and AWS flags without --target aws.
func checkTarget(cmd *cobra.Command, target string) error {
	switch target {
	case TargetEmbedded:
		for _, name := range awsFlags {
			if cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s needs --target aws", name)}
			}
		}
	case TargetAWS:
	default:
		return usageError{fmt.Errorf("--target %q is not valid; valid: %s, %s", target, TargetEmbedded, TargetAWS)}
	}
	return nil
}

// awsConfigHook, when set, adjusts every SDK configuration the CLI loads
// (tests count requests and give moto's credentials through it), and
// awsContext is the parent context of the --target aws commands (tests
// bound them with a deadline).
var (
	awsConfigHook func(*aws.Config)
	awsContext    = context.Background
)

var stateMachineARN = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$`)
})

// open loads the SDK configuration and opens the stack's resources.
func (o *AWSOptions) open(ctx context.Context) (*awsrun.Target, error) {
	if o.Table != "" && o.TablePrefix != "" {
		return nil, usageError{fmt.Errorf("give --table or --table-prefix, not both")}
	}
	if o.EndpointURL != "" {
		if u, err := url.Parse(o.EndpointURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageError{fmt.Errorf("--endpoint-url %q: want an http:// or https:// URL such as http://localhost:4566", o.EndpointURL)}
		}
	}
	if o.StateMachine != "" && !stateMachineARN().MatchString(o.StateMachine) {
		return nil, usageError{fmt.Errorf("--state-machine %q: want a state machine ARN, arn:aws:states:<region>:<account>:stateMachine:<name>", o.StateMachine)}
	}
	var opts []func(*awsconfig.LoadOptions) error
	if o.Region != "" {
		opts = append(opts, awsconfig.WithRegion(o.Region))
	}
	if o.EndpointURL != "" {
		opts = append(opts, awsconfig.WithBaseEndpoint(o.EndpointURL))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("AWS SDK configuration: %w", err)
	}
	if cfg.Region == "" && cfg.BaseEndpoint != nil {
		cfg.Region = "us-east-1" // moto and LocalStack answer in any region
	}
	if cfg.BaseEndpoint != nil && os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
		// A stand-in (stratus dev aws, moto, LocalStack) takes any
		// credentials: without any given, test ones are used (rather than
		// the SDK probing for an instance role).
		cfg.Credentials = credentials.NewStaticCredentialsProvider("test", "test", "")
	}
	if cfg.Region == "" {
		return nil, usageError{fmt.Errorf("no AWS region: give --region or set AWS_REGION")}
	}
	if awsConfigHook != nil {
		awsConfigHook(&cfg)
	}
	r, err := o.resources(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return awsrun.Open(cfg, r)
}

// resources are the flags over the stack's outputs over the environment
// (the state machine comes from the environment only without a stack).
func (o *AWSOptions) resources(ctx context.Context, cfg aws.Config) (awsrun.Resources, error) {
	var r awsrun.Resources
	if stack := or(o.Stack, os.Getenv(awsrun.EnvStack)); stack != "" {
		var err error
		if r, err = awsrun.FromStack(ctx, cloudformation.NewFromConfig(cfg), stack); err != nil {
			return r, err
		}
	}
	table := o.Table
	if o.TablePrefix != "" {
		table = dynamodb.TableName(o.TablePrefix)
	}
	r.Table = or(table, r.Table, os.Getenv(awsapp.EnvTable))
	r.Bucket = or(o.Bucket, r.Bucket, os.Getenv(awsapp.EnvBucket))
	r.BucketPrefix = or(o.BucketPrefix, r.BucketPrefix, os.Getenv(awsapp.EnvBucketPrefix), awsrun.DefaultBucketPrefix)
	r.StateMachine = o.StateMachine
	if r.StateMachine == "" && r.Stack == "" {
		r.StateMachine = os.Getenv(awsrun.EnvStateMachine)
	}
	return r, nil
}

// or is the first non-empty string.
func or(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
