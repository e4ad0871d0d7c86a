// Package runenv freezes a run's environment into a sink and loads it back
// where no work dir exists: on AWS the dispatch and worker-API Lambdas need
// the flow YAML, its role files, config.yaml, the task file and the tools
// that in embedded mode come from DIR/.stratus (worc configuration.md:
// prompts and tools are frozen per task; docs/contracts.md § Prompt templates
// paths resolve against the flows dir).
//
// Freeze writes the bundle under runs/<run_id>/bundle/ in a sink.Sink
// (the S3 sink on AWS, any sink in tests):
//
//	runs/<run_id>/bundle/config.yaml      config.yaml's bytes
//	runs/<run_id>/bundle/task/<name>      the task file, its base name kept
//	runs/<run_id>/bundle/flows/<path>     every regular file of the flows dir
//	runs/<run_id>/bundle/tools/<path>     every regular file of DIR/.stratus/tools
//	runs/<run_id>/bundle/manifest.json    written last: the list of files with
//	                                      sizes, SHA-256 digests and exec bits
//
// The whole flows dir is frozen, not only the files one flow names, so
// every role_file path (node role files, supervisor role files) resolves
// exactly as it did on the operator's disk. The manifest is written last,
// so a bundle without one is incomplete and is not loaded.
//
// Load reads the manifest and the files back, checks every digest, and
// materializes them into a local directory (Lambda's /tmp) laid out as
// DIR/.stratus is: the returned worker.RunEnv's FlowDir is that
// directory's flows/ and its ToolsDir that directory's tools/, so the
// worker reads role files and runs tools from the frozen copy through the
// same code path as in embedded mode (which freezes into DIR/.stratus/runs/
// through the fs sink and loads the same way). A Cache keeps the loaded bundles of
// the last few runs, keyed by run id: a bundle never changes once frozen.
//
// It does not validate the flow (flow.Validate, runcheck.CheckRun: the
// caller does that before freezing), does not run tools, and does not
// delete bundles (the bucket's lifecycle rules do).
package runenv
