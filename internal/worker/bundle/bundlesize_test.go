package bundle_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/config"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/worker/bundle"
	"github.com/stratusflow/stratus/internal/worker/core"
	"github.com/stratusflow/stratus/internal/worker/workertest"
	"github.com/stratusflow/stratus/internal/workspace/workspacetest"
)

// bundleLimit is the rigs' limits.max_snapshot_bytes in these tests.
const bundleLimit = 1000

func limitBundles(c *config.Config) { c.Limits.MaxSnapshotBytes = bundleLimit }

var bucketSeq atomic.Int64

// s3Rig is a workspace rig whose sink is S3 on the moto server: the sink
// that presigns URLs, as on AWS.
func s3Rig(t *testing.T) (*workertest.Rig, *s3sink.Sink) {
	t.Helper()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true, Config: limitBundles})
	c := awss3.NewFromConfig(awstest.Moto(t).Config(), func(o *awss3.Options) { o.UsePathStyle = true })
	bucket := fmt.Sprintf("bundles-%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1))
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	sk, err := s3sink.New(c, bucket, "stratus")
	if err != nil {
		t.Fatal(err)
	}
	r.Svc.Sink = sk
	return r, sk
}

func httpPut(t *testing.T, u string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// docs/security.md § Upload size limits: on a sink that presigns URLs (S3
// on moto here), no URL a workspace-write attempt can reach stores a step
// bundle over limits.max_snapshot_bytes. The payload carries none (before
// the fix it carried a presigned PUT with no length, which stored a body
// of any size: this test PUT bundleLimit+1 bytes through it and saw them
// stored); POST /v1/worker/workspace/upload answers a URL signed for the
// bundle's exact size, refuses a size over the limit, and S3 refuses a
// longer body, storing nothing.
func TestWorkspaceUpload_NoURLStoresABundleOverTheLimitOnMoto(t *testing.T) {
	ctx := context.Background()
	r, sk := s3Rig(t)
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	ws := p.Workspace
	if ws == nil || ws.Upload == nil || ws.MaxBytes != bundleLimit {
		t.Fatalf("workspace = %+v; want an upload key and max_bytes %d", ws, bundleLimit)
	}
	key := ws.Upload.Key
	over := bytes.Repeat([]byte("o"), bundleLimit+1)
	if ws.Upload.URL != "" {
		code := httpPut(t, ws.Upload.URL, over)
		_, err := sk.Size(ctx, key)
		t.Errorf("the payload carries an upload URL %q: a PUT of %d bytes through it answered %d (stored: %v)", ws.Upload.URL, len(over), code, err == nil)
	}

	for _, tc := range []struct {
		bytes int64
		code  string
	}{{bundleLimit + 1, stratus.ETOOLARGE}, {5 << 30, stratus.ETOOLARGE}, {0, stratus.EINVALID}, {-1, stratus.EINVALID}} {
		_, err := bundle.Upload(ctx, r.Svc.Service, auth, core.UploadRequest{Bytes: tc.bytes})
		var se *stratus.Error
		if stratus.ErrorCode(err) != tc.code || !errors.As(err, &se) || se.Field != "bytes" {
			t.Errorf("WorkspaceUpload(%d bytes) = %v; want %s on field bytes", tc.bytes, err, tc.code)
		}
	}
	if _, err := bundle.Upload(ctx, r.Svc.Service, auth, core.UploadRequest{Bytes: bundleLimit + 1}); err == nil || !strings.Contains(err.Error(), "limits.max_snapshot_bytes") {
		t.Errorf("the refusal %v does not name limits.max_snapshot_bytes", err)
	}

	up, err := bundle.Upload(ctx, r.Svc.Service, auth, core.UploadRequest{Bytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	if up.Key != key || up.MaxBytes != bundleLimit || !strings.HasPrefix(up.URL, "http") {
		t.Fatalf("upload = %+v; want key %s, max_bytes %d and a presigned URL", up, key, bundleLimit)
	}
	for _, n := range []int{bundleLimit + 1, 601, 599} {
		if code := httpPut(t, up.URL, bytes.Repeat([]byte("b"), n)); code != http.StatusForbidden {
			t.Errorf("PUT of %d bytes to a URL signed for 600: %d; want 403", n, code)
		}
		if _, err := sk.Size(ctx, key); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("after the refused PUT of %d bytes: Size = %v; want ENOTFOUND (nothing stored)", n, err)
		}
	}
	if code := httpPut(t, up.URL, bytes.Repeat([]byte("b"), 600)); code != http.StatusOK {
		t.Fatalf("PUT of the 600 bytes signed: %d", code)
	}
	if n, err := sk.Size(ctx, key); err != nil || n != 600 {
		t.Errorf("after the PUT of the 600 bytes signed: Size = %d, %v; want 600", n, err)
	}
}

// docs/security.md § Upload size limits: the server checks the stored
// bundle's size before it moves the head, whoever stored it and however: a
// bundle over the limit is refused (ETOOLARGE), deleted, and the head stays.
// Before the fix the head moved onto it.
func TestAdvanceHead_BundleOverTheLimitRefusedAndDeleted(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true, Config: limitBundles})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	p, err := r.Svc.FetchPrompt(ctx, auth, sp.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	key := p.Workspace.Upload.Key
	// Stored around the API (a sink that took more than it should).
	if err := r.Svc.Sink.Put(ctx, key, bytes.Repeat([]byte("x"), bundleLimit+1)); err != nil {
		t.Fatal(err)
	}
	err = bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: strings.Repeat("1", 40)})
	if stratus.ErrorCode(err) != stratus.ETOOLARGE || !strings.Contains(err.Error(), "1001 bytes, over the limit of 1000 bytes") {
		t.Errorf("advance onto a %d-byte bundle: %v; want ETOOLARGE naming its size and the limit", bundleLimit+1, err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, filepath.FromSlash(key))); !os.IsNotExist(err) {
		t.Errorf("the oversized bundle is still stored (%v)", err)
	}
	if run, _ := r.Svc.Store.GetRun(ctx, "r1"); run.Workspace.Head != r.Base || len(run.Workspace.Bundles) != 1 {
		t.Errorf("the head moved: %+v", run.Workspace)
	}
	// Within the limit, the same attempt goes on with a real bundle.
	one := r.Repo.Commit(r.Repo.Tree(append(r.BaseTree, workspacetest.File("hello.txt", r.Repo.Blob("hello\n")))...), "impl#1", r.Base)
	stepBundle := r.Repo.Bundle(filepath.Join(t.TempDir(), "step.bundle"), one, r.Base)
	if len(stepBundle) > bundleLimit {
		t.Fatalf("the test's bundle is %d bytes, over the rig's limit %d", len(stepBundle), bundleLimit)
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, key, stepBundle); err != nil {
		t.Fatal(err)
	}
	if err := bundle.AdvanceHead(ctx, r.Svc.Service, auth, core.HeadAdvance{From: r.Base, To: one}); err != nil {
		t.Errorf("advance onto a %d-byte bundle: %v", len(stepBundle), err)
	}
}

// docs/security.md § Upload size limits: on a sink that does not presign
// (the fs sink, embedded), the bundle limit holds at the blob route: a body
// over it is ETOOLARGE and nothing is stored; the limit is told before the
// body is read, and only a workspace-write step may ask for an upload.
func TestWriteBlob_BundleOverTheLimitRefused(t *testing.T) {
	ctx := context.Background()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.WorkspaceFlow, Workspace: true, Config: limitBundles})
	r.Dispatch(t, "impl")
	sp := r.Launcher.Launched()[0]
	auth := "Bearer " + sp.Handle
	up, err := bundle.Upload(ctx, r.Svc.Service, auth, core.UploadRequest{Bytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(up.URL, "/v1/worker/workspace/blob?key=") || up.MaxBytes != bundleLimit {
		t.Errorf("upload %+v; want the blob route and max_bytes %d", up, bundleLimit)
	}
	var told int64
	err = bundle.WriteFrom(ctx, r.Svc.Service, auth, up.Key, func(limit int64) ([]byte, error) {
		told = limit
		return bytes.Repeat([]byte("x"), int(limit)+1), nil
	})
	if told != bundleLimit || stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("WriteBlobFrom: told %d, err %v; want the limit %d told and ETOOLARGE", told, err, bundleLimit)
	}
	if err := bundle.Write(ctx, r.Svc.Service, auth, up.Key, bytes.Repeat([]byte("x"), bundleLimit+1)); stratus.ErrorCode(err) != stratus.ETOOLARGE {
		t.Errorf("WriteBlob of %d bytes: %v; want ETOOLARGE", bundleLimit+1, err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir, filepath.FromSlash(up.Key))); !os.IsNotExist(err) {
		t.Errorf("a refused bundle was stored (%v)", err)
	}
	if _, err := r.Submit(t, "done"); err != nil {
		t.Fatal(err)
	}
	r.Dispatch(t, "rev")
	rev := r.Launcher.Launched()[1]
	if _, err := bundle.Upload(ctx, r.Svc.Service, "Bearer "+rev.Handle, core.UploadRequest{Bytes: 10}); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("an evaluator's WorkspaceUpload: %v; want EINVALID", err)
	}
}
