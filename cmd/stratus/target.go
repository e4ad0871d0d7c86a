package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
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
	// CABundle is a PEM file of the certificate authorities the SDK's
	// HTTP client trusts (as the AWS CLI's --ca-bundle; default
	// AWS_CA_BUNDLE): the worker API a reply goes to included.
	CABundle string
	Poll     time.Duration
}

// flagsHint is " --target aws" and the flags o was given, as a hint
// printed for the operator to copy (a region, stack or endpoint that came
// from the environment is not repeated: the same environment gives it).
func (o AWSOptions) flagsHint() string {
	h := " --target aws"
	for _, f := range []struct{ name, v string }{{"endpoint-url", o.EndpointURL}, {"region", o.Region}, {"stack", o.Stack},
		{"state-machine", o.StateMachine}, {"table", o.Table}, {"table-prefix", o.TablePrefix}, {"bucket", o.Bucket}, {"bucket-prefix", o.BucketPrefix},
		{"ca-bundle", o.CABundle}} {
		if f.v != "" {
			h += " --" + f.name + " " + f.v
		}
	}
	return h
}

// The defaults the --target aws flags name in their help, as
// internal/store/dynamodb and internal/awsrun define them (a test holds
// them equal): written here so that the slim build, which links neither
// (companion.go), says the same in its help.
const (
	awsTableBaseName       = "stratus"
	awsDefaultBucketPrefix = "stratus/"
	awsDefaultPoll         = 2 * time.Second
)

// awsContext is the parent context of the --target aws commands (tests
// bound them with a deadline).
var awsContext = context.Background

// awsFlags are the names addTargetFlags registers besides --target.
var awsFlags = []string{"endpoint-url", "region", "stack", "state-machine", "table", "table-prefix", "bucket", "bucket-prefix", "ca-bundle", "poll-interval"}

func addTargetFlags(cmd *cobra.Command, target *string, o *AWSOptions) {
	f := cmd.Flags()
	f.StringVar(target, "target", TargetEmbedded, "where the run is: embedded (this machine) or aws (a deployed stack)")
	f.StringVar(&o.EndpointURL, "endpoint-url", "", "--target aws: the AWS endpoint of every service (moto, LocalStack); default AWS_ENDPOINT_URL or AWS itself")
	f.StringVar(&o.Region, "region", "", "--target aws: AWS region (default: AWS_REGION / the profile's; us-east-1 with --endpoint-url)")
	f.StringVar(&o.Stack, "stack", "", "--target aws: the deployed CloudFormation stack whose outputs name the resources (default STRATUS_STACK)")
	f.StringVar(&o.StateMachine, "state-machine", "", "--target aws: the state machine ARN to run (default: the stack's <Flow>StateMachineArn output, or STRATUS_STATE_MACHINE_ARN)")
	f.StringVar(&o.Table, "table", "", "--target aws: the store's DynamoDB table (default: the stack's, or STRATUS_TABLE)")
	f.StringVar(&o.TablePrefix, "table-prefix", "", "--target aws: the store's table prefix (the table is PREFIX"+awsTableBaseName+"), instead of --table")
	f.StringVar(&o.Bucket, "bucket", "", "--target aws: the data bucket (default: the stack's, or STRATUS_BUCKET)")
	f.StringVar(&o.BucketPrefix, "bucket-prefix", "", "--target aws: key prefix in the bucket (default STRATUS_BUCKET_PREFIX, else "+awsDefaultBucketPrefix+")")
	f.StringVar(&o.CABundle, "ca-bundle", "", "--target aws: PEM file of the certificate authorities to trust for the stack's endpoints and worker API (default AWS_CA_BUNDLE; stratus dev aws prints its own)")
	f.DurationVar(&o.Poll, "poll-interval", awsDefaultPoll, "--target aws: how often a follower reads the run's records")
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
