package config

import (
	"path/filepath"
	"slices"
	"strings"
)

// Orchestrator is worc's `orchestrator` block: how `stratus watch` runs the
// task pool (README.md § Task pool). Read through its methods, which apply
// worc's defaults.
type Orchestrator struct {
	AutoMode AutoMode `yaml:"auto_mode,omitempty"`
	// PollIntervalSeconds is the watch loop's tick, seconds (unset: 300;
	// 0: one pass, until nothing is eligible).
	PollIntervalSeconds *int `yaml:"poll_interval_seconds,omitempty"`
	// Queue is the queue this watcher serves: a task is taken only when
	// its front matter queue (absent: "default") equals it ("default").
	Queue string `yaml:"queue,omitempty"`
	// MaxConcurrentTasks is how many tasks one watcher runs at once
	// (a Stratus key; unset or 0: 1, worc's one task at a time).
	MaxConcurrentTasks int `yaml:"max_concurrent_tasks,omitempty"`
}

// AutoMode is orchestrator.auto_mode.
type AutoMode struct {
	// Enabled: the watcher goes on polling after the pool has nothing
	// eligible (false: with a poll interval of 0 it ends there).
	Enabled bool `yaml:"enabled,omitempty"`
}

// The defaults of the orchestrator and paths blocks (worc configuration.md
// § orchestrator, § paths).
const (
	DefaultPollIntervalSeconds = 300
	DefaultQueue               = "default"
	DefaultMaxConcurrentTasks  = 1
	DefaultTasksDir            = "tasks"
)

// PollInterval is orchestrator.poll_interval_seconds, or its default.
func (o Orchestrator) PollInterval() int {
	if o.PollIntervalSeconds == nil {
		return DefaultPollIntervalSeconds
	}
	return *o.PollIntervalSeconds
}

// QueueName is orchestrator.queue, or "default".
func (o Orchestrator) QueueName() string { return cmpOr(o.Queue, DefaultQueue) }

// MaxTasks is orchestrator.max_concurrent_tasks, or 1.
func (o Orchestrator) MaxTasks() int {
	if o.MaxConcurrentTasks <= 0 {
		return DefaultMaxConcurrentTasks
	}
	return o.MaxConcurrentTasks
}

// Paths is worc's `paths` block.
type Paths struct {
	// TasksDir holds the pool's preparing/, pending/, done/ and failed/,
	// relative to the work dir ("tasks"); never absolute, never leaving
	// the work dir, never inside .stratus/.
	TasksDir string `yaml:"tasks_dir,omitempty"`
}

// Tasks is paths.tasks_dir, or "tasks".
func (p Paths) Tasks() string { return cmpOr(p.TasksDir, DefaultTasksDir) }

// poolBlocks checks the orchestrator and paths blocks.
func (c *Config) poolBlocks(ps *problems) {
	o := c.Orchestrator
	if n := o.PollIntervalSeconds; n != nil && *n < 0 {
		ps.add("orchestrator.poll_interval_seconds", "%d is negative; valid: seconds >= 0 (0: one pass until nothing is eligible; default %d)", *n, DefaultPollIntervalSeconds)
	}
	if o.MaxConcurrentTasks < 0 {
		ps.add("orchestrator.max_concurrent_tasks", "%d is negative; valid: a number of tasks >= 1 (0 or unset: %d)", o.MaxConcurrentTasks, DefaultMaxConcurrentTasks)
	}
	if o.Queue != "" && strings.TrimSpace(o.Queue) == "" {
		ps.add("orchestrator.queue", "%q is blank; valid: a non-empty queue name (default %q)", o.Queue, DefaultQueue)
	}
	if d := c.Paths.TasksDir; d != "" {
		if why := tasksDirProblem(d); why != "" {
			ps.add("paths.tasks_dir", "%q %s; valid: a relative path inside the work dir, such as %q or config/tasks", d, why, DefaultTasksDir)
		}
	}
}

// tasksDirProblem says why d cannot be the pool's directory ("" when it
// can): worc's rule (configuration.md § paths) that the pool stays inside
// the repository, in Git's view, out of the state directory.
func tasksDirProblem(d string) string {
	slash := filepath.ToSlash(d)
	parts := strings.Split(slash, "/")
	switch {
	case filepath.IsAbs(d) || strings.HasPrefix(slash, "/"):
		return "is an absolute path"
	case strings.HasPrefix(slash, "~"):
		return "starts with ~ (a home directory)"
	case slices.Contains(parts, ".."):
		return "leaves the work dir (..)"
	case filepath.Clean(d) == ".":
		return "is the work dir itself"
	case parts[0] == ".stratus" || (parts[0] == "." && len(parts) > 1 && parts[1] == ".stratus"):
		return "is inside .stratus/, which Git does not track"
	}
	return ""
}
