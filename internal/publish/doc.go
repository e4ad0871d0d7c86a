// Package publish does the git work of a flow's publish step, the same on
// both runtimes (docs/architecture.md § Publishing): the publisher's work
// (Publish: the run's commits rebuilt on its start, the audit commit, the
// push, the pull request), the push of a branch to the repository's remote
// (Push), exactly once and never by force over another's commits (worc's
// configuration reference § `git`: the orchestrator never force-pushes),
// and merge-task's base merge (MergeBase, CommitMerge).
//
// Push looks before it pushes: a remote branch already at the local head
// is left alone (Pushed.Already: a resumed or re-delivered step), one the
// local head contains is fast-forwarded, one that holds commits the local
// head does not — someone else pushed — is refused as RemoteMoved, naming
// both commits, and nothing is overwritten. Every refusal or failure the
// remote answers is a *PushError with a Kind (RemoteMoved, Rejected, Auth,
// NoRemote, Unreachable, Failed) and a message naming the remote, the
// branch and what to do; nothing local is changed by it, so the run's
// work stays in its branch.
//
// A token for an HTTP(S) remote reaches git through a credential helper
// and the token itself, both set in the environment of the one git child
// that talks to the remote (gitwork.ConfigEnv: never argv, never a file,
// never the remote's URL or .git/config). Errors redact it, and any
// credentials in a URL. Every git runs through gitwork.Run (the caller's
// GIT_* environment dropped) with gitwork.FixedConfig (no operator hooks
// or signing) and never prompts.
//
// It does not choose the branch name, the remote or the policy (the
// server's publishing layer writes them into nodeexec.PublishSpec), speak
// a host's API (package github does), or decide how a failure ends the run
// (submit does, from the result).
package publish
