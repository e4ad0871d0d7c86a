package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/sink/fs"
	s3sink "github.com/stratusflow/stratus/internal/sink/s3"
	"github.com/stratusflow/stratus/internal/sink/sinktest"
)

// fakeS3 returns a client on an in-process gofakes3 server (path-style).
func fakeS3(t *testing.T) *awss3.Client {
	t.Helper()
	srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
	t.Cleanup(srv.Close)
	cfg := aws.Config{
		Region:       awstest.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
	}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) { o.UsePathStyle = true })
}

// motoS3 returns a client on the shared moto server (path-style).
func motoS3(t *testing.T) *awss3.Client {
	t.Helper()
	return awss3.NewFromConfig(awstest.Moto(t).Config(), func(o *awss3.Options) { o.UsePathStyle = true })
}

var bucketSeq atomic.Int64

// newBucket creates a bucket with a name unique to this test binary run.
func newBucket(t *testing.T, c *awss3.Client) string {
	t.Helper()
	name := fmt.Sprintf("sink-%d-%d", time.Now().UnixNano()%1e9, bucketSeq.Add(1))
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("CreateBucket %s: %v", name, err)
	}
	return name
}

// freshSinks returns a constructor of empty sinks: one bucket, a fresh
// prefix per sink.
func freshSinks(c *awss3.Client, bucket string) func(t *testing.T) sink.Sink {
	var n atomic.Int64
	return func(t *testing.T) sink.Sink {
		s, err := s3sink.New(c, bucket, fmt.Sprintf("conformance/%d", n.Add(1)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// docs/contracts.md § Files are the server's job: the S3 sink passes the one
// conformance suite on an in-process gofakes3 server.
func TestSink_ConformanceOnGofakes3(t *testing.T) {
	c := fakeS3(t)
	sinktest.Run(t, freshSinks(c, newBucket(t, c)))
}

// docs/contracts.md § Files are the server's job: the S3 sink passes the one
// conformance suite on the moto server.
func TestSink_ConformanceOnMoto(t *testing.T) {
	c := motoS3(t)
	sinktest.Run(t, freshSinks(c, newBucket(t, c)))
}

// A run's view of the bucket (sink.ForRun: its work-dir files under
// runs/<run_id>/workdir/) is a sink that passes the same suite, presigned
// URLs included.
func TestSink_RunFilesConformOnGofakes3(t *testing.T) {
	c := fakeS3(t)
	fresh := freshSinks(c, newBucket(t, c))
	sinktest.Run(t, func(t *testing.T) sink.Sink {
		v := sink.ForRun(fresh(t), "r-20250101T000000-abcdef")
		if _, ok := v.(sink.Presigner); !ok {
			t.Fatalf("the run's view of an S3 sink does not presign")
		}
		return v
	})
}

// The suite is the same one the file-system sink runs (internal/sink/fs);
// it runs here too so that a case added to it is seen to pass on both sides
// in one package.
func TestSink_ConformanceOnFileSystem(t *testing.T) {
	sinktest.Run(t, func(t *testing.T) sink.Sink { return fs.New(t.TempDir()) })
}

// Projection files are objects under the configured prefix: object key =
// prefix + sink key, and a prefix without its trailing slash gets one.
func TestSink_ObjectKeyIsPrefixPlusKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := fakeS3(t)
	bucket := newBucket(t, c)
	for _, tc := range []struct{ prefix, want string }{
		{"", "workspace/tasks/T1/ctx/plan.md"},
		{"stratus", "stratus/workspace/tasks/T1/ctx/plan.md"},
		{"deploy/a/", "deploy/a/workspace/tasks/T1/ctx/plan.md"},
	} {
		s, err := s3sink.New(c, bucket, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		key := "workspace/tasks/T1/ctx/plan.md"
		if got := s.ObjectKey(key); got != tc.want {
			t.Errorf("prefix %q: ObjectKey = %q, want %q", tc.prefix, got, tc.want)
		}
		body := []byte("# Plan for prefix " + tc.prefix + "\n")
		if err := s.Put(ctx, key, body); err != nil {
			t.Fatal(err)
		}
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(tc.want)})
		if err != nil {
			t.Fatalf("prefix %q: object %q not stored: %v", tc.prefix, tc.want, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, body) {
			t.Errorf("prefix %q: object %q = %q, want %q", tc.prefix, tc.want, got, body)
		}
	}
	s, _ := s3sink.New(c, bucket, "p")
	for _, key := range sinktest.EscapingKeys {
		if got := s.ObjectKey(key); got != "" {
			t.Errorf("ObjectKey(%q) = %q, want \"\"", key, got)
		}
	}
}

// Two sinks under different prefixes of one bucket do not see each other's
// keys, so deployments (or runs) can share a bucket.
func TestSink_PrefixesIsolateSinks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := fakeS3(t)
	bucket := newBucket(t, c)
	a, _ := s3sink.New(c, bucket, "a")
	b, _ := s3sink.New(c, bucket, "b")
	if err := a.Put(ctx, "k", []byte("A")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(ctx, "k"); stratus.ErrorCode(err) != stratus.ENOTFOUND {
		t.Errorf("b.Get(k) after a.Put(k): %v, want ENOTFOUND", err)
	}
}

// New refuses what would make object keys ambiguous or escape the prefix.
func TestNew_RefusesBadBucketAndPrefix(t *testing.T) {
	t.Parallel()
	c := fakeS3(t)
	if _, err := s3sink.New(c, "", ""); stratus.ErrorCode(err) != stratus.EINVALID || err.(*stratus.Error).Field != "bucket" {
		t.Errorf("New(bucket \"\") = %v, want EINVALID on field bucket", err)
	}
	if _, err := s3sink.New(nil, "b", ""); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("New(nil client) = %v, want EINVALID", err)
	}
	for _, p := range []string{"/abs", "../up", "a//b", "a/../b", `a\b`, "//"} {
		_, err := s3sink.New(c, "b", p)
		if stratus.ErrorCode(err) != stratus.EINVALID || err.(*stratus.Error).Field != "prefix" {
			t.Errorf("New(prefix %q) = %v, want EINVALID on field prefix", p, err)
		}
	}
}

// A missing bucket is a deployment fault, reported as such and naming the
// AWS error, never ENOTFOUND ("no file yet").
func TestSink_MissingBucketIsNotNotFound(t *testing.T) {
	t.Parallel()
	s, _ := s3sink.New(fakeS3(t), "no-such-bucket", "")
	_, err := s.Get(context.Background(), "k")
	if err == nil || stratus.ErrorCode(err) == stratus.ENOTFOUND {
		t.Fatalf("Get on a missing bucket: %v, want a non-ENOTFOUND error", err)
	}
	if !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("error %q does not name the AWS error NoSuchBucket", err)
	}
}

// DESIGN.md § Limits: a body larger than the Lambda payload limit goes
// through a presigned S3 upload — a plain HTTP PUT with no credentials and
// no header but its length, read back with Get.
func TestPresignPutSize_PlainHTTPPutStoresObjectOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := motoS3(t)
	s, err := s3sink.New(c, newBucket(t, c), "stratus")
	if err != nil {
		t.Fatal(err)
	}
	key := "runs/r1/uploads/T1/1/out.md"
	body := bytes.Repeat([]byte("large worker body line\n"), (7<<20)/23) // over the 6 MB Lambda limit
	u, err := s.PresignPutSize(ctx, key, int64(len(body)), 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	// A plain PUT: the signature covers the host and the length, which
	// every HTTP client sends, so the worker sends no header it would have
	// to be told about.
	if q := pu.Query(); q.Get("X-Amz-Expires") != "300" || q.Get("X-Amz-Signature") == "" || q.Get("X-Amz-SignedHeaders") != "content-length;host" {
		t.Errorf("presigned URL query %v: want X-Amz-Expires=300, SignedHeaders=content-length;host and a signature", q)
	}
	if !strings.HasSuffix(pu.Path, "/stratus/"+key) {
		t.Errorf("presigned URL path %q does not end with the object key stratus/%s", pu.Path, key)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT presigned URL: %s\n%s", resp.Status, msg)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) {
		t.Errorf("Get after presigned PUT: %d bytes, want the %d uploaded", len(got), len(body))
	}
}

// docs/security.md § Upload size limits: an upload's URL signs its length, so
// S3 itself refuses a body of any other size (the signed headers, read here;
// refused on the stand-in:
// TestPresignPutSize_OtherLengthRefusedAndNothingStoredOnMoto).
func TestPresignPutSize_SignsTheLength(t *testing.T) {
	t.Parallel()
	c := fakeS3(t) // signing happens locally
	s, err := s3sink.New(c, "b", "stratus")
	if err != nil {
		t.Fatal(err)
	}
	u, err := s.PresignPutSize(context.Background(), "up/k", 1234, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u, "X-Amz-SignedHeaders=content-length%3Bhost") {
		t.Errorf("URL %s does not sign content-length", u)
	}
	if _, err := s.PresignPutSize(context.Background(), "up/k", 0, time.Minute); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("PresignPutSize(size 0) = %v; want EINVALID", err)
	}
}

// PresignPutSize checks its input like Put: an escaping key or an
// out-of-range lifetime is EINVALID naming the field.
func TestPresignPutSize_RefusesBadKeyAndTTL(t *testing.T) {
	t.Parallel()
	s, _ := s3sink.New(fakeS3(t), "b", "")
	ctx := context.Background()
	for _, key := range sinktest.EscapingKeys {
		if _, err := s.PresignPutSize(ctx, key, 1, time.Minute); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("PresignPutSize(%q): %v, want EINVALID", key, err)
		}
	}
	for _, ttl := range []time.Duration{0, -time.Second, s3sink.MaxPresignTTL + time.Second} {
		_, err := s.PresignPutSize(ctx, "k", 1, ttl)
		if stratus.ErrorCode(err) != stratus.EINVALID || err.(*stratus.Error).Field != "ttl" {
			t.Errorf("PresignPutSize(ttl %v) = %v, want EINVALID on field ttl", ttl, err)
		}
	}
	if _, err := s.PresignPutSize(ctx, "k", 1, s3sink.MaxPresignTTL); err != nil {
		t.Errorf("PresignPutSize(ttl MaxPresignTTL) = %v, want a URL", err)
	}
}

// A presigned GET reads an object with a plain HTTP GET and
// no credentials (how a worker fetches its run's bundles); the same key
// and lifetime rules as PresignPutSize.
func TestPresignGet_PlainHTTPGetReadsObjectOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := motoS3(t)
	s, err := s3sink.New(c, newBucket(t, c), "stratus")
	if err != nil {
		t.Fatal(err)
	}
	key := "runs/r1/workspace/base.bundle"
	body := []byte("# v2 git bundle\nnot really\n")
	if err := s.Put(ctx, key, body); err != nil {
		t.Fatal(err)
	}
	u, err := s.PresignGet(ctx, key, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, body) {
		t.Errorf("GET the presigned URL: %d %q, want 200 %q", resp.StatusCode, got, body)
	}
	for _, key := range sinktest.EscapingKeys {
		if _, err := s.PresignGet(ctx, key, time.Minute); stratus.ErrorCode(err) != stratus.EINVALID {
			t.Errorf("PresignGet(%q): %v, want EINVALID", key, err)
		}
	}
	if _, err := s.PresignGet(ctx, "k", 0); stratus.ErrorCode(err) != stratus.EINVALID {
		t.Errorf("PresignGet(ttl 0): %v, want EINVALID", err)
	}
}

// docs/security.md § Upload size limits: a URL signed for a body of N
// bytes (PresignPutSize) stores exactly N bytes; S3 refuses a PUT of any
// other length (the signature covers Content-Length) and stores nothing.
// moto checks no presigned signature itself; the project's launcher
// (internal/devstack/moto) checks this one as S3 does.
func TestPresignPutSize_OtherLengthRefusedAndNothingStoredOnMoto(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := motoS3(t)
	s, err := s3sink.New(c, newBucket(t, c), "stratus")
	if err != nil {
		t.Fatal(err)
	}
	put := func(u string, body []byte) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(msg)
	}
	const size = 4096
	for _, tc := range []struct {
		name string
		n    int
	}{{"larger", size + 1}, {"much larger", 3 * size}, {"smaller", size - 1}} {
		key := "runs/r1/workspace/T1.a1.bundle." + strings.ReplaceAll(tc.name, " ", "-")
		u, err := s.PresignPutSize(ctx, key, size, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if code, msg := put(u, bytes.Repeat([]byte("x"), tc.n)); code != http.StatusForbidden || !strings.Contains(msg, "SignatureDoesNotMatch") {
			t.Errorf("%s: PUT of %d bytes to a URL signed for %d: %d %s; want 403 SignatureDoesNotMatch", tc.name, tc.n, size, code, msg)
		}
		if _, err := s.Get(ctx, key); stratus.ErrorCode(err) != stratus.ENOTFOUND {
			t.Errorf("%s: after the refused PUT, Get = %v; want ENOTFOUND (nothing stored)", tc.name, err)
		}
		// The same URL takes the body of the length it was signed for.
		body := bytes.Repeat([]byte("y"), size)
		if code, msg := put(u, body); code != http.StatusOK {
			t.Fatalf("%s: PUT of the signed %d bytes: %d %s", tc.name, size, code, msg)
		}
		if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, body) {
			t.Errorf("%s: Get after the signed PUT: %d bytes, %v; want the %d put", tc.name, len(got), err, size)
		}
	}
}

// A run's view presigns the run's own objects: a URL for a work-dir key
// addresses runs/<run_id>/workdir/<key> under the prefix, and a plain GET
// of it reads that run's bytes, not another run's of the same key.
func TestSink_RunFilesPresignTheRunsObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := motoS3(t)
	s, err := s3sink.New(c, newBucket(t, c), "stratus")
	if err != nil {
		t.Fatal(err)
	}
	const key = "workspace/tasks/T1/ctx/plan.md"
	for _, run := range []string{"r-a", "r-b"} {
		if err := sink.ForRun(s, run).Put(ctx, key, []byte("plan of "+run)); err != nil {
			t.Fatal(err)
		}
	}
	u, err := sink.ForRun(s, "r-a").(sink.Presigner).PresignGet(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if pu, _ := url.Parse(u); pu == nil || !strings.HasSuffix(pu.Path, "/stratus/runs/r-a/workdir/"+key) {
		t.Errorf("presigned URL %s; want the object stratus/runs/r-a/workdir/%s", u, key)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "plan of r-a" {
		t.Errorf("GET presigned URL: %s %q; want run r-a's plan", resp.Status, b)
	}
}
