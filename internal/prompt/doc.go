// Package prompt renders role-file templates
// (docs/contracts.md § Template variables, § Prompt templates, and the token
// scan the § Anti-drift lint needs).
//
// It owns the allowlist — the fixed CoreVars plus one {<node_id>_path} per
// agent or tool node of the flow — and the one-pass renderer: an
// allowlisted {name} becomes its value (or ""), {?name}…{/name} keeps its
// rendered inside only when name is allowlisted with a non-empty value,
// and everything else (unknown names, code or JSON braces, a block on a
// non-allowlisted name, an unclosed block) passes through verbatim, so a
// template never breaks on stray braces. A substituted value is never
// expanded again.
//
// Token grammar: a name is an ASCII letter or underscore followed by
// letters, digits, underscores or hyphens. Blocks do not nest: inside a
// kept block only {name} tokens are rendered; block markers there are text.
//
// It does not compute variable values (paths come from the runner), redact
// or write rendered-prompt.md, validate flows (ReservedNodeID is the
// predicate the flow loader calls), or report lint warnings (it returns
// the tokens; the validator compares them to Allowlist).
package prompt
