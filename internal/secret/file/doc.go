// Package file is the local implementation of secret.Source: the HMAC key
// is a file (DIR/.stratus/hmac.key in embedded mode), created on first use
// with 32 random bytes and mode 0600 by captoken.LoadOrCreateKey
// (docs/contracts.md § Bearer authentication). It does not cache: each Key
// reads the file, which costs microseconds and sees a key replaced on disk.
package file
