package task

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/gitwork"
	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// DefaultTaskType is the flow a task runs when its front matter names none.
const DefaultTaskType = "implementation"

// Task is one operator task file: Markdown with YAML front matter.
type Task struct {
	ID       string         // front matter id: a portable token, the {task_id}
	Title    string         // front matter title
	TaskType string         // front matter task_type, or DefaultTaskType
	Body     string         // everything after the closing `---` line
	Path     string         // the path given to Parse or Load
	Front    map[string]any // the whole front matter as decoded YAML
	// written is each top-level key's plain scalar as written in the
	// front matter (for messages: "0123" that YAML read as 83).
	written map[string]string
	// lines maps each top-level front-matter key to its line in the file.
	lines map[string]int
}

// AllowedKeys are the front-matter keys worc accepts (SKILL.md § The task
// contract); any other key rejects the task.
var AllowedKeys = []string{
	"id", "title", "task_type", "branch_name", "branch_mode", "branch_ref", "publish",
	"trust_level", "auto_merge", "prompt_audit", "decomposition", "contacts", "depends_on",
	"subtasks", "priority", "queue", "nodes",
	// Stratus's own: caps on the run's spend (config.yaml limits; the
	// task's win).
	"max_cost_usd", "max_tokens",
	// Where embedded engines work (config.yaml workspace; the task's wins).
	"workspace",
}

// nodeOverrideKeys are the sub-keys of nodes.<id> (SKILL.md § nodes).
var nodeOverrideKeys = []string{"enabled", "model", "reasoning", "provider"}

// The patterns compile on first use: package init is paid by every
// `stratus` start, whatever the command.
var (
	idRE        = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`) })
	deviceRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$`) })
	taskTypeRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*$`) })
	injectionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("[`;|\n]|\\$\\(") })
)

// Load reads and parses the task file at path. A missing file is
// ENOTFOUND; one that is not a regular file (a FIFO, a device, a
// directory: inputfile.Open) or cannot be read is EINVALID; other errors
// are Parse's.
func Load(path string) (*Task, error) {
	f, err := inputfile.Open("task file", path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, stratus.Errorf(stratus.ENOTFOUND, "task file not found: %s", path)
	} else if stratus.ErrorCode(err) == stratus.EINVALID {
		return nil, err // not a regular file
	} else if err != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "task file %s cannot be opened: %v", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "task file %s cannot be read: %v", path, err)
	}
	if len(data) > MaxBytes {
		return nil, stratus.Errorf(stratus.EINVALID, "task file %s is over %d bytes; a task states what to do, the material it needs stays in files it names", path, MaxBytes)
	}
	return Parse(path, data)
}

// MaxBytes bounds a task file (1 MiB).
const MaxBytes = 1 << 20

// Parse reads a task file: YAML front matter between a first line `---`
// and the next line `---`, then the Markdown body.
//
// Every rejection is a *stratus.Error with code EINVALID whose Field names
// the front-matter key at fault and whose message names the file, the value
// and what would be valid:
//
//   - no front matter (the file must start with `---`), or no closing `---`;
//   - front matter that is not a YAML mapping;
//   - a key outside AllowedKeys (the message lists them);
//   - id or title missing or not a non-empty string;
//   - an id that is not a portable token: ^[a-z0-9][a-z0-9._-]{0,63}$, no
//     "..", no trailing dot, not a Windows device name (it becomes a
//     directory name and a branch fragment);
//   - a value of the wrong type for its key (SKILL.md's table), a nodes
//     override with a sub-key other than enabled/model/reasoning/provider;
//   - a string value that starts with '-' or holds a backtick, ';', '|',
//     "$(" or a newline (worc's injection_suspected, applied to every key).
//
// TaskType defaults to "implementation".
func Parse(path string, data []byte) (*Task, error) {
	if off, line, _ := yamlast.InvalidUTF8(data); off >= 0 { // named, never accepted silently
		return nil, stratus.Errorf(stratus.EINVALID, "%s: the task file is not valid UTF-8: byte 0x%02x at byte offset %d (line %d); save it as UTF-8",
			path, data[off], off, line)
	}
	front, body, err := split(path, data)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if p := yamlast.Bounds(front, yamlast.DefaultLimits); p != nil {
		return nil, stratus.Errorf(stratus.EINVALID, "%s:%d:%d: front matter: %s", path, p.Pos.Line+1, p.Pos.Col, p.Message)
	}
	if len(bytes.TrimSpace(front)) > 0 {
		// YAML aliases can expand a few bytes into gigabytes (a "billion
		// laughs"); a task's front matter has no use for them.
		if tokens := lexer.Tokenize(string(front)); tokens != nil {
			for _, tk := range tokens {
				if tk.Type == token.AliasType || tk.Type == token.AnchorType {
					return nil, stratus.Errorf(stratus.EINVALID, "%s:%d: front matter uses a YAML anchor or alias (%s); write values out", path, tk.Position.Line+1, tk.Value)
				}
			}
		}
		var v any
		if err := yaml.Unmarshal(front, &v); err != nil {
			// "[line:col] message" from goccy, at the file's line (the
			// opening --- is line 1), without its source excerpt.
			msg := yaml.FormatError(err, false, false)
			if m := yamlPos().FindStringSubmatch(msg); m != nil {
				line, _ := strconv.Atoi(m[1])
				return nil, stratus.Errorf(stratus.EINVALID, "%s:%d:%s: front matter is not valid YAML: %s", path, line+1, m[2], strings.TrimSpace(m[3]))
			}
			return nil, stratus.Errorf(stratus.EINVALID, "%s: front matter is not valid YAML: %s", path, strings.TrimSpace(msg))
		}
		var ok bool
		if m, ok = v.(map[string]any); !ok && v != nil {
			return nil, stratus.Errorf(stratus.EINVALID, "%s: front matter must be a YAML mapping of keys (id, title, ...), got %s", path, yamlKind(v))
		}
		if m == nil {
			m = map[string]any{}
		}
	}
	t := &Task{Path: path, Body: body, Front: m, TaskType: DefaultTaskType, written: writtenScalars(front), lines: keyLines(front)}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

// split cuts data into front matter and body at the `---` fences.
func split(path string, data []byte) (front []byte, body string, err error) {
	text := strings.TrimPrefix(string(data), "\ufeff")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimRight(first, "\r") != "---" {
		return nil, "", stratus.Errorf(stratus.EINVALID,
			"%s: a task file must start with a `---` line opening the YAML front matter (id, title, ...)", path)
	}
	offset := 0
	for offset <= len(rest) {
		line, after, found := strings.Cut(rest[offset:], "\n")
		if strings.TrimRight(line, "\r") == "---" {
			return []byte(rest[:offset]), after, nil
		}
		if !found {
			break
		}
		offset += len(line) + 1
	}
	return nil, "", stratus.Errorf(stratus.EINVALID, "%s: the front matter has no closing `---` line", path)
}

// invalid is the refusal of front-matter key field: its message starts
// with the file, line and column of the key, as a flow's problems do, and the
// error names the field for code that asks (errors.As a *stratus.Error).
func (t *Task) invalid(field, format string, args ...any) error {
	at := t.Path
	if line, ok := t.lines[strings.SplitN(field, ".", 2)[0]]; ok {
		at = fmt.Sprintf("%s:%d:1", t.Path, line)
	}
	return &positioned{stratus.FieldErrorf(stratus.EINVALID, field, "%s: "+format, append([]any{at}, args...)...)}
}

// positioned shows a field's error as "file:line:col: message", without
// the field in front: the message names it.
type positioned struct{ err *stratus.Error }

func (e *positioned) Error() string { return e.err.Message }
func (e *positioned) Unwrap() error { return e.err }

// keyLines maps each top-level key of front to its line in the task file
// (1-based; the opening --- is line 1).
func keyLines(front []byte) map[string]int {
	out := map[string]int{}
	for i, line := range strings.Split(string(front), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && k != "" && !strings.ContainsAny(k[:1], " \t#-") {
			if _, seen := out[k]; !seen {
				out[k] = i + 2
			}
		}
	}
	return out
}

func (t *Task) check() error {
	keys := make([]string, 0, len(t.Front))
	for k := range t.Front {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(AllowedKeys, k) {
			return t.invalid(k, "unknown front-matter key %q; allowed: %s", k, strings.Join(AllowedKeys, ", "))
		}
	}

	var err error
	if t.ID, err = t.requiredString("id"); err != nil {
		return err
	}
	if !idRE().MatchString(t.ID) || strings.Contains(t.ID, "..") || strings.HasSuffix(t.ID, ".") || deviceRE().MatchString(t.ID) {
		return t.invalid("id", "id %q is not a portable token: want ^[a-z0-9][a-z0-9._-]{0,63}$ (lowercase letters, digits, '.', '_', '-'), no \"..\", no trailing '.', not a Windows device name", t.ID)
	}
	if t.Title, err = t.requiredString("title"); err != nil {
		return err
	}
	if v, ok := t.Front["task_type"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr || !taskTypeRE().MatchString(s) || strings.Contains(s, "..") {
			return t.invalid("task_type", "task_type %v must name a flow: one file name of letters, digits, '.', '_' or '-' (e.g. implementation)", quote(v))
		}
		t.TaskType = s
	}

	for _, c := range []struct {
		key    string
		check  func(any) bool
		expect string
	}{
		{"branch_name", isBranchName, "a git branch name (such as stratus/t1: no spaces, .., ~^:?*[ or \\, not starting with - or ending with / .lock or ., not HEAD or under refs/) or null"},
		{"branch_mode", oneOf("new", "existing", "current"), "one of new, existing, current"},
		{"branch_ref", isBranchName, "a git branch name"},
		{"publish", oneOf("commit", "push", "pull_request"), "one of commit, push, pull_request"},
		{"trust_level", oneOf("strict", "auto"), "one of strict, auto"},
		{"auto_merge", isBool, "true or false"},
		{"prompt_audit", isBool, "true or false"},
		{"decomposition", isBool, "true or false"},
		{"contacts", isStringList, "a list of strings"},
		{"depends_on", isStringList, "a list of task ids"},
		{"subtasks", isStringList, "a list of strings"},
		{"queue", nonEmptyString, "a non-empty string"},
		{"max_cost_usd", isNonNegativeNumber, "a cost in US dollars >= 0 (0: no cap)"},
		{"max_tokens", isNonNegativeInt, "a token count >= 0 (0: no cap)"},
		{"workspace", oneOf("workdir", "worktree"), "workdir (engines work in the work dir) or worktree (a checkout of their own; commits come back as branch stratus/<task_id>)"},
	} {
		v, ok := t.Front[c.key]
		if !ok || (v == nil && c.key == "branch_name") {
			continue
		}
		if !c.check(v) {
			return t.invalid(c.key, "%s is %v; want %s", c.key, t.show(c.key, v), c.expect)
		}
	}
	// priority is fail-open in worc: anything unrecognised folds to mid.
	if t.Front["branch_mode"] == "existing" && t.Front["branch_ref"] == nil {
		return t.invalid("branch_ref", "branch_mode existing requires branch_ref (the existing branch to check out)")
	}
	if err := t.checkNodes(); err != nil {
		return err
	}
	return t.checkInjection()
}

func (t *Task) requiredString(key string) (string, error) {
	v, ok := t.Front[key]
	if !ok || v == nil {
		return "", t.invalid(key, "front matter requires %s", key)
	}
	s, isStr := v.(string)
	if !isStr || strings.TrimSpace(s) == "" {
		return "", t.invalid(key, "%s is %v; want a non-empty string", key, t.show(key, v))
	}
	return s, nil
}

// checkNodes checks nodes: {<node id>: {enabled?, model?, reasoning?, provider?}}.
func (t *Task) checkNodes() error {
	v, ok := t.Front["nodes"]
	if !ok || v == nil {
		return nil
	}
	nodes, isMap := v.(map[string]any)
	if !isMap {
		return t.invalid("nodes", "nodes is %v; want a mapping of flow node id to {enabled, model, reasoning, provider}", quote(v))
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		field := "nodes." + id
		sub, isMap := nodes[id].(map[string]any)
		if !isMap {
			return t.invalid(field, "%s is %v; want a mapping with enabled, model, reasoning or provider", field, quote(nodes[id]))
		}
		keys := make([]string, 0, len(sub))
		for k := range sub {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			switch {
			case !slices.Contains(nodeOverrideKeys, k):
				return t.invalid(field+"."+k, "unknown node override %q in %s; allowed: %s", k, field, strings.Join(nodeOverrideKeys, ", "))
			case k == "enabled" && !isBool(sub[k]):
				return t.invalid(field+"."+k, "%s.enabled is %v; want true or false", field, quote(sub[k]))
			case k != "enabled" && !nonEmptyString(sub[k]):
				return t.invalid(field+"."+k, "%s.%s is %v; want a non-empty string", field, k, quote(sub[k]))
			}
		}
	}
	return nil
}

// checkInjection applies worc's defensive scan to every string value of
// the front matter: nothing may look like a CLI argument or a shell token.
func (t *Task) checkInjection() error {
	var bad func(path string, v any) error
	bad = func(path string, v any) error {
		switch x := v.(type) {
		case string:
			if strings.HasPrefix(strings.TrimSpace(x), "-") || injectionRE().MatchString(x) {
				return t.invalid(path, "%s is %q: front-matter values are plain text; a value may not start with '-' or hold a backtick, ';', '|', \"$(\" or a newline (put such text in the body)", path, x)
			}
		case []any:
			for i, it := range x {
				if err := bad(fmt.Sprintf("%s[%d]", path, i), it); err != nil {
					return err
				}
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				if err := bad(path+"."+k, x[k]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	keys := make([]string, 0, len(t.Front))
	for k := range t.Front {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := bad(k, t.Front[k]); err != nil {
			return err
		}
	}
	return nil
}

// plainScalar is a top-level "key: value" line whose value is an unquoted
// scalar.
var plainScalar = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^([A-Za-z_][A-Za-z0-9_-]*):[ \t]+([^\s#'"\[{|>&*!][^#\r\n]*?)[ \t]*(?:#.*)?\r?$`)
})

// yamlPos reads goccy's "[line:col] message".
var yamlPos = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[(\d+):(\d+)\] ([^\n]*)`) })

// writtenScalars maps each top-level key of front to its plain scalar as
// written.
func writtenScalars(front []byte) map[string]string {
	out := map[string]string{}
	for _, m := range plainScalar().FindAllSubmatch(front, -1) {
		out[string(m[1])] = string(m[2])
	}
	return out
}

// show is quote(v) for top-level key, saying how YAML read a number
// written otherwise ("0123" is the octal 83) and how to keep the text.
func (t *Task) show(key string, v any) string {
	q := quote(v)
	w, ok := t.written[key]
	if _, isStr := v.(string); !ok || isStr || v == nil || fmt.Sprint(v) == w {
		return q
	}
	how := fmt.Sprintf("YAML read %s as %s", w, q)
	if len(w) > 1 && w[0] == '0' && strings.Trim(w, "01234567") == "" {
		how = fmt.Sprintf("%v (YAML read %s as an octal number", v, w)
	} else if i := strings.LastIndexByte(q, ')'); i > 0 {
		how = fmt.Sprintf("%s; YAML read %s so", q[:i], w)
	}
	return fmt.Sprintf("%s; quote it to keep the text: %s: %q)", how, key, w)
}

// quote shows a front-matter value as YAML would name it: a string
// quoted, null, a number or a boolean as written with its YAML type, a
// list or a mapping by its kind (never a Go type such as uint64).
func quote(v any) string {
	switch x := v.(type) {
	case string:
		return fmt.Sprintf("%q", x)
	case nil:
		return "null"
	case bool:
		return fmt.Sprintf("%v (a boolean)", x)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return fmt.Sprintf("%v (a number)", x)
	case []any:
		return "a list"
	case map[string]any, map[any]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

func isString(v any) bool { _, ok := v.(string); return ok }
func isBool(v any) bool   { _, ok := v.(bool); return ok }

func nonEmptyString(v any) bool {
	s, ok := v.(string)
	return ok && strings.TrimSpace(s) != ""
}

func isStringList(v any) bool {
	list, ok := v.([]any)
	if !ok {
		return false
	}
	for _, it := range list {
		if !isString(it) {
			return false
		}
	}
	return true
}

func isNonNegativeNumber(v any) bool {
	switch n := v.(type) {
	case uint64:
		return true
	case int64:
		return n >= 0
	case float64:
		return n >= 0
	}
	return false
}

func isNonNegativeInt(v any) bool {
	switch n := v.(type) {
	case uint64:
		return true
	case int64:
		return n >= 0
	}
	return false
}

// Caps returns the task's caps on its run's spend: front matter
// max_cost_usd and max_tokens, each 0 when absent.
func (t *Task) Caps() (maxCostUSD float64, maxTokens int64) {
	switch n := t.Front["max_cost_usd"].(type) {
	case uint64:
		maxCostUSD = float64(n)
	case int64:
		maxCostUSD = float64(n)
	case float64:
		maxCostUSD = n
	}
	switch n := t.Front["max_tokens"].(type) {
	case uint64:
		maxTokens = int64(n)
	case int64:
		maxTokens = n
	}
	return maxCostUSD, maxTokens
}

func oneOf(allowed ...string) func(any) bool {
	return func(v any) bool {
		s, ok := v.(string)
		return ok && slices.Contains(allowed, s)
	}
}

// yamlKind names the kind of a decoded YAML value as its writer sees it.
func yamlKind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	}
	return "a scalar"
}

// isBranchName: a string git takes as a branch name (gitwork.ValidBranchName).
func isBranchName(v any) bool {
	s, ok := v.(string)
	return ok && gitwork.ValidBranchName(s)
}
