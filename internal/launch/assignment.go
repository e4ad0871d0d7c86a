package launch

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
)

// Assignment is one step given to a warm runner pool
// (README.md § Warm runners (pool mode)): what RunTask's environment
// overrides carry for a cold worker (the API URL, the one-time bootstrap
// value, the task id), sent as a queue message to the pool of the node's
// network profile. A pooled runner runs it exactly as a cold runner runs its
// environment.
type Assignment struct {
	V             int    `json:"v"`       // AssignmentVersion
	APIURL        string `json:"api_url"` // the worker API's base URL
	Handle        string `json:"handle"`  // the one-time bootstrap value ("wb-…"): the first runner to exchange it owns the step
	TaskID        string `json:"task_id"`
	Attempt       int    `json:"attempt"`
	NetworkAccess bool   `json:"network_access"`
	SentAtMS      int64  `json:"sent_at_ms"` // when dispatch sent it, Unix ms: the pickup latency's start
}

// AssignmentVersion is the Assignment format this build writes and reads.
const AssignmentVersion = 1

// DecodeAssignment reads a queue message body. Errors: *stratus.Error
// EINVALID naming the field for a body that is not an Assignment of
// AssignmentVersion with an http(s) api_url, a handle and a task id.
func DecodeAssignment(body []byte) (Assignment, error) {
	var a Assignment
	if err := json.Unmarshal(body, &a); err != nil {
		return a, stratus.FieldErrorf(stratus.EINVALID, "body", "an assignment is a JSON object {v, api_url, handle, task_id, attempt, network_access, sent_at_ms}: %v", err)
	}
	switch {
	case a.V != AssignmentVersion:
		return a, stratus.FieldErrorf(stratus.EINVALID, "v", "assignment version %d; this runner reads version %d", a.V, AssignmentVersion)
	case !strings.HasPrefix(a.APIURL, "https://") && !strings.HasPrefix(a.APIURL, "http://"):
		return a, stratus.FieldErrorf(stratus.EINVALID, "api_url", "%q is not an http(s) URL", a.APIURL)
	case a.Handle == "":
		return a, stratus.FieldErrorf(stratus.EINVALID, "handle", "empty; want the step's one-time bootstrap value")
	case a.TaskID == "":
		return a, stratus.FieldErrorf(stratus.EINVALID, "task_id", "empty; want the dispatch task id")
	}
	return a, nil
}

// Encode returns a's message body (a with V set to AssignmentVersion).
func (a Assignment) Encode() []byte {
	a.V = AssignmentVersion
	b, err := json.Marshal(a)
	if err != nil {
		panic(fmt.Sprintf("launch: encode an assignment: %v", err)) // strings, ints and a bool always encode
	}
	return b
}
