// Package worker is the facade of the worker service, the server side of
// the worker I/O contract behind the /v1/worker/* routes (docs/contracts.md
// § Worker I/O, § Worker API). New builds a core.Service from a Config and
// wires its Layers (the step_ended hook and a supervisor turn's failure,
// both the supervisor layer's); each method of Service maps one worker-API
// call onto the package of its operation, and the types and constants the
// transports need are named here from where they are defined. It holds no
// rule of its own (docs/architecture.md § The worker API's operations).
//
// The operations, one package each:
//
//   - dispatch: a dispatch message — create the step and its attempt,
//     launch, skip, park or stop a node (Dispatch);
//   - fetch: the prompt payload and the baked system prompt (FetchPrompt,
//     FetchSystem);
//   - artifact: stage one named part, start an upload (Artifact,
//     StageArtifact, NewUpload);
//   - submit: the final body or result — fold, projection, outcome, task
//     completion (Submit, SubmitBody, Result);
//   - stats: the attempt's counters and heartbeat (RecordStats);
//   - degradation: a tool's fallback, on the run record (RecordDegradation);
//   - rendersize: an agent's last system prompt size (RenderSize);
//   - hitl: a human's reply to a waiting gate (Human, AuthorizeOperator);
//   - bundle: a travelling repository's bundles and head (WorkspaceUpload,
//     ReadBlob, WriteBlob, WriteBlobFrom, AdvanceHead).
//
// The shared layers, which import no operation: core (the context,
// credentials and fencing: Authorize, ExchangeBootstrap), resolve (which
// engine a step runs on, and how), upload (a body that travelled by
// upload), vars (template variables and rendering), attempt (an attempt's launch, end and retry:
// Rekick, WorkerTaskStopped), gate (parking a step at a human gate),
// supervise (the supervisor layer's turns and the prompt audit) and verify
// (an evaluator's verdict, for submit).
//
// It is transport-free: internal/httpapi maps HTTP onto it, and the same
// Service runs embedded and behind the workerapi and dispatch Lambdas. It
// does not decide routing (the compiled state machine does) and does not
// run engines (the runner does, internal/contract).
package worker
