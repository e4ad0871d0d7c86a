// Package attempt is a shared layer of the worker operations: an
// attempt's life — created with its prompt rendered, its bootstrap value
// minted and its worker launched (heartbeating the Task state while the
// launch waits), rekicked, and ended when its worker exits or its ECS task
// stops without a result, when its output did not persist, or by the retry
// policy (retry, provider hop, park) — and the step_ended event it emits
// (docs/architecture.md § The path of one step; docs/contracts.md §
// Terminal classification; docs/security.md § Handles, § Output that did
// not persist; README.md § Transient failures). Dispatch, submit and the
// supervisor layer use it; it imports no operation.
package attempt
