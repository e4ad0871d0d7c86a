package workspace

import "github.com/stratusflow/stratus/internal/sink"

// Advance is a proposed move of a run's workspace head, as the worker API
// checks it before the store records it (docs/security.md § Workspace
// commits): the bundle an attempt uploaded must be a step bundle the
// workers can fetch, carrying To, To must descend from From, and every
// commit it brings must pass the workspace commit rules. workspace/bundlecheck checks one without git.
type Advance struct {
	// Sink holds Bundles.
	Sink sink.Sink
	// Bundles are the sink keys of the run's bundles, base first and then
	// each step's in order: the bundles that hold From.
	Bundles []string
	// Upload is the uploaded bundle's content, read once by the caller:
	// what is checked is what the caller keeps.
	Upload []byte
	// From is the run's head; To the commit Upload brings on top of it.
	// Both are 40 lowercase hex digits.
	From, To string
	// MaxBytes caps one bundle of Bundles, bytes (a larger one is
	// ETOOLARGE), and, times InflateFactor, what the step bundles may
	// inflate to. 0 = DefaultMaxBytes.
	MaxBytes int64
	// Exclude is the run's exclude list (stratus.Workspace.Exclude, the
	// state dir and the ctx dir first): TreeCheck.Exclude of every commit
	// checked.
	Exclude []string
}

// InflateFactor bounds what the objects of a run's step bundles may
// inflate to: InflateFactor × Advance.MaxBytes bytes, the objects' own
// sizes and what their deltas rebuild, counted before anything is
// written.
const InflateFactor = 4

// BundleReadMax is how many bytes of one bundle a reader takes for a cap
// of maxBytes (0 = DefaultMaxBytes): the cap counts a snapshot's file
// bytes, and git's framing and zlib add a little to incompressible ones.
func BundleReadMax(maxBytes int64) int64 {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return maxBytes + maxBytes/16 + 1<<20
}
