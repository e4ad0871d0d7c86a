package stratus

import _ "embed"

// OpenAPI is openapi.yaml, the worker API's contract, as the worker API
// serves it at GET /v1/openapi.yaml (README.md § The worker API).
//
//go:embed openapi.yaml
var OpenAPI []byte
