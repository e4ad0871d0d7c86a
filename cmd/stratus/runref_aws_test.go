//go:build !slim

package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// README § Naming a run, with --target aws: RUN names a run of the
// stack's table by a prefix of its id, its task or latest, as it does an
// embedded one; an ambiguous prefix lists the candidates and exits 2.
func TestNamingARun_OnAWS(t *testing.T) {
	t.Parallel()
	moto := awstest.Moto(t) // skips without moto, naming it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := moto.Config()
	name := fmt.Sprintf("names-%d", time.Now().UnixNano()%1e12)
	ddb := awsdynamodb.NewFromConfig(cfg)
	if err := dynamodb.CreateTables(ctx, ddb, name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	blobs, err := s3sink.New(s3c, name, "stratus/")
	if err != nil {
		t.Fatal(err)
	}
	st, err := dynamodb.New(ddb, dynamodb.Options{Table: dynamodb.TableName(name + "-"), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 4, 16, 0, 0, 0, time.UTC)
	ids := []string{"r-20261204T160000-aaa111", "r-20261204T160001-abc222", "r-20261204T160002-abd333"}
	for i, task := range []string{"fix-login", "add-retry", "fix-login"} {
		r := stratus.Run{ID: ids[i], TaskID: task, Flow: "implementation", Status: stratus.RunDone,
			CreatedAt: t0.Add(time.Duration(i) * time.Second), EndedAt: t0.Add(time.Duration(i)*time.Second + time.Minute)}
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	flags := []string{"--target", "aws", "--endpoint-url", moto.URL, "--region", awstest.Region, "--table-prefix", name + "-", "--bucket", name,
		"--state-machine", "arn:aws:states:" + awstest.Region + ":123456789012:stateMachine:none"}
	for _, c := range []struct{ ref, want string }{{"r-20261204T160001", ids[1]}, {"fix-login", ids[2]}, {"latest", ids[2]}} {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"status", c.ref}, flags...), IO{In: strings.NewReader(""), Out: &out, Err: &errb}); code != ExitOK || !strings.HasPrefix(out.String(), "run "+c.want+": done") {
			t.Errorf("status %s --target aws: exit %d, want run %s:\n%s%s", c.ref, code, c.want, out.String(), errb.String())
		}
	}
	var out, errb bytes.Buffer
	if code := Main(append([]string{"status", "r-20261204T16000"}, flags...), IO{In: strings.NewReader(""), Out: &out, Err: &errb}); code != ExitUsage ||
		!strings.Contains(errb.String(), "is ambiguous") || !strings.Contains(errb.String(), ids[0]) {
		t.Errorf("an ambiguous prefix on AWS: exit %d\n%s", code, errb.String())
	}
}
