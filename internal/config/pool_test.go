package config

import (
	"strings"
	"testing"
)

// TestParse_PoolDefaults // README.md § Task pool: worc's defaults apply
// when the orchestrator and paths blocks are absent.
func TestParse_PoolDefaults(t *testing.T) {
	c, err := Parse("config.yaml", []byte("schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Orchestrator
	if o.PollInterval() != 300 || o.QueueName() != "default" || o.MaxTasks() != 1 || o.AutoMode.Enabled || c.Paths.Tasks() != "tasks" {
		t.Fatalf("defaults: poll %d queue %q max %d auto %v tasks %q", o.PollInterval(), o.QueueName(), o.MaxTasks(), o.AutoMode.Enabled, c.Paths.Tasks())
	}
	c, err = Parse("config.yaml", []byte("schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"+
		"orchestrator:\n  auto_mode: {enabled: true}\n  poll_interval_seconds: 0\n  queue: gpu\n  max_concurrent_tasks: 3\npaths:\n  tasks_dir: config/tasks\n"))
	if err != nil {
		t.Fatal(err)
	}
	o = c.Orchestrator
	if o.PollInterval() != 0 || o.QueueName() != "gpu" || o.MaxTasks() != 3 || !o.AutoMode.Enabled || c.Paths.Tasks() != "config/tasks" {
		t.Fatalf("set: poll %d queue %q max %d auto %v tasks %q", o.PollInterval(), o.QueueName(), o.MaxTasks(), o.AutoMode.Enabled, c.Paths.Tasks())
	}
}

// TestParse_TasksDirMustStayInsideTheWorkDir // README.md § Task pool
// (worc configuration.md § paths): an absolute path, .., ~ or .stratus/ is
// refused at load, naming the field and the value.
func TestParse_TasksDirMustStayInsideTheWorkDir(t *testing.T) {
	base := "schema_version: 1\nagents:\n  primary: echo\n  providers:\n    echo: {command: x}\n"
	for name, c := range map[string]struct{ yaml, want string }{
		"absolute":      {"paths:\n  tasks_dir: /srv/tasks\n", `paths.tasks_dir: "/srv/tasks" is an absolute path`},
		"dotdot":        {"paths:\n  tasks_dir: ../tasks\n", `paths.tasks_dir: "../tasks" leaves the work dir`},
		"inner dotdot":  {"paths:\n  tasks_dir: a/../../b\n", "leaves the work dir"},
		"home":          {"paths:\n  tasks_dir: ~/tasks\n", "starts with ~"},
		"state dir":     {"paths:\n  tasks_dir: .stratus/tasks\n", "inside .stratus/"},
		"poll negative": {"orchestrator:\n  poll_interval_seconds: -1\n", "orchestrator.poll_interval_seconds: -1 is negative"},
		"max negative":  {"orchestrator:\n  max_concurrent_tasks: -2\n", "orchestrator.max_concurrent_tasks: -2 is negative"},
		"unknown key":   {"orchestrator:\n  queues: x\n", "queues"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("config.yaml", []byte(base+c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v; want it to contain %q", err, c.want)
			}
		})
	}
}
