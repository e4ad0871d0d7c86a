package secretsmanager_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/awstest"
	"github.com/stratusflow/stratus/internal/secret"
	"github.com/stratusflow/stratus/internal/secret/secretsmanager"
	"github.com/stratusflow/stratus/internal/secret/secrettest"
)

func client(t *testing.T) *sm.Client {
	t.Helper()
	return sm.NewFromConfig(awstest.Moto(t).Config())
}

var seq atomic.Int64

// uniqueName is a secret name no other test of this binary run uses.
func uniqueName(t *testing.T) string {
	return fmt.Sprintf("stratus/test/%s/%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), time.Now().UnixNano(), seq.Add(1))
}

// docs/contracts.md § Bearer authentication: a Secrets Manager secret passes
// the one key-source conformance suite (on moto), so the dispatch and
// worker-API Lambdas sign and verify with one key.
func TestSource_ConformanceOnMoto(t *testing.T) {
	c := client(t)
	secrettest.Run(t, func(t *testing.T) func() secret.Source {
		arn, err := secretsmanager.CreateKeySecret(context.Background(), c, uniqueName(t))
		if err != nil {
			t.Fatal(err)
		}
		return func() secret.Source { return secretsmanager.New(c, arn) }
	})
}

func createSecret(t *testing.T, c *sm.Client, in *sm.CreateSecretInput) string {
	t.Helper()
	in.Name = aws.String(uniqueName(t))
	if _, err := c.CreateSecret(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	return *in.Name
}

// The key is SecretBinary verbatim or SecretString in standard base64
// (padded or not, surrounding whitespace ignored).
func TestSource_ReadsSecretBinaryOrBase64SecretString(t *testing.T) {
	t.Parallel()
	c := client(t)
	key := bytes.Repeat([]byte{0, 0xff, 'k', 0x80}, 12) // 48 bytes
	for _, tc := range []struct {
		name string
		in   *sm.CreateSecretInput
	}{
		{"binary", &sm.CreateSecretInput{SecretBinary: key}},
		{"base64", &sm.CreateSecretInput{SecretString: aws.String(base64.StdEncoding.EncodeToString(key))}},
		{"base64 unpadded", &sm.CreateSecretInput{SecretString: aws.String(base64.RawStdEncoding.EncodeToString(key[:34]))}},
		{"base64 with newline", &sm.CreateSecretInput{SecretString: aws.String(base64.StdEncoding.EncodeToString(key) + "\n")}},
	} {
		id := createSecret(t, c, tc.in)
		got, err := secretsmanager.New(c, id).Key(context.Background())
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		want := key
		if tc.name == "base64 unpadded" {
			want = key[:34]
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: Key = %x, want %x", tc.name, got, want)
		}
	}
}

// A CloudFormation GenerateSecretString of 64 letters and digits is valid
// base64 of a 48-byte key (the recipe the package doc gives template.yaml).
func TestSource_GeneratedAlphanumericSecretIsAKey(t *testing.T) {
	t.Parallel()
	c := client(t)
	pw := strings.Repeat("aZ09", 16)
	id := createSecret(t, c, &sm.CreateSecretInput{SecretString: aws.String(pw)})
	got, err := secretsmanager.New(c, id).Key(context.Background())
	if err != nil || len(got) != 48 {
		t.Errorf("Key of a 64-character alphanumeric secret = %d bytes, %v; want 48 bytes", len(got), err)
	}
}

// Bad secrets are refused with the secret named: not base64, too short,
// missing, or an empty id.
func TestSource_RefusesBadOrMissingSecrets(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	notB64 := createSecret(t, c, &sm.CreateSecretInput{SecretString: aws.String("not base64 at all!")})
	short := createSecret(t, c, &sm.CreateSecretInput{SecretBinary: []byte("only sixteen byt")})
	missing := uniqueName(t)
	for _, tc := range []struct {
		id, code string
	}{
		{notB64, stratus.EINVALID},
		{short, stratus.EINVALID},
		{missing, stratus.ENOTFOUND},
		{"", stratus.EINVALID},
	} {
		_, err := secretsmanager.New(c, tc.id).Key(ctx)
		if stratus.ErrorCode(err) != tc.code {
			t.Errorf("Key(%q) = %v, want %s", tc.id, err, tc.code)
			continue
		}
		if tc.id != "" && !strings.Contains(err.Error(), tc.id) {
			t.Errorf("Key(%q) error %q does not name the secret", tc.id, err)
		}
	}
}

// counting wraps a client and counts GetSecretValue calls; fail makes the
// next calls fail.
type counting struct {
	secretsmanager.GetSecretValueAPI
	calls atomic.Int64
	fail  atomic.Bool
}

func (c *counting) GetSecretValue(ctx context.Context, in *sm.GetSecretValueInput, opts ...func(*sm.Options)) (*sm.GetSecretValueOutput, error) {
	c.calls.Add(1)
	if c.fail.Load() {
		return nil, fmt.Errorf("injected failure")
	}
	return c.GetSecretValueAPI.GetSecretValue(ctx, in, opts...)
}

// The key is read once per Source (one GetSecretValue per Lambda cold
// start); a failed read is not cached.
func TestSource_CachesTheKeyNotFailures(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	arn := keySecret(t, c)
	cc := &counting{GetSecretValueAPI: c}
	s := secretsmanager.New(cc, arn)
	cc.fail.Store(true)
	if _, err := s.Key(ctx); err == nil {
		t.Fatal("Key with a failing client: nil error")
	}
	cc.fail.Store(false)
	first, err := s.Key(ctx)
	if err != nil {
		t.Fatalf("Key after a failed read: %v (was the failure cached?)", err)
	}
	for range 5 {
		if k, err := s.Key(ctx); err != nil || !bytes.Equal(k, first) {
			t.Fatalf("cached Key = %x, %v", k, err)
		}
	}
	if n := cc.calls.Load(); n != 2 {
		t.Errorf("GetSecretValue called %d times, want 2 (one failed, one read then cached)", n)
	}
}

// CreateKeySecret refuses to replace an existing secret: a second key would
// orphan every token minted under the first.
func TestCreateKeySecret_ExistingNameIsConflict(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	name := uniqueName(t)
	arn, err := secretsmanager.CreateKeySecret(ctx, c, name)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(arn, "arn:aws:secretsmanager:") {
		t.Errorf("CreateKeySecret returned %q, want the secret's ARN", arn)
	}
	before, _ := secretsmanager.New(c, name).Key(ctx)
	if _, err := secretsmanager.CreateKeySecret(ctx, c, name); stratus.ErrorCode(err) != stratus.ECONFLICT {
		t.Errorf("second CreateKeySecret(%q) = %v, want ECONFLICT", name, err)
	}
	if after, _ := secretsmanager.New(c, name).Key(ctx); !bytes.Equal(before, after) {
		t.Errorf("the key changed after a refused second CreateKeySecret")
	}
}

// A rotated secret has a current and a previous key; Versions reads both
// (uncached), a secret never rotated has no previous.
func TestSource_VersionsAfterARotation(t *testing.T) {
	t.Parallel()
	c := client(t)
	ctx := context.Background()
	arn := keySecret(t, c)
	s := secretsmanager.New(c, arn)
	first, prev, err := s.Versions(ctx)
	if err != nil || len(first) < 32 || prev != nil {
		t.Fatalf("Versions before a rotation = %x, %x, %v; want the key and no previous", first, prev, err)
	}
	next := bytes.Repeat([]byte{7}, 32)
	if _, err := c.PutSecretValue(ctx, &sm.PutSecretValueInput{SecretId: aws.String(arn), SecretString: aws.String(base64.StdEncoding.EncodeToString(next))}); err != nil {
		t.Fatal(err)
	}
	cur, prev, err := s.Versions(ctx)
	if err != nil || !bytes.Equal(cur, next) || !bytes.Equal(prev, first) {
		t.Errorf("Versions after a rotation = %x, %x, %v; want the new key, the old one previous", cur, prev, err)
	}
}

// keySecret creates a fresh key secret and returns its ARN.
func keySecret(t *testing.T, c secretsmanager.CreateSecretAPI) string {
	t.Helper()
	arn, err := secretsmanager.CreateKeySecret(context.Background(), c, uniqueName(t))
	if err != nil {
		t.Fatal(err)
	}
	return arn
}
