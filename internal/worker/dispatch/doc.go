// Package dispatch is the operation a compiled Task state starts: its
// dispatch message names a node, and the step is created (numbered by its
// run's counter), admitted or skipped by the node's `when` facts, capped
// by the run's cost and token caps, parked where the node is a human gate,
// and otherwise given its attempt, its role file rendered, its handle
// minted and its worker launched; a stop message ends a node's state
// (docs/architecture.md § The path of one step; docs/contracts.md §
// Input is a fetch, § Template variables).
package dispatch
