// Package publishing is a shared layer of the worker operations: what a
// publish node does beyond writing the run's summary — whether it pushes
// the task branch and opens a pull request (Plan), the runner's
// nodeexec.PublishSpec for it (Spec), and the run's record of what the
// runner did (Record) (docs/architecture.md § Publishing; worc
// configuration.md § `git`). The runner does the git and host work; this
// layer never holds a credential. The operations and the other layers use
// it; it imports none of them.
package publishing
