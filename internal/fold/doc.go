// Package fold turns what a worker submitted into the value the flow sees
// (docs/contracts.md § The fold and submit_format, and the staged-parts fold
// of § Output is a tool call and § The in-process twin).
//
// It owns the three submit_format modes: the default lenient fold (a JSON
// object or array — bare, or as one whole fenced block — folds as the
// structure; scalars, prose and anything unparseable stay the original
// string), "json" (the final body must be a JSON value, else
// EUNPROCESSABLE / HTTP 422) and "text" (everything stays a string). It
// also owns the step value of an attempt: the Final's fold, or {"out": ...,
// "parts": {...}} once at least one part was staged (a part whose name
// breaks projection.CheckPartName left out: docs/security.md § Part names).
//
// A fence is CommonMark's (§ Fenced code blocks): three or more backticks
// or tildes and an optional info string, closed by a line of at least as
// many of the same character (up to three spaces before it, only spaces
// after it); a shorter fence, or one of the other character, is content.
//
// Decisions where the contract is silent (testdata/cases/fold/README.md):
// ASCII white space around a body is ignored when parsing and when looking
// for a fence; a fence is stripped only when the whole body is one fenced
// block (a line that would close it early makes it more than one, an
// unclosed fence is none); tilde fences count as backtick ones (the
// contract says "a markdown code fence"); numbers keep their exact digits (values
// are the compacted original bytes, never re-encoded). In "json" mode a
// body that is one whole fenced block is unwrapped too, so declaring
// "json" never refuses what the default mode would fold.
//
// It does not write files (internal/projection keeps every part verbatim
// on disk), check verdict contracts (they compare the string before the
// fold), resolve @file: sentinels (the caller resolves them first), or log
// the warning for an unknown submit_format (the caller checks KnownFormat).
package fold
