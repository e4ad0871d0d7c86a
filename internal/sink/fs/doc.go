// Package fs is the local-disk implementation of sink.Sink: each key is a
// file under one root directory
// (docs/contracts.md § Files are the server's job — the ctx-dir files the
// next step Reads).
//
// It owns the key → path mapping (Path) and atomic writes: a Put writes a
// temporary file beside the target and renames it into place, so a reader
// never sees a half-written file. Directories are created 0755, files
// 0644, but 0700 and 0600 under the state dir (Private, OwnerOnly:
// docs/security.md § Files under .stratus). Every file operation goes through an os.Root, so neither a key nor
// a symbolic link inside the root can reach outside it.
//
// It does not decide placement, validate part names or wrap front matter
// (internal/projection), and it does not fsync: the files are projections
// of what the store already holds (the output tail keeps the bytes), and an
// fsync per file was a third of the embedded per-step overhead (about 3 ms
// of ~21 ms each, measured with the overhead benchmark of the day). A reader
// never sees a half-written file; a power loss may lose the latest Put.
package fs
