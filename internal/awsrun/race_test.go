package awsrun_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsdynamodb "github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awsrun"
	"github.com/stratusflow/stratus/internal/builtin"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/store/dynamodb"
)

// Two starts of one task at the same instant both pass the lock check
// made before anything is frozen; the one whose run's record loses the
// lock is refused as any second run is, and leaves nothing in the bucket:
// what it froze (bundle, definition, workspace) is removed. Not parallel:
// it sets the package's hook before a run is recorded.
func TestStart_LosingTheLockRaceLeavesNothing(t *testing.T) {
	cfg := motoConfig(t)
	ctx := context.Background()
	name := uniqueName(t)
	if err := dynamodb.CreateTables(ctx, awsdynamodb.NewFromConfig(cfg), name+"-"); err != nil {
		t.Fatal(err)
	}
	s3c := awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
	if _, err := s3c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	tg, err := awsrun.Open(cfg, awsrun.Resources{Table: dynamodb.TableName(name + "-"), Bucket: name, StateMachine: "arn:aws:states:us-east-1:123456789012:stateMachine:none"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := fs.WalkDir(builtin.Flows, "flows", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := builtin.Flows.ReadFile(p)
		dst := filepath.Join(dir, ".stratus", p)
		os.MkdirAll(filepath.Dir(dst), 0o755)
		return os.WriteFile(dst, b, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	conf, err := config.Marshal(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, ".stratus", "config.yaml"), conf, 0o644)
	os.WriteFile(filepath.Join(dir, "task.md"), []byte("---\nid: t-race\ntitle: T\n---\nbody\n"), 0o644)

	const other = "r-20250101T000000-000001"
	var lost string
	awsrun.SetBeforeCreateRun(func(ctx context.Context, run stratus.Run) {
		lost = run.ID
		// The other start, begun at the same instant, records its run first.
		if err := tg.Store.CreateRunLocked(ctx, stratus.Run{ID: other, TaskID: run.TaskID, Flow: run.Flow, Status: stratus.RunRunning, CreatedAt: time.Now().UTC()}); err != nil {
			t.Error(err)
		}
	})
	defer awsrun.SetBeforeCreateRun(nil)
	_, err = tg.Start(ctx, awsrun.StartOptions{Dir: dir, TaskPath: filepath.Join(dir, "task.md")})
	if err == nil || stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "lock: run "+other+" holds it") {
		t.Fatalf("the start that lost the lock: %v; want the task's lock held by %s", err, other)
	}
	if lost == "" {
		t.Fatal("the start never reached its run's record")
	}
	if _, err := tg.Store.GetRun(ctx, lost); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("the refused run %s was recorded: %v", lost, err)
	}
	out, err := s3c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out.Contents {
		if strings.Contains(aws.ToString(o.Key), lost) {
			t.Errorf("the refused run left %s in the bucket", aws.ToString(o.Key))
		}
	}
}
