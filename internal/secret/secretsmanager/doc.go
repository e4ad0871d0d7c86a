// Package secretsmanager is the AWS implementation of secret.Source: the
// HMAC key is one AWS Secrets Manager secret (template.yaml's HMAC key
// secret, DESIGN.md § Layout), read with GetSecretValue and cached for the
// life of the Source — one call per Lambda cold start. A key replaced in
// Secrets Manager is seen by new Sources (new Lambda instances) only.
//
// The secret holds the key either as SecretBinary (the raw bytes) or as
// SecretString in standard base64, padded or not. A CloudFormation
// GenerateSecretString with ExcludePunctuation and a PasswordLength that is
// a multiple of 4 (64 gives a 48-byte key) produces a valid one.
// CreateKeySecret makes such a secret for tests and for stratus itself.
//
// It does not create the secret on demand (a missing one is ENOTFOUND) and
// does not rotate it; Versions reads the current and the previous key of a
// rotated secret, which a process verifying tokens holds both of while
// the rotation settles.
package secretsmanager
