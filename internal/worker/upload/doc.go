// Package upload resolves the body of a request that may travel by
// presigned upload instead of inline: the upload key is checked (signed by
// this service for this attempt, unexpired, not over its size), the body
// read from the sink, and the upload dropped once the request settled;
// at most MaxPendingUploads wait per attempt (docs/security.md § Upload
// size limits; docs/contracts.md § Request and response bodies). The
// artifact, submit and bundle operations take their bodies through it.
package upload
