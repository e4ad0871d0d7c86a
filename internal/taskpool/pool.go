package taskpool

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/task"
)

// The pool's lifecycle directories under tasks_dir (worc configuration.md
// § paths; README.md § Task pool).
const (
	Preparing = "preparing"
	Pending   = "pending"
	Done      = "done"
	Failed    = "failed"
)

// States are the lifecycle directories in the order a task goes through them.
var States = []string{Preparing, Pending, Done, Failed}

// DefaultQueue is the queue of a task whose front matter names none.
const DefaultQueue = "default"

// Priorities, highest first; a task with none, or one not in this list,
// is mid (worc: priority is fail-open).
var Priorities = []string{"high", "mid", "low"}

// SummarySuffix ends the summary a finished task's file sits beside:
// <id>.summary.md.
const SummarySuffix = ".summary.md"

// Pool is the task pool of one work dir.
type Pool struct {
	Root  string // <work dir>/<tasks_dir>, absolute
	State string // <work dir>/.stratus, absolute: where claims live
}

// New returns the pool of work dir dir (absolute) whose tasks_dir is
// tasksDir (relative, as config.Paths checks it).
func New(dir, stateDir, tasksDir string) *Pool {
	return &Pool{Root: filepath.Join(dir, filepath.FromSlash(tasksDir)), State: filepath.Join(dir, stateDir)}
}

// Dir is the lifecycle directory state of the pool.
func (p *Pool) Dir(state string) string { return filepath.Join(p.Root, state) }

// Entry is one task file of the pool.
type Entry struct {
	State string     // Preparing, Pending, Done or Failed
	File  string     // its base name
	Path  string     // its absolute path
	Task  *task.Task // nil when it did not parse
	Err   error      // why it did not parse
}

// ID is the task's id, or its file name without .md when it did not parse.
func (e Entry) ID() string {
	if e.Task != nil {
		return e.Task.ID
	}
	return strings.TrimSuffix(e.File, ".md")
}

// Queue is the task's front matter queue, or DefaultQueue.
func (e Entry) Queue() string {
	if e.Task != nil {
		if q, ok := e.Task.Front["queue"].(string); ok && q != "" {
			return q
		}
	}
	return DefaultQueue
}

// Priority is the task's front matter priority, folded: high, mid or low.
func (e Entry) Priority() string {
	if e.Task != nil {
		if p, ok := e.Task.Front["priority"].(string); ok && slices.Contains(Priorities, p) {
			return p
		}
	}
	return "mid"
}

// DependsOn is the task's front matter depends_on.
func (e Entry) DependsOn() []string {
	if e.Task == nil {
		return nil
	}
	l, _ := e.Task.Front["depends_on"].([]any)
	var out []string
	for _, v := range l {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// RefusedSummary is the name of the summary beside task file file when the
// pool refused it and it never ran: <file stem>.summary.md, which is
// <id>.summary.md for a file named by its id and never another task's.
func RefusedSummary(file string) string { return strings.TrimSuffix(file, ".md") + SummarySuffix }

// IsTaskFile reports whether name is a task file: *.md, not a summary,
// not hidden.
func IsTaskFile(name string) bool {
	return strings.HasSuffix(name, ".md") && !strings.HasSuffix(name, SummarySuffix) && !strings.HasPrefix(name, ".")
}

// List reads the task files of lifecycle directory state, in natural
// file name order (t2 before t10). A missing directory lists nothing; a
// file that does not parse is listed with its Err.
func (p *Pool) List(state string) ([]Entry, error) {
	des, err := os.ReadDir(p.Dir(state))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read the task pool: %w", err)
	}
	var out []Entry
	for _, de := range des {
		if !de.Type().IsRegular() || !IsTaskFile(de.Name()) {
			continue
		}
		e := Entry{State: state, File: de.Name(), Path: filepath.Join(p.Dir(state), de.Name())}
		e.Task, e.Err = task.Load(e.Path)
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return NaturalCompare(a.File, b.File) })
	return out, nil
}

// All lists every lifecycle directory, by state.
func (p *Pool) All() (map[string][]Entry, error) {
	out := map[string][]Entry{}
	for _, s := range States {
		l, err := p.List(s)
		if err != nil {
			return nil, err
		}
		out[s] = l
	}
	return out, nil
}

// Find returns the entry of lifecycle directory state named ref: a task
// id or a file name (with or without .md, or a path whose base is one).
// Errors: ENOTFOUND (field "task") naming the directory searched.
func (p *Pool) Find(state, ref string) (Entry, error) {
	l, err := p.List(state)
	if err != nil {
		return Entry{}, err
	}
	base := filepath.Base(ref)
	for _, e := range l {
		if e.File == base || e.File == base+".md" || (e.Task != nil && e.Task.ID == ref) {
			return e, nil
		}
	}
	return Entry{}, stratus.FieldErrorf(stratus.ENOTFOUND, "task", "%q is not in %s: valid: the id or the file name of a task there", ref, p.Dir(state))
}

// NaturalCompare orders file names with their digit runs read as numbers
// (t2 < t10), then by bytes.
func NaturalCompare(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			continue
		}
		if a[i] != b[j] {
			return int(a[i]) - int(b[j])
		}
		i, j = i+1, j+1
	}
	if c := (len(a) - i) - (len(b) - j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c < 0x80 && unicode.IsDigit(rune(c)) }
