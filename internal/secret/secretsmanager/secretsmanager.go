package secretsmanager

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/smithy-go"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/secret"
)

// GetSecretValueAPI is the one call a Source makes; *secretsmanager.Client
// implements it.
type GetSecretValueAPI interface {
	GetSecretValue(ctx context.Context, in *sm.GetSecretValueInput, opts ...func(*sm.Options)) (*sm.GetSecretValueOutput, error)
}

// CreateSecretAPI is the one call CreateKeySecret makes;
// *secretsmanager.Client implements it.
type CreateSecretAPI interface {
	CreateSecret(ctx context.Context, in *sm.CreateSecretInput, opts ...func(*sm.Options)) (*sm.CreateSecretOutput, error)
}

// Source reads the key from one secret and caches it once read.
type Source struct {
	client GetSecretValueAPI
	id     string

	mu  sync.Mutex
	key []byte // nil until the first successful Key
}

var _ secret.Source = (*Source)(nil)

// New returns a Source on the secret secretID (a name or an ARN); nothing
// is read until Key.
func New(client GetSecretValueAPI, secretID string) *Source {
	return &Source{client: client, id: secretID}
}

// SecretID returns the secret's name or ARN as given to New.
func (s *Source) SecretID() string { return s.id }

// Key returns the secret's key: the first call reads the secret's current
// version, later calls return a copy of what it read. A failed read is not
// cached. Errors: EINVALID (Field "secret_id") for an empty id, a secret
// with neither value, a SecretString that is not base64, or a key shorter
// than secret.MinKeyBytes; ENOTFOUND for a secret that does not exist
// (ResourceNotFoundException); otherwise the AWS error, wrapped and named
// (the SDK's retryer has already retried throttling with jittered backoff).
func (s *Source) Key(ctx context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil {
		key, err := s.fetch(ctx)
		if err != nil {
			return nil, err
		}
		s.key = key
	}
	return append([]byte(nil), s.key...), nil
}

// Versions reads the secret again, uncached: its current key and, when
// the secret has one (it was rotated), its previous key (AWSPREVIOUS;
// nil when there is none). A process verifying tokens during a rotation
// holds both. Errors: as Key's.
func (s *Source) Versions(ctx context.Context) (current, previous []byte, err error) {
	current, err = s.fetchStage(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	previous, err = s.fetchStage(ctx, "AWSPREVIOUS")
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return current, nil, nil
	}
	return current, previous, err
}

func (s *Source) fetch(ctx context.Context) ([]byte, error) { return s.fetchStage(ctx, "") }

// fetchStage reads the version at stage ("" = AWSCURRENT).
func (s *Source) fetchStage(ctx context.Context, stage string) ([]byte, error) {
	if s.id == "" {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "secret_id", "the HMAC key secret id is empty; valid: the secret's name or ARN")
	}
	in := &sm.GetSecretValueInput{SecretId: aws.String(s.id)}
	if stage != "" {
		in.VersionStage = aws.String(stage)
	}
	out, err := s.client.GetSecretValue(ctx, in)
	if err != nil {
		var nf *types.ResourceNotFoundException
		if errors.As(err, &nf) {
			return nil, stratus.FieldErrorf(stratus.ENOTFOUND, "secret_id", "HMAC key secret %q does not exist (AWS ResourceNotFoundException)", s.id)
		}
		var api smithy.APIError
		if errors.As(err, &api) {
			return nil, fmt.Errorf("read HMAC key secret %q: AWS error %s: %w", s.id, api.ErrorCode(), err)
		}
		return nil, fmt.Errorf("read HMAC key secret %q: %w", s.id, err)
	}
	var key []byte
	switch {
	case out.SecretBinary != nil:
		key = out.SecretBinary
	case out.SecretString != nil:
		str := strings.TrimSpace(*out.SecretString)
		key, err = base64.StdEncoding.DecodeString(str)
		if err != nil {
			key, err = base64.RawStdEncoding.DecodeString(str)
		}
		if err != nil {
			return nil, stratus.FieldErrorf(stratus.EINVALID, "secret_id",
				"HMAC key secret %q: SecretString is not standard base64 (%v); valid: SecretBinary with the key, or SecretString with the key in base64", s.id, err)
		}
	default:
		return nil, stratus.FieldErrorf(stratus.EINVALID, "secret_id", "HMAC key secret %q has neither SecretBinary nor SecretString", s.id)
	}
	if err := secret.CheckKey(key, fmt.Sprintf("in secret %q", s.id)); err != nil {
		return nil, err
	}
	return key, nil
}

// CreateKeySecret creates the secret name holding a fresh 32-byte random
// key as base64 SecretString and returns the secret's ARN. It is for tests
// and for stratus's own setup on moto or LocalStack; on AWS template.yaml
// creates the secret. Errors: ECONFLICT when a secret of that name exists
// (ResourceExistsException); otherwise the AWS error, wrapped and named.
func CreateKeySecret(ctx context.Context, client CreateSecretAPI, name string) (string, error) {
	key := make([]byte, secret.MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	out, err := client.CreateSecret(ctx, &sm.CreateSecretInput{
		Name:         aws.String(name),
		Description:  aws.String("Stratus HMAC key for worker capability tokens (base64)"),
		SecretString: aws.String(base64.StdEncoding.EncodeToString(key)),
	})
	if err != nil {
		var exists *types.ResourceExistsException
		if errors.As(err, &exists) {
			return "", stratus.FieldErrorf(stratus.ECONFLICT, "name", "HMAC key secret %q already exists (AWS ResourceExistsException)", name)
		}
		var api smithy.APIError
		if errors.As(err, &api) {
			return "", fmt.Errorf("create HMAC key secret %q: AWS error %s: %w", name, api.ErrorCode(), err)
		}
		return "", fmt.Errorf("create HMAC key secret %q: %w", name, err)
	}
	return aws.ToString(out.ARN), nil
}
