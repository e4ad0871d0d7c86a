// Package statedir owns the file modes of the embedded state dir,
// DIR/.stratus/ (docs/security.md § Files under .stratus). It holds the
// HMAC key that signs step handles, the SQLite store, the runs' logs (the
// prompts and the engines' outputs), their bundles and workspaces: every
// directory in it is 0700 and every file 0600 (0700 for an executable), so
// that no other local user reads or changes any of it.
//
// It owns the modes (DirPerm, FilePerm, ExecPerm) the code that writes
// there creates with, and Secure, which every command that writes the
// state dir calls first: it makes the dir 0700 and tightens what an older
// stratus, or the operator's editor, left open.
//
// It also owns which of its entries the operator commits (Committed: the
// inputs) and the .gitignore that keeps the rest out of git
// (WriteGitIgnore; README § Workspaces).
//
// It does not decide what goes where in the state dir (internal/orchestrator
// and the packages it wires do), and it never touches the work dir around
// it: the ctx files there are the user's project files.
package statedir
