// Package gate is a shared layer of the worker operations: parking a step
// at a human gate — a hitl node, or an agent whose report asks a human —
// with its pending request recorded (the node's question rendered with the
// step's variables), a progress line saying how to answer, and its
// deadline armed; the reply that completes it is the hitl operation's
// (docs/contracts.md § Flows and task types, § Template variables; README.md
// § A human gate, step by step). Dispatch uses it.
package gate
