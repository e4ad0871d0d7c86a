// Package private owns the checks that a file or directory is this
// process's user's alone, for the paths Stratus shares a machine over
// with other local users (docs/security.md § Who is trusted: a
// predictable name in the temporary directory can be taken first by
// anyone). It implements:
//
//   - CheckDir, MakeDir: a directory only this user may enter — a real
//     directory (not a symbolic link), owned by the effective uid, with no
//     group or other permission bits (docs/security.md § The host socket,
//     § Files under .stratus);
//   - CreateIn: a new file in such a directory, created exclusively, mode
//     0600, never through a symbolic link (§ Files under .stratus);
//   - ReadFile: a secret file the user gives, owned by them, readable by
//     them alone, in a directory no one else may write, as ssh requires
//     of its key files (§ The run viewer's secret).
//
// It does not decide where those paths are (the host, the runner and the
// viewer do), and it never changes the mode or owner of what it finds:
// what fails a check is refused, with an error naming the path and the
// rule. It is for Unix systems, where a file's owner is known.
package private
