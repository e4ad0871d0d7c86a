// Package secret is where the HMAC key that signs worker capability tokens
// comes from (docs/contracts.md § Bearer authentication; DESIGN.md § Layout:
// template.yaml holds "the secret for the HMAC key"). Whoever mints a token
// (dispatch) and whoever verifies one (the worker API) must read the same
// key: on a laptop that is a file in the work dir, on AWS a Secrets Manager
// secret both Lambdas read.
//
// It owns the Source interface and the key rule every source enforces
// (CheckKey: at least MinKeyBytes bytes). Implementations live in
// subpackages: file (captoken.LoadOrCreateKey's 0600 key file) and
// secretsmanager (GetSecretValue of one secret id, cached). secrettest is
// the conformance suite both pass.
//
// It does not mint or verify tokens (internal/captoken) and does not rotate
// keys: a token minted under a replaced key stops verifying.
package secret
