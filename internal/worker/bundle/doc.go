// Package bundle is the worker API's workspace operation, for a run whose
// repository travels with it: a step's workers read and write the run's
// git bundles (GET|PUT /v1/worker/workspace/blob, POST
// /v1/worker/workspace/upload) and move its head (POST
// /v1/worker/workspace/head), each move checked before it is recorded
// (docs/security.md § Workspace commits; docs/architecture.md §
// Workspaces).
package bundle
