package worcimport

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// worcDoc reads worc's configuration reference from ../shared/peers
// (skipped on a clone without it): its examples are worc's own, not
// copied here.
func worcDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.Peers(t, "worc", "docs"), "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// yamlExamples returns the doc's ```yaml blocks that mention key.
func yamlExamples(doc, key string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(doc, -1) {
		if strings.Contains(m[1], key+":") {
			out = append(out, m[1])
		}
	}
	return out
}

// importConfig imports a worc home holding only config.yaml.
func importConfig(t *testing.T, body string) *Result {
	t.Helper()
	home := filepath.Join(t.TempDir(), ".worc")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := Import(home, config.Default(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// worc configuration.md § agents, § agents.retry: worc's own examples of
// agents.max_stage_attempts and agents.retry import key by key, none left
// out, and the config they give validates with the same values.
func TestImport_WorcsRetryExamplesMapKeyByKey(t *testing.T) {
	t.Parallel()
	doc := worcDoc(t)
	examples := append(yamlExamples(doc, "max_stage_attempts"), yamlExamples(doc, "max_blocked_s")...)
	if len(examples) < 2 {
		t.Fatalf("want worc's § agents and § agents.retry examples, found %d", len(examples))
	}
	for i, ex := range examples {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			var want struct {
				Agents struct {
					MaxStageAttempts *int `yaml:"max_stage_attempts"`
					Retry            *struct {
						MaxAttempts *int     `yaml:"max_attempts"`
						BaseDelayS  *float64 `yaml:"base_delay_s"`
						MaxDelayS   *float64 `yaml:"max_delay_s"`
						MaxBlockedS *float64 `yaml:"max_blocked_s"`
					} `yaml:"retry"`
				} `yaml:"agents"`
			}
			if err := yamlast.Unmarshal([]byte(ex), &want); err != nil {
				t.Fatalf("worc's example: %v\n%s", err, ex)
			}
			res := importConfig(t, ex)
			for _, n := range res.Unmapped {
				if strings.HasPrefix(n.Key, "agents.retry") || strings.HasPrefix(n.Key, "agents.max_stage_attempts") {
					t.Errorf("not imported: %s — %s", n.Key, n.Why)
				}
			}
			data, err := config.Marshal(res.Config)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse("config.yaml", data)
			if err != nil {
				t.Fatalf("the imported config does not validate: %v", err)
			}
			got := cfg.Agents.RetrySettings()
			if a := want.Agents; a.MaxStageAttempts != nil && got.MaxStageAttempts != *a.MaxStageAttempts {
				t.Errorf("max_stage_attempts %d, worc's example %d", got.MaxStageAttempts, *a.MaxStageAttempts)
			}
			if r := want.Agents.Retry; r != nil {
				if *r.MaxAttempts != got.MaxAttempts || *r.BaseDelayS != got.BaseDelayS || *r.MaxDelayS != got.MaxDelayS || *r.MaxBlockedS != got.MaxBlockedS {
					t.Errorf("retry %+v, worc's example max_attempts %d base %v max %v blocked %v", got, *r.MaxAttempts, *r.BaseDelayS, *r.MaxDelayS, *r.MaxBlockedS)
				}
				for _, key := range []string{"agents.retry.max_attempts", "agents.retry.base_delay_s", "agents.retry.max_delay_s", "agents.retry.max_blocked_s"} {
					if !strings.Contains(strings.Join(res.Mapped, " "), key) {
						t.Errorf("%s is not listed as taken: %v", key, res.Mapped)
					}
				}
			}
			if strings.Contains(res.Summary(), "Stratus retries") {
				t.Errorf("the summary still says Stratus drops the retry settings:\n%s", res.Summary())
			}
		})
	}
}

// Stratus's defaults are worc's: the defaults column of worc's tables.
func TestDefaults_AreWorcs(t *testing.T) {
	t.Parallel()
	doc := worcDoc(t)
	for key, want := range map[string]string{
		"max_stage_attempts": strconv.Itoa(config.DefaultMaxStageAttempts),
		"max_attempts":       strconv.Itoa(config.DefaultRetryMaxAttempts),
		"base_delay_s":       "2.0",
		"max_delay_s":        "30.0",
		"max_blocked_s":      "21600.0",
	} {
		m := regexp.MustCompile("(?m)^\\| `" + key + "` \\| [^|]+ \\| `([^`]+)` \\|").FindStringSubmatch(doc)
		if m == nil {
			t.Errorf("no row for %s in worc's tables", key)
			continue
		}
		if m[1] != want {
			t.Errorf("%s: worc's default %s, Stratus's %s", key, m[1], want)
		}
	}
	if config.DefaultRetryBaseDelayS != 2.0 || config.DefaultRetryMaxDelayS != 30.0 || config.DefaultRetryMaxBlockedS != 21600.0 {
		t.Error("the float defaults drifted from the ones checked above")
	}
}

// An integer setting written as a fraction is not taken (it would be
// truncated), and says why; a value worc would refuse reaches
// config.Parse, which names it.
func TestImport_RetryValuesWorcRefuses(t *testing.T) {
	t.Parallel()
	res := importConfig(t, "agents:\n  max_stage_attempts: 2.5\n  retry:\n    max_attempts: 1.5\n    base_delay_s: 10\n    max_delay_s: 5\n    jitter: full\n")
	notes := map[string]string{}
	for _, n := range res.Unmapped {
		notes[n.Key] = n.Why
	}
	for key, why := range map[string]string{
		"agents.max_stage_attempts": "not taken: must be an integer, got 2.5",
		"agents.retry.max_attempts": "not taken: must be an integer, got 1.5",
		"agents.retry.jitter":       "Stratus has no such setting",
	} {
		if notes[key] != why {
			t.Errorf("%s: note %q, want %q", key, notes[key], why)
		}
	}
	data, err := config.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse("config.yaml", data); err == nil || !strings.Contains(err.Error(), "agents.retry.max_delay_s: 5 is less than agents.retry.base_delay_s 10") {
		t.Errorf("max_delay_s < base_delay_s imported without a word: %v", err)
	}
}

// A worc config.yaml that is a named pipe is refused at once, naming it,
// as every other input file is (internal/inputfile): reading it blocked
// `install --from-worc` forever.
func TestImport_AConfigThatIsAFIFOIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "config.yaml"), 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Import(dir, config.Default(), nil)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "named pipe") || !strings.Contains(err.Error(), "config.yaml") {
			t.Errorf("Import of a FIFO config: %v; want it refused, naming the file and what it is", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Import blocked on a FIFO config.yaml")
	}
}

// worc configuration.md § `git`: worc's own example of the git block
// imports whole (every key taken, none listed as left out), and the config
// it gives validates with worc's values (README § Publishing).
func TestImport_WorcsGitExampleIsTakenWhole(t *testing.T) {
	t.Parallel()
	examples := yamlExamples(worcDoc(t), "auto_merge_strategy")
	if len(examples) == 0 {
		t.Fatal("want worc's § git example")
	}
	var want struct {
		Git config.Git `yaml:"git"`
	}
	if err := yamlast.Unmarshal([]byte(examples[0]), &want); err != nil {
		t.Fatal(err)
	}
	res := importConfig(t, examples[0])
	for _, n := range res.Unmapped {
		if strings.HasPrefix(n.Key, "git") {
			t.Errorf("not imported: %s — %s", n.Key, n.Why)
		}
	}
	data, err := config.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("config.yaml", data)
	if err != nil {
		t.Fatalf("the imported config does not validate: %v", err)
	}
	g := cfg.Git
	if g.PullRequests() != want.Git.PullRequests() || g.Base() != want.Git.Base() || g.AutoMerge != want.Git.AutoMerge || g.Strategy() != want.Git.Strategy() ||
		g.AutoMergeWaitForChecks != want.Git.AutoMergeWaitForChecks || g.MergeFlowName() != want.Git.MergeFlowName() ||
		g.AuditMessage("t1") != want.Git.AuditMessage("t1") || g.AuditBranch() != want.Git.AuditBranch() {
		t.Errorf("imported git %+v, worc's example %+v", g, want.Git)
	}
	if g.AuditMessage("t1") != "chore(orchestrator): audit trail for t1" {
		t.Errorf("audit message %q", g.AuditMessage("t1"))
	}
}

// README.md § Task pool (worc configuration.md § orchestrator, § paths):
// worc's task pool settings import as they are, none left out but the
// chat gate; the imported config validates with the same values.
func TestImport_OrchestratorAndPathsMapKeyByKey(t *testing.T) {
	t.Parallel()
	res := importConfig(t, "orchestrator:\n  auto_mode:\n    enabled: true\n    confirm_next_task: false\n  poll_interval_seconds: 0\n  queue: gpu\n  max_concurrent_tasks: 2\npaths:\n  tasks_dir: work/tasks\n")
	for _, n := range res.Unmapped {
		if n.Key != "orchestrator.auto_mode.confirm_next_task" {
			t.Errorf("not imported: %s — %s", n.Key, n.Why)
		}
	}
	data, err := config.Marshal(res.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("config.yaml", data)
	if err != nil {
		t.Fatalf("the imported config does not validate: %v", err)
	}
	o := cfg.Orchestrator
	if !o.AutoMode.Enabled || o.PollInterval() != 0 || o.QueueName() != "gpu" || o.MaxTasks() != 2 || cfg.Paths.Tasks() != "work/tasks" {
		t.Fatalf("imported: %+v paths %+v", o, cfg.Paths)
	}
	// worc's own examples of both blocks import without a note.
	doc := worcDoc(t)
	for _, ex := range append(yamlExamples(doc, "poll_interval_seconds"), yamlExamples(doc, "tasks_dir")...) {
		for _, n := range importConfig(t, ex).Unmapped {
			if strings.HasPrefix(n.Key, "orchestrator") && n.Key != "orchestrator.auto_mode.confirm_next_task" || strings.HasPrefix(n.Key, "paths") {
				t.Errorf("worc's example: not imported: %s — %s", n.Key, n.Why)
			}
		}
	}
}
