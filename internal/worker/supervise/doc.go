// Package supervise is the supervisor layer: after each flow step ends it
// writes the prompt audit record and decides whether the step earns an
// observation turn (a KindObserve dispatch message on Service.Queue, off
// the request that ended the step); at the publish node it runs the finalize
// turn whose prose becomes the run's summary. Its turns are attempts of
// synthetic steps run through the ordinary worker path, advisory by
// construction: a turn that fails never fails the run (docs/contracts.md §
// The supervisor, § What the supervisor layer does, § The summary
// artifacts, § Prompt audit). The facade wires it into core.Layers.
package supervise
