// Package s3 is the Amazon S3 implementation of sink.Sink (DESIGN.md: "S3
// is the projection sink that materialises each step's output as the files
// the next step reads"; docs/contracts.md § Files are the server's job).
//
// Each sink key is one object in one bucket under a configured prefix:
// object key = prefix + sink key ("stratus/" + "runs/<run_id>/bundle/manifest.json").
// It is sink.RunKeyed: a run's work-dir files (sink.ForRun) are the keys
// "runs/<run_id>/workdir/<key>", so that every object a run writes is
// under runs/<run_id>/ and runs of one task id never share one.
// A PutObject is atomic and the last one wins, which is exactly the
// sink.Sink contract; S3 has no directories, so a key that only prefixes
// other keys is not stored (ENOTFOUND), as on the file-system sink.
//
// It also presigns PUT URLs (PresignPut): DESIGN.md § Limits — API Gateway
// takes 10 MB per request and a synchronous Lambda 6 MB, so a worker body
// larger than that is uploaded by the worker straight to S3 with a
// short-lived URL and then read back through Get.
//
// Addressing follows the client it is given: tests run against moto and
// gofakes3 with path-style addressing (s3.Options.UsePathStyle), AWS uses
// virtual-hosted style. Bodies are sent as rewindable readers with an
// explicit length, so the SDK can sign, checksum and retry them.
//
// It does not create or configure the bucket (template.yaml does: encrypted,
// public access blocked), it does not list or delete keys, and it does not
// interpret the bytes it stores.
package s3
