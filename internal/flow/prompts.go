package flow

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/stratusflow/stratus/internal/prompt"
)

// promptRef is one prompt file a flow references: a node's role_file or
// resume_role_file, or one of the supervisor prompts.
type promptRef struct {
	node  *Node  // nil for a supervisor prompt
	field string // "role_file", "resume_role_file", "supervisor.finalize_role_file", ...
	path  string // the problem path: "nodes[3].role_file", "supervisor.role_file"
	what  string // for messages: `node "x" role_file`, "supervisor.role_file"
	file  string // as written, flows-dir-relative
	pos   Pos
}

// promptRefs lists the prompt files f references, in file order.
func promptRefs(f *Flow) []promptRef {
	var refs []promptRef
	for i := range f.Nodes {
		n := &f.Nodes[i]
		for _, r := range []struct{ key, file string }{{"role_file", n.RoleFile}, {"resume_role_file", n.ResumeRoleFile}} {
			if r.file != "" {
				refs = append(refs, promptRef{node: n, field: r.key, path: fmt.Sprintf("nodes[%d].%s", i, r.key),
					what: label(n) + " " + r.key, file: r.file, pos: n.pos(r.key)})
			}
		}
	}
	if s := f.Supervisor; s != nil {
		for _, r := range []struct{ key, file string }{
			{"role_file", s.RoleFile}, {"finalize_role_file", s.FinalizeRoleFile}, {"handoff_role_file", s.HandoffRoleFile},
		} {
			if r.file != "" {
				p := "supervisor." + r.key
				refs = append(refs, promptRef{field: p, path: p, what: p, file: r.file, pos: f.pos(p)})
			}
		}
	}
	return refs
}

// MissingRoleFile is one prompt file a flow references that is absent from
// its flows directory. Validate reports it as a warning, because a node
// gated by `when` or disabled per task may never need it (worc's own
// implementation flow references implementation/refinement.md, which its
// peer copy lacks); a run's preflight makes it fatal for the nodes that
// will run.
type MissingRoleFile struct {
	Node    string  // the node id; "" for a supervisor prompt
	Field   string  // "role_file", "resume_role_file", or "supervisor.<key>"
	File    string  // the path as written, relative to the flows directory
	Problem Problem // the fatal form, located at the key, for a preflight to report
}

// MissingRoleFiles returns the prompt files of f (node role_file and
// resume_role_file, supervisor prompts) that do not exist under root, the
// flows directory, in file order. Paths that are not contained are left to
// Validate (fatal there); a path that exists but is unreadable or a
// directory is not "missing" and is fatal in Validate too.
func MissingRoleFiles(f *Flow, root string) []MissingRoleFile {
	var out []MissingRoleFile
	for _, r := range promptRefs(f) {
		if !contained(r.file) {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(r.file))
		if _, err := os.Stat(full); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		id := ""
		if r.node != nil {
			id = r.node.ID
		}
		out = append(out, MissingRoleFile{Node: id, Field: r.field, File: r.file, Problem: Problem{
			File: f.File, Line: r.pos.Line, Col: r.pos.Col, Path: r.path, Fatal: true,
			Message: fmt.Sprintf("%s %q does not exist (looked for %s)", r.what, r.file, full),
		}})
	}
	return out
}

// prompts checks every prompt file: contained (fatal), and with
// RoleFileRoot set: inside the root after symlinks (fatal), a readable file
// whose front matter is valid (fatal), present (a warning: see
// MissingRoleFile), and free of {name} tokens outside the flow's variable
// set (the anti-drift lint, a warning).
func (v *validator) prompts() {
	root := v.opt.RoleFileRoot
	linted := map[string]bool{}
	valid := map[string]bool{}
	for _, name := range prompt.Allowlist(outputNodes(v.f)) {
		valid[name] = true
	}
	v.questions(valid)
	for _, r := range promptRefs(v.f) {
		if !contained(r.file) {
			v.add(r.pos, r.path, true, "%s %q must be a relative path inside the flows directory (no absolute path, no \"..\")", r.what, r.file)
			continue
		}
		if root == "" {
			continue
		}
		full := filepath.Join(root, filepath.FromSlash(r.file))
		st, err := os.Stat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if r.node != nil {
				v.add(r.pos, r.path, false, "%s %q does not exist (looked for %s); the node fails if it runs", r.what, r.file, full)
			} else {
				v.add(r.pos, r.path, false, "%s %q does not exist (looked for %s); the supervisor phase that reads it fails if it runs", r.what, r.file, full)
			}
			continue
		case err != nil:
			v.add(r.pos, r.path, true, "%s %q cannot be read: %v", r.what, r.file, err)
			continue
		case st.IsDir():
			v.add(r.pos, r.path, true, "%s %q is a directory, not a prompt file", r.what, r.file)
			continue
		}
		if where, ok := inside(root, full); !ok {
			v.add(r.pos, r.path, true, "%s %q resolves through a symlink to %s, outside the flows directory %s; a prompt file must live inside it", r.what, r.file, where, root)
			continue
		}
		data, err := ReadRoleFile(full) // capped at MaxRoleFileBytes, UTF-8
		if err != nil {
			v.add(r.pos, r.path, true, "%s %q cannot be read: %v", r.what, r.file, err)
			continue
		}
		_, body, err := prompt.SplitRoleFile(string(data))
		if err != nil {
			v.add(r.pos, r.path, true, "%s %q: %v", r.what, r.file, err)
			continue
		}
		if !linted[full] {
			linted[full] = true
			v.lint(r, full, string(data), body, valid)
		}
	}
}

// inside reports whether path, with every symlink resolved, lies inside
// root (also resolved); it returns the resolved path for messages. A path
// that cannot be resolved counts as inside: the read that follows reports it.
func inside(root, path string) (string, bool) {
	r, err := filepath.EvalSymlinks(root)
	if err != nil {
		return path, true
	}
	p, err := filepath.EvalSymlinks(path)
	if err != nil {
		return path, true
	}
	rel, err := filepath.Rel(r, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return p, false
	}
	return p, true
}

// OutputNodes are the nodes exposing {<id>_path} to later nodes, in flow
// order: agent and tool nodes (docs/contracts.md § Template variables), and
// hitl nodes, whose {<id>_path} is the file holding the human's reply
// (docs/prompt-variables.md § Node outputs). A hitl node whose id is a
// reserved stem (prompt.ReservedNodeID) exposes nothing: it would shadow a
// core variable. The validator's lint and every renderer share this list.
func OutputNodes(f *Flow) []string {
	var ids []string
	for _, n := range f.Nodes {
		if n.ID == "" {
			continue
		}
		switch {
		case n.Kind == KindAgent || n.Kind == KindTool:
			ids = append(ids, n.ID)
		case n.Kind == KindHITL && !prompt.ReservedNodeID(n.ID):
			ids = append(ids, n.ID)
		}
	}
	return ids
}

func outputNodes(f *Flow) []string { return OutputNodes(f) }

// lint is the anti-drift lint of docs/contracts.md § Fatal validation for one
// role file: every {name}, {?name} or {/name} token whose name is not in the
// flow's variable set (prompt.Allowlist over the agent and tool node ids) is
// a warning located at the token in the role file. A verbatim render is the
// safe fallback, so this never fails the flow; it surfaces the typo that
// would ship to the agent as placeholder text.
func (v *validator) lint(r promptRef, full, data, body string, valid map[string]bool) {
	offset := 0 // lines of front matter before body
	if strings.HasSuffix(data, body) {
		offset = strings.Count(data[:len(data)-len(body)], "\n")
	}
	if v.lintExtra == "" { // once per flow: it lists every output node
		var outputs []string
		for _, id := range outputNodes(v.f) {
			outputs = append(outputs, "{"+id+"_path}")
		}
		v.lintExtra = "no agent, tool or hitl node outputs"
		if len(outputs) > 0 {
			v.lintExtra = strings.Join(outputs, ", ")
		}
	}
	extra := v.lintExtra
	for i, line := range strings.Split(body, "\n") {
		for _, name := range prompt.Tokens(line) {
			if valid[name] {
				continue
			}
			col, tok := tokenColumn(line, name)
			v.ps = append(v.ps, Problem{File: full, Line: offset + i + 1, Col: col, Path: r.path, Fatal: false,
				Message: fmt.Sprintf("%s is not a prompt variable of flow %q, so it reaches the agent verbatim (in %s %q; the flow's variables are the core set and %s)",
					tok, v.f.TaskType, r.what, r.file, extra)})
		}
	}
}

// tokenColumn returns the 1-based byte column of the first token naming
// name in line, and the token as written.
func tokenColumn(line, name string) (int, string) {
	best, tok := -1, "{"+name+"}"
	for _, t := range []string{"{" + name + "}", "{?" + name + "}", "{/" + name + "}"} {
		if i := strings.Index(line, t); i >= 0 && (best < 0 || i < best) {
			best, tok = i, t
		}
	}
	return best + 1, tok
}

// MaxQuestionBytes bounds a hitl node's question.
const MaxQuestionBytes = 4 << 10

// questions checks each hitl node's question: not blank and
// at most MaxQuestionBytes (fatal), and its {name} tokens in the flow's
// variable set (the anti-drift lint of role files, a warning).
func (v *validator) questions(valid map[string]bool) {
	for i := range v.f.Nodes {
		n := &v.f.Nodes[i]
		pos, ok := n.Fields["question"]
		if n.Kind != KindHITL || !ok {
			continue
		}
		path := fmt.Sprintf("nodes[%d].question", i)
		switch {
		case strings.TrimSpace(n.Question) == "":
			v.add(pos, path, true, "hitl node %s: question is empty; valid: the text a human is asked (or no question key)", n.ID)
			continue
		case len(n.Question) > MaxQuestionBytes:
			v.add(pos, path, true, "hitl node %s: question is %d bytes; valid: at most %d", n.ID, len(n.Question), MaxQuestionBytes)
			continue
		}
		for _, name := range prompt.Tokens(n.Question) {
			if !valid[name] {
				_, tok := tokenColumn(n.Question, name)
				v.add(pos, path, false, "hitl node %s: %s in its question is not a prompt variable of flow %q, so the human reads it verbatim", n.ID, tok, v.f.TaskType)
			}
		}
	}
}
