// Package rendersize is the worker API's render-size operation: GET
// /v1/agents/{name}/render-size answers the last observed size of an
// agent's baked system prompt, to a worker of that agent only
// (docs/contracts.md § Routes; docs/security.md § Who is trusted).
package rendersize
