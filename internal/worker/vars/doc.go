// Package vars is a shared layer of the worker operations: the template
// variables of one node run and the rendering they feed — the role file
// rendered into an attempt's prompt, the baked system text, the exec spec
// and stdin context of a checks or tool node, the subtask variables of a
// decomposition region and the diff snapshot — and the admission of a node
// (`when` facts, a task's nodes.<id>.enabled) before it is dispatched
// (docs/contracts.md § Template variables, § Prompt templates;
// docs/prompt-variables.md § Core variables, § Node outputs). The
// operations and the other layers use it; it imports none of them.
package vars
