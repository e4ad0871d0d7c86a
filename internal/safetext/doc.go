// Package safetext shows text Stratus did not write — an engine's failure
// reason, report, findings and stderr, anything a step's handle could have
// posted — on a terminal and in the Markdown and HTML Stratus writes,
// without letting it drive the terminal or disguise itself
// (docs/security.md § Text an engine wrote).
//
// It owns one rule, in three shapes: Line (text inside one line), Block
// (text shown as lines of its own) and Quote (Line in double quotes, a Go
// string literal). Every rune that is a control character (C0, DEL, C1:
// ESC sequences, BEL, CR), a format character (Unicode category Cf: the
// bidi embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069,
// the marks U+200E, U+200F and U+061C, the zero-width characters, the
// tags), a line or paragraph separator (U+2028, U+2029), or a byte that is
// not UTF-8 is written as an escape (\x1b, \r, \u202e, \xff); everything
// else is kept as written, non-ASCII letters included.
//
// It does not decide where untrusted text goes: the writers (the progress
// lines, the CLI's commands, the summary, the viewer) call it. JSON
// outputs need nothing of it: their strings are JSON-escaped.
package safetext
