package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/sink"
)

// MaxPresignTTL is the longest lifetime of a presigned URL: Signature
// Version 4 query signing allows at most seven days.
const MaxPresignTTL = 7 * 24 * time.Hour

// Sink stores each sink key as the object Prefix()+key in one bucket. It is
// safe for concurrent use (the SDK client is).
type Sink struct {
	client  *awss3.Client
	presign *awss3.PresignClient
	bucket  string
	prefix  string
}

var (
	_ sink.Sink      = (*Sink)(nil)
	_ sink.Presigner = (*Sink)(nil)
	_ sink.RunKeyed  = (*Sink)(nil)
)

// New returns a Sink on bucket whose objects live under prefix. A non-empty
// prefix is a relative slash-separated path (sink.CheckKey's rules) and is
// given a trailing "/" when it lacks one, so "stratus" and "stratus/" both
// store key "a.md" as object "stratus/a.md"; "" stores it as "a.md".
//
// Errors: *stratus.Error EINVALID with Field "bucket" for an empty bucket
// name, Field "prefix" for a prefix that is not a relative path. The bucket
// is not contacted.
func New(client *awss3.Client, bucket, prefix string) (*Sink, error) {
	if client == nil {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "client", "the S3 sink needs an S3 client, got nil")
	}
	if bucket == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "bucket", "the S3 sink needs a bucket name, got \"\"")
	}
	if prefix != "" {
		p := strings.TrimSuffix(prefix, "/")
		if err := sink.CheckKey(p); err != nil {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "prefix",
				"S3 sink prefix %q is not a relative slash-separated path such as \"stratus/\" (%s)", prefix, err.(*stratus.Error).Message)
		}
		prefix = p + "/"
	}
	return &Sink{client: client, presign: awss3.NewPresignClient(client), bucket: bucket, prefix: prefix}, nil
}

// Bucket returns the bucket name.
func (s *Sink) Bucket() string { return s.bucket }

// Prefix returns the object-key prefix: "" or a path ending in "/".
func (s *Sink) Prefix() string { return s.prefix }

// RunKey returns where the sink keeps key of run runID's work dir:
// "runs/<run_id>/workdir/<key>", beside the run's bundle
// (runs/<run_id>/bundle/) and workspace bundles (runs/<run_id>/workspace/),
// so that every object a run writes is under runs/<run_id>/ and two runs
// of one task id never share one (sink.RunKeyed; the bucket's retention
// rule expires runs/).
func (s *Sink) RunKey(runID, key string) string { return "runs/" + runID + "/workdir/" + key }

// ObjectKey returns the S3 object key that sink key maps to (Prefix()+key),
// or "" when key is not a valid sink key (sink.CheckKey).
func (s *Sink) ObjectKey(key string) string {
	if sink.CheckKey(key) != nil {
		return ""
	}
	return s.prefix + key
}

// Put stores body as the object Prefix()+key with one PutObject (atomic;
// the last Put wins). Errors: EINVALID (Field "key") for a key
// sink.CheckKey refuses, before any request; otherwise the AWS error,
// wrapped and named (the SDK's retryer has already retried throttling and
// 5xx answers with jittered backoff).
func (s *Sink) Put(ctx context.Context, key string, body []byte) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &awss3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		Body:          bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return s.mapErr("put", key, err)
	}
	return nil
}

// Get returns the bytes of the object Prefix()+key, verbatim. Errors:
// ENOTFOUND (Field "key") when no such object exists; EINVALID (Field
// "key") for an invalid key, before any request; otherwise the AWS error,
// wrapped and named. A missing bucket is such an error, not ENOTFOUND: it
// is a deployment fault, never "no file yet".
func (s *Sink) Get(ctx context.Context, key string) ([]byte, error) {
	return s.get(ctx, key, -1)
}

// GetMax is Get refusing an object over max bytes (sink.Sink): the
// object's Content-Length is checked before its body is read, and at most
// max+1 bytes are read whatever it says.
func (s *Sink) GetMax(ctx context.Context, key string, max int64) ([]byte, error) {
	return s.get(ctx, key, max)
}

// get is one GetObject of key, read whole (max < 0) or bounded by max.
func (s *Sink) get(ctx context.Context, key string, max int64) ([]byte, error) {
	if err := sink.CheckKey(key); err != nil {
		return nil, err
	}
	out, err := s.client.GetObject(ctx, &awss3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return nil, s.mapErr("get", key, err)
	}
	defer out.Body.Close()
	size := int64(-1)
	if out.ContentLength != nil {
		size = *out.ContentLength
	}
	if max < 0 {
		var buf bytes.Buffer
		if size > 0 {
			buf.Grow(int(size))
		}
		if _, err := io.Copy(&buf, out.Body); err != nil {
			return nil, fmt.Errorf("s3 sink: get %q from s3://%s/%s: read body: %w", key, s.bucket, s.prefix+key, err)
		}
		return buf.Bytes(), nil
	}
	b, err := sink.ReadMax(out.Body, key, size, max)
	if err != nil && stratus.ErrorCode(err) != stratus.ETOOLARGE {
		return nil, fmt.Errorf("s3 sink: get from s3://%s/%s: %w", s.bucket, s.prefix+key, err)
	}
	return b, err
}

// Size returns the length of the object Prefix()+key (HeadObject's
// Content-Length), without reading it: sink.Sink. Errors as Get's.
func (s *Sink) Size(ctx context.Context, key string) (int64, error) {
	if err := sink.CheckKey(key); err != nil {
		return 0, err
	}
	out, err := s.client.HeadObject(ctx, &awss3.HeadObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	})
	if err != nil {
		return 0, s.mapErr("size", key, err)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Delete removes the object Prefix()+key (DeleteObject; S3 answers a
// missing key as deleted). Errors as Put's.
func (s *Sink) Delete(ctx context.Context, key string) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	if _, err := s.client.DeleteObject(ctx, &awss3.DeleteObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	}); err != nil {
		return s.mapErr("delete", key, err)
	}
	return nil
}

// PresignPutSize returns a URL that lets its holder store one body of
// exactly size bytes under key with a plain HTTP PUT (no credentials, no
// header but Content-Length) for ttl; the stored bytes are then read with
// Get(key) like any other. It is how a worker uploads a body larger than
// the worker API accepts (docs/architecture.md § Limits: API Gateway 10 MB,
// Lambda 6 MB) and its step bundle. The URL signs Content-Length
// (X-Amz-SignedHeaders content-length;host), so S3 refuses a PUT of any
// other length (403 SignatureDoesNotMatch) and stores nothing
// (docs/security.md § Upload size limits). The URL is a bearer secret for
// that one object: hand it only to the worker that owns the key. Signing
// happens locally; no request is sent.
//
// Errors: EINVALID with Field "key" for a key sink.CheckKey refuses, Field
// "ttl" for a ttl outside (0, MaxPresignTTL], Field "size" for a size
// below 1.
func (s *Sink) PresignPutSize(ctx context.Context, key string, size int64, ttl time.Duration) (string, error) {
	if err := checkPresign(key, ttl); err != nil {
		return "", err
	}
	if size < 1 {
		return "", stratus.FieldErrorf(stratus.EINVALID, "size", "%d is not a body size; valid: 1 byte or more", size)
	}
	req, err := s.presign.PresignPutObject(ctx, &awss3.PutObjectInput{
		Bucket:        aws.String(s.bucket),
		Key:           aws.String(s.prefix + key),
		ContentLength: aws.Int64(size),
	}, awss3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("s3 sink: presign put %q: %w", key, err)
	}
	return req.URL, nil
}

// PresignGet returns a URL that reads key with a plain GET (no
// credentials) for ttl: sink.Presigner. Errors as PresignPutSize's
// (without "size").
func (s *Sink) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if err := checkPresign(key, ttl); err != nil {
		return "", err
	}
	req, err := s.presign.PresignGetObject(ctx, &awss3.GetObjectInput{
		Bucket: aws.String(s.bucket),
		Key:    aws.String(s.prefix + key),
	}, awss3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("s3 sink: presign get %q: %w", key, err)
	}
	return req.URL, nil
}

// List returns the keys of the objects under Prefix()+dir+"/", sorted
// (ListObjectsV2, every page): sink.Sink.
func (s *Sink) List(ctx context.Context, dir string) ([]string, error) {
	if err := sink.CheckKey(dir); err != nil {
		return nil, err
	}
	var keys []string
	p := awss3.NewListObjectsV2Paginator(s.client, &awss3.ListObjectsV2Input{
		Bucket: aws.String(s.bucket),
		Prefix: aws.String(s.prefix + dir + "/"),
	})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("s3 sink: list %q in s3://%s/%s: %w", dir, s.bucket, s.prefix+dir+"/", err)
		}
		for _, o := range out.Contents {
			keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), s.prefix))
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// checkPresign refuses what no URL is signed for: a key sink.CheckKey
// refuses (Field "key"), a ttl outside (0, MaxPresignTTL] (Field "ttl").
func checkPresign(key string, ttl time.Duration) error {
	if err := sink.CheckKey(key); err != nil {
		return err
	}
	if ttl <= 0 || ttl > MaxPresignTTL {
		return stratus.FieldErrorf(stratus.EINVALID, "ttl",
			"presigned URL lifetime %v is out of range; valid: more than 0 and at most %v", ttl, MaxPresignTTL)
	}
	return nil
}

// mapErr turns an SDK error into the sink's: a missing object is
// ENOTFOUND; anything else keeps the AWS error (its code is in the text)
// wrapped with the operation, key and object.
func (s *Sink) mapErr(op, key string, err error) error {
	var nsk *types.NoSuchKey
	if op == "get" && errors.As(err, &nsk) {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "key", "nothing stored under sink key %q (s3://%s/%s: NoSuchKey)", key, s.bucket, s.prefix+key)
	}
	// HeadObject has no body to name the error: a missing object is a
	// bare 404 (NotFound).
	var nf *types.NotFound
	if op == "size" && (errors.As(err, &nf) || errors.As(err, &nsk)) {
		return stratus.FieldErrorf(stratus.ENOTFOUND, "key", "nothing stored under sink key %q (s3://%s/%s: NotFound)", key, s.bucket, s.prefix+key)
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		return fmt.Errorf("s3 sink: %s %q at s3://%s/%s: AWS error %s: %w", op, key, s.bucket, s.prefix+key, api.ErrorCode(), err)
	}
	return fmt.Errorf("s3 sink: %s %q at s3://%s/%s: %w", op, key, s.bucket, s.prefix+key, err)
}
