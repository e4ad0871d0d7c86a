package awsapp_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsapp"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// What template.yaml sets reads back as the Config the functions run on;
// the defaults fill what it leaves out (the runner container, the
// network-access subnets and security groups, the 4 MiB body bound).
func TestFromEnv_ReadsTheTemplatesVariables(t *testing.T) {
	c, err := awsapp.FromEnv(envOf(map[string]string{
		awsapp.EnvTable: "stack-stratus", awsapp.EnvBucket: "bucket", awsapp.EnvBucketPrefix: "stratus/",
		awsapp.EnvAPIURL: "https://abc.execute-api.us-east-1.amazonaws.com/", awsapp.EnvSecretID: "arn:secret",
		awsapp.EnvCluster: "cluster", awsapp.EnvTaskDefinition: "arn:td:3", awsapp.EnvSubnets: " subnet-a, subnet-b ,",
		awsapp.EnvSecurityGroups: "sg-a", awsapp.EnvAssignPublicIP: "ENABLED", awsapp.EnvTokenTTLSeconds: "900",
		awsapp.EnvPublisherTaskDefinition: "arn:td-publisher:1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table != "stack-stratus" || c.Bucket != "bucket" || c.BucketPrefix != "stratus/" || c.SecretID != "arn:secret" {
		t.Errorf("config %+v", c)
	}
	if c.APIURL != "https://abc.execute-api.us-east-1.amazonaws.com" {
		t.Errorf("APIURL %q; want it without the trailing slash", c.APIURL)
	}
	e := c.ECS
	if !slices.Equal(e.Subnets, []string{"subnet-a", "subnet-b"}) || !slices.Equal(e.NetworkSubnets, e.Subnets) ||
		!slices.Equal(e.NetworkSecurityGroups, []string{"sg-a"}) || !e.AssignPublicIP || e.Container != "runner" {
		t.Errorf("ECS %+v", e)
	}
	if e.TaskDefinition != "arn:td:3" || e.NetworkTaskDefinition != e.TaskDefinition {
		t.Errorf("task definitions %q, network %q; want the network one to default to the runner's", e.TaskDefinition, e.NetworkTaskDefinition)
	}
	if e.PublisherTaskDefinition != "arn:td-publisher:1" {
		t.Errorf("publisher task definition %q; want %s's value", e.PublisherTaskDefinition, awsapp.EnvPublisherTaskDefinition)
	}
	if c.MaxBodyBytes != awsapp.DefaultMaxBodyBytes || c.TokenTTL != 900*time.Second {
		t.Errorf("MaxBodyBytes %d, TokenTTL %v", c.MaxBodyBytes, c.TokenTTL)
	}
}

// README.md § Warm runners (pool mode): the pool's queues and pickup window;
// empty is the cold path.
func TestFromEnv_Pool(t *testing.T) {
	c, err := awsapp.FromEnv(envOf(map[string]string{
		awsapp.EnvPoolQueueURL: "https://sqs.us-east-1.amazonaws.com/1/p", awsapp.EnvPoolPickupSeconds: "90"}))
	if err != nil || c.Pool.QueueURL != "https://sqs.us-east-1.amazonaws.com/1/p" || c.Pool.NetworkQueueURL != "" || c.Pool.Pickup != 90*time.Second {
		t.Errorf("FromEnv(pool) = %+v, %v", c.Pool, err)
	}
	if c, err := awsapp.FromEnv(envOf(map[string]string{awsapp.EnvPoolQueueURL: "", awsapp.EnvPoolPickupSeconds: ""})); err != nil || c.Pool != (awsapp.Pool{}) {
		t.Errorf("FromEnv(pool off) = %+v, %v; want the zero Pool", c.Pool, err)
	}
}

// A malformed value is refused naming the variable.
func TestFromEnv_BadValueNamesTheVariable(t *testing.T) {
	for k, v := range map[string]string{
		awsapp.EnvAssignPublicIP:      "yes",
		awsapp.EnvMaxBodyBytes:        "-1",
		awsapp.EnvTokenTTLSeconds:     "ten",
		awsapp.EnvAPIURL:              "abc.execute-api.amazonaws.com",
		awsapp.EnvPoolQueueURL:        "stratus-pool",
		awsapp.EnvPoolNetworkQueueURL: "sqs://q",
		awsapp.EnvPoolPickupSeconds:   "91",
	} {
		_, err := awsapp.FromEnv(envOf(map[string]string{k: v}))
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != k {
			t.Errorf("FromEnv(%s=%q) = %v; want EINVALID naming %s", k, v, err, k)
		}
	}
}

// Infrastructure failures are the errors without a Stratus code (an AWS
// or network error) or EINTERNAL; a coded answer would repeat on retry.
func TestInfrastructure_UncodedErrorsOnly(t *testing.T) {
	for err, want := range map[error]bool{
		errors.New("ThrottlingException: Rate exceeded"):     true,
		stratus.Errorf(stratus.EINTERNAL, "boom"):            true,
		stratus.Errorf(stratus.ENOTFOUND, "no run"):          false,
		stratus.Errorf(stratus.ECONFLICT, "TaskTimedOut: x"): false,
		stratus.Errorf(stratus.EINVALID, "bad message"):      false,
	} {
		if got := awsapp.Infrastructure(err); got != want {
			t.Errorf("Infrastructure(%v) = %v; want %v", err, got, want)
		}
	}
	if awsapp.Infrastructure(nil) {
		t.Error("Infrastructure(nil) = true")
	}
}
