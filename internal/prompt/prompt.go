package prompt

import "strings"

// CoreVars is the fixed set of template variables of
// docs/contracts.md § Template variables, in that section's order, then
// summary_body_path, the variable of the `summary` output slot (worc
// flow-authoring.md § Where a node's output goes). Values are metadata and
// artifact paths only, never content.
var CoreVars = []string{
	"task_id", "stage", "repo_path", "repo", "task_path", "plan_path",
	"diff_path", "change_overview_path", "diff_base", "checks_path",
	"review_path", "subtask_order", "subtask_count", "subtask_spec_path",
	"predecessor_context", "memory_path", "conflicts_path", "report_dir",
	"summary_body_path",
}

// reservedStems are the node ids docs/contracts.md § Template variables
// reserves; any id starting with "subtask" is reserved too.
var reservedStems = map[string]bool{
	"task": true, "plan": true, "diff": true, "change_overview": true,
	"checks": true, "review": true, "repo": true, "memory": true,
	"stage": true, "conflicts": true,
}

// ReservedNodeID reports whether a node id collides with a reserved
// core-variable stem (task, plan, diff, change_overview, checks, review,
// repo, memory, stage, conflicts, or anything starting with "subtask"),
// which docs/contracts.md § Template variables makes a fatal flow-load error.
// The match is exact and case-sensitive.
func ReservedNodeID(id string) bool {
	return reservedStems[id] || strings.HasPrefix(id, "subtask")
}

// Allowlist returns the valid variable names of a flow whose agent and
// tool node ids are nodes: CoreVars, then "<node>_path" per node in order,
// without duplicates. The anti-drift lint compares Tokens against it.
func Allowlist(nodes []string) []string {
	out := make([]string, 0, len(CoreVars)+len(nodes))
	seen := make(map[string]bool, cap(out))
	for _, n := range CoreVars {
		seen[n] = true
		out = append(out, n)
	}
	for _, node := range nodes {
		if n := node + "_path"; !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func allowSet(nodes []string) map[string]bool {
	set := make(map[string]bool, len(CoreVars)+len(nodes))
	for _, n := range Allowlist(nodes) {
		set[n] = true
	}
	return set
}

// Render renders role-file template tmpl in one pass
// (docs/contracts.md § Template variables, § Prompt templates). vars holds
// the values of this node run (a missing key has no value); nodes are the
// flow's agent and tool node ids, each allowlisting "<node>_path".
//
//   - {name}, name allowlisted: its value, or "" when it has none.
//   - {?name}…{/name}, name allowlisted: the inside, rendered, when name has
//     a non-empty value; nothing at all otherwise. The block ends at the
//     first {/name}.
//   - anything else — an unknown {name}, other braces, {?name} on a name
//     not allowlisted, an unclosed {?name}, a stray {/name} — verbatim.
//
// Values are inserted as they are: braces in a value are never expanded.
func Render(tmpl string, vars map[string]string, nodes []string) string {
	allowed := allowSet(nodes)
	var b strings.Builder
	b.Grow(len(tmpl))
	for i := 0; i < len(tmpl); {
		t, ok := tokenAt(tmpl, i)
		if !ok {
			j := strings.IndexByte(tmpl[i+1:], '{')
			if j < 0 {
				b.WriteString(tmpl[i:])
				break
			}
			b.WriteString(tmpl[i : i+1+j])
			i += 1 + j
			continue
		}
		switch {
		case !allowed[t.name] || t.kind == closeTok:
			b.WriteString(tmpl[i:t.end])
			i = t.end
		case t.kind == varTok:
			b.WriteString(vars[t.name])
			i = t.end
		default: // openTok
			closing := "{/" + t.name + "}"
			j := strings.Index(tmpl[t.end:], closing)
			if j < 0 { // unclosed: the marker is text, the rest renders on
				b.WriteString(tmpl[i:t.end])
				i = t.end
				continue
			}
			if vars[t.name] != "" {
				renderVars(&b, tmpl[t.end:t.end+j], vars, allowed)
			}
			i = t.end + j + len(closing)
		}
	}
	return b.String()
}

// renderVars renders the inside of a kept block: blocks do not nest, so
// only {name} tokens are substituted and block markers stay text.
func renderVars(b *strings.Builder, s string, vars map[string]string, allowed map[string]bool) {
	for i := 0; i < len(s); {
		if t, ok := tokenAt(s, i); ok && t.kind == varTok && allowed[t.name] {
			b.WriteString(vars[t.name])
			i = t.end
			continue
		}
		b.WriteByte(s[i])
		i++
	}
}

// Tokens returns the variable names template tmpl references through
// {name}, {?name} or {/name} tokens, in order of first appearance, without
// duplicates and without braces — what the anti-drift lint checks against
// Allowlist (docs/contracts.md § Fatal validation). Braces that do not form a
// token (JSON, code with spaces) are not reported; {x} in code is, and the
// lint only warns.
func Tokens(tmpl string) []string {
	var out []string
	seen := map[string]bool{}
	for i := 0; i < len(tmpl); i++ {
		if t, ok := tokenAt(tmpl, i); ok {
			if !seen[t.name] {
				seen[t.name] = true
				out = append(out, t.name)
			}
			i = t.end - 1
		}
	}
	return out
}

type tokKind int

const (
	varTok   tokKind = iota // {name}
	openTok                 // {?name}
	closeTok                // {/name}
)

type token struct {
	kind tokKind
	name string
	end  int // index just past the closing brace
}

// tokenAt parses a token starting at s[i], which must be '{'.
func tokenAt(s string, i int) (token, bool) {
	if s[i] != '{' {
		return token{}, false
	}
	t := token{kind: varTok}
	j := i + 1
	if j < len(s) {
		switch s[j] {
		case '?':
			t.kind, j = openTok, j+1
		case '/':
			t.kind, j = closeTok, j+1
		}
	}
	start := j
	for j < len(s) && isNameByte(s[j], j == start) {
		j++
	}
	if j == start || j >= len(s) || s[j] != '}' {
		return token{}, false
	}
	t.name, t.end = s[start:j], j+1
	return t, true
}

func isNameByte(c byte, first bool) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return true
	case c >= '0' && c <= '9', c == '-':
		return !first
	}
	return false
}
