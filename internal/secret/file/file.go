package file

import (
	"context"

	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/secret"
)

// Source reads (or creates) the key file at one path.
type Source struct {
	path string
}

var _ secret.Source = (*Source)(nil)

// New returns a Source on the key file at path; nothing is read or created
// until Key.
func New(path string) *Source { return &Source{path: path} }

// Path returns the key file's path.
func (s *Source) Path() string { return s.path }

// Key returns the key stored at Path, creating a 32-byte random key with
// mode 0600 when no file exists. Errors are captoken.LoadOrCreateKey's:
// EINVALID for a key file readable by group or others or shorter than
// secret.MinKeyBytes; a wrapped I/O error otherwise.
func (s *Source) Key(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := captoken.LoadOrCreateKey(s.path)
	if err != nil {
		return nil, err
	}
	if err := secret.CheckKey(key, s.path); err != nil {
		return nil, err
	}
	return key, nil
}
