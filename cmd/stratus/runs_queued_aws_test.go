//go:build !slim

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awspool"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/awstest"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// README.md § Task pool, with --target aws: tasks lists the stack's pool
// (--queue the queue a claim would serve), runs shows its queued tasks
// above the runs with why each waits, status of a queued task's id shows
// the task, and the viewer's source lists them: one max_concurrent_tasks
// slot, taken by a claimed task, leaves the next "queue full".
func TestQueuedTasks_OnAWS(t *testing.T) {
	t.Parallel()
	moto := awstest.Moto(t) // skips without moto, naming it
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := moto.Config()
	name := fmt.Sprintf("queued-%d", time.Now().UnixNano()%1e12)
	ddb := awsdynamodb.NewFromConfig(cfg)
	if err := dynamodb.CreateTables(ctx, ddb, name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	blobs, err := s3sink.New(s3c, name, awsrun.DefaultBucketPrefix)
	if err != nil {
		t.Fatal(err)
	}
	st, err := dynamodb.New(ddb, dynamodb.Options{Table: dynamodb.TableName(name + "-"), Blobs: blobs})
	if err != nil {
		t.Fatal(err)
	}
	for id, extra := range map[string]string{"qa": "", "qb": "depends_on: [qa]\n", "qc": "queue: other\n", "qd": "priority: high\n"} {
		body := "---\nid: " + id + "\ntitle: " + id + "\ntask_type: tiny\n" + extra + "---\nDo " + id + ".\n"
		if err := blobs.Put(ctx, awspool.TaskKey(taskpool.Pending, id+".md"), []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	const runID = "r-20261204T160000-aaa111"
	if err := st.ClaimPoolTask(ctx, dynamodb.PoolClaim{TaskID: "qd", File: "qd.md", RunID: runID, ClaimedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateRun(ctx, stratus.Run{ID: "r-20261204T150000-bbb222", TaskID: "earlier", Flow: "tiny", Status: stratus.RunDone,
		CreatedAt: time.Date(2026, 12, 4, 15, 0, 0, 0, time.UTC), EndedAt: time.Date(2026, 12, 4, 15, 1, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	ao := AWSOptions{EndpointURL: moto.URL, Region: awstest.Region, TablePrefix: name + "-", Bucket: name,
		StateMachine: "arn:aws:states:" + awstest.Region + ":123456789012:stateMachine:none"}
	flags := []string{"--target", "aws", "--endpoint-url", ao.EndpointURL, "--region", ao.Region, "--table-prefix", ao.TablePrefix, "--bucket", ao.Bucket,
		"--state-machine", ao.StateMachine}
	cli := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(append(args, flags...), IO{In: strings.NewReader(""), Out: &out, Err: &errb})
		return code, out.String(), errb.String()
	}
	tasks := func(args ...string) map[string]PoolTask {
		code, out, errs := cli(append([]string{"tasks", "--json"}, args...)...)
		var l []PoolTask
		if err := json.Unmarshal([]byte(out), &l); code != 0 || err != nil {
			t.Fatalf("tasks --json %v --target aws: exit %d, %v\n%s%s", args, code, err, out, errs)
		}
		m := map[string]PoolTask{}
		for _, p := range l {
			m[p.ID] = p
		}
		return m
	}
	want := map[string]string{"qa": "queue full", "qb": "depends_on qa", "qc": "queue other"}
	got := tasks()
	for id, w := range want {
		if got[id].State != taskpool.Pending || got[id].Waits != w {
			t.Errorf("tasks --target aws: %s: %+v; want pending, waiting on %q", id, got[id], w)
		}
	}
	if got["qd"].State != taskpool.Claimed || got["qd"].RunID != runID {
		t.Errorf("tasks --target aws: qd: %+v; want claimed by run %s", got["qd"], runID)
	}
	if got := tasks("--queue", "other"); got["qa"].Waits != "queue other" || got["qc"].Waits != "queue full" {
		t.Errorf("tasks --queue other --target aws: qa %+v, qc %+v; want qa of the other queue, qc waiting for a slot", got["qa"], got["qc"])
	}

	code, out, errs := cli("runs")
	q, runs := strings.Index(out, "QUEUED TASK"), strings.Index(out, "r-20261204T150000-bbb222")
	if code != 0 || q < 0 || runs < q {
		t.Fatalf("runs --target aws: exit %d; want the queued tasks above the runs\n%s%s", code, out, errs)
	}
	for _, w := range []string{"queue full", "depends_on qa", "queue other", runID} {
		if !strings.Contains(out[:runs], w) {
			t.Errorf("runs --target aws: the queued tasks do not say %q:\n%s", w, out)
		}
	}
	if code, out, errs := cli("status", "qb"); code != 0 || !strings.Contains(out, "task qb: pending") || !strings.Contains(out, "waits on: depends_on qa") {
		t.Errorf("status qb --target aws: exit %d\n%s%s", code, out, errs)
	}

	src, err := ao.uiSource(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if src.Tasks == nil {
		t.Fatal("ui --target aws: no Tasks in the viewer's source")
	}
	l, err := src.Tasks(ctx)
	if err != nil || len(l) != 4 {
		t.Errorf("ui --target aws: Tasks = %+v, %v; want the 4 queued tasks", l, err)
	}
}
