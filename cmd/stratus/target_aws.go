//go:build !slim

package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/stratusflow/stratus/internal/awsapp"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// awsConfigHook, when set, adjusts every SDK configuration the CLI loads
// (tests count requests and give moto's credentials through it).
var awsConfigHook func(*aws.Config)

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
	if o.CABundle != "" {
		pem, err := os.ReadFile(o.CABundle)
		if err != nil {
			return nil, usageError{fmt.Errorf("--ca-bundle %s: %w; want a PEM file of certificate authorities", o.CABundle, err)}
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return nil, usageError{fmt.Errorf("--ca-bundle %s holds no PEM certificate; want a PEM file of certificate authorities", o.CABundle)}
		}
		opts = append(opts, awsconfig.WithCustomCABundle(bytes.NewReader(pem)))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	var noProfile awsconfig.SharedConfigProfileNotExistError
	switch {
	case errors.As(err, &noProfile):
		// AWS_PROFILE (or AWS_DEFAULT_PROFILE) names a profile the shared
		// config and credentials files do not hold: the caller's input.
		return nil, usageError{fmt.Errorf("AWS profile %q (AWS_PROFILE) is in neither the shared config file (AWS_CONFIG_FILE, default ~/.aws/config) nor the credentials file (AWS_SHARED_CREDENTIALS_FILE, default ~/.aws/credentials); valid: a profile one of them holds, or unset AWS_PROFILE", noProfile.Profile)}
	case err != nil:
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

// replyFlags are the flags a reply command needs to reach the stack, as a
// wait line or the run viewer prints them (flagsHint without its space).
func (o AWSOptions) replyFlags() string {
	return strings.TrimPrefix(o.flagsHint(), " ")
}
