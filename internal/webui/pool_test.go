package webui

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// writeTask writes task id into the pool's state directory with front
// matter lines extra.
func writeTask(t *testing.T, pool *taskpool.Pool, state, id, extra string) {
	t.Helper()
	if err := os.MkdirAll(pool.Dir(state), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "---\nid: " + id + "\ntitle: " + id + "\n" + extra + "---\nDo " + id + ".\n"
	if strings.Contains(extra, "title:") {
		body = "---\nid: " + id + "\n" + extra + "---\nDo " + id + ".\n"
	}
	if err := os.WriteFile(filepath.Join(pool.Dir(state), id+".md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

var taskRow = regexp.MustCompile(`(?s)<tr data-task="([^"]*)" data-state="([^"]*)">(.*?)</tr>`)

// README.md § Task pool: the runs page shows the pool's queued tasks
// above the runs, in the order a watcher takes them (depends_on before
// priority, high > mid > low, then the file name), each with why it waits
// or the run it is in; preparing and ended tasks are not queued; a title
// is the operator's text, shown, never run.
func TestRunsPage_ShowsQueuedTasksInEligibilityOrderWithWhyTheyWait(t *testing.T) {
	s, st, _ := testViewer(t)
	ctx := context.Background()
	dir := t.TempDir()
	pool := taskpool.New(dir, ".stratus", "tasks")
	writeTask(t, pool, taskpool.Pending, "base", "priority: low\n")
	writeTask(t, pool, taskpool.Pending, "after", "priority: high\ndepends_on: [base]\n")
	writeTask(t, pool, taskpool.Pending, "gpu", "priority: high\nqueue: gpu\n")
	writeTask(t, pool, taskpool.Pending, "hot", "priority: high\n")
	writeTask(t, pool, taskpool.Pending, "m1", "title: \"<script>alert(1)</script> tidy\"\n")
	writeTask(t, pool, taskpool.Pending, "c1", "")
	writeTask(t, pool, taskpool.Preparing, "draft", "")
	writeTask(t, pool, taskpool.Done, "old", "")
	// c1 is claimed by a live watcher (this process) and its run runs.
	e, err := pool.Find(taskpool.Pending, "c1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := pool.Claim(e, "r-c1", "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Release(c) })
	st.CreateRun(ctx, stratus.Run{ID: "r-c1", TaskID: "c1", Flow: "implementation", Status: stratus.RunRunning, CreatedAt: time.Now()})
	s.src.Tasks = func(ctx context.Context) ([]taskpool.Listed, error) {
		return pool.Queued(ctx, "default", 2, st)
	}

	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/", nil)))
	body := rec.Body.String()
	if rec.Code != 200 {
		t.Fatalf("runs page: %d %s", rec.Code, body)
	}
	queued, runs, ok := strings.Cut(body, "<h1>Runs</h1>")
	if !ok || !strings.Contains(queued, "<h1>Queued tasks</h1>") || !strings.Contains(runs, `data-run="r-c1"`) {
		t.Fatalf("the queued tasks are not above the runs:\n%s", body)
	}
	var ids []string
	why := map[string]string{}
	for _, m := range taskRow.FindAllStringSubmatch(queued, -1) {
		ids = append(ids, m[1])
		why[m[1]] = m[2] + " | " + m[3]
	}
	if want := []string{"after", "gpu", "hot", "c1", "m1", "base"}; !slices.Equal(ids, want) {
		t.Errorf("queued tasks %v; want %v (high, mid, low; the file name; no preparing or done task)", ids, want)
	}
	for id, want := range map[string]string{
		"after": "waits: depends_on base",
		"gpu":   "waits: queue other",
		"hot":   "<td>next</td>",
		"c1":    `running">running</span> <a href="/runs/r-c1">r-c1</a>`,
		"m1":    "waits: queue full",
		"base":  "waits: queue full",
	} {
		if !strings.Contains(why[id], want) {
			t.Errorf("task %s reads %q; want %q in it", id, why[id], want)
		}
	}
	if !strings.Contains(why["gpu"], "<td>gpu</td>\n<td>high</td>") {
		t.Errorf("task gpu lacks its queue and priority: %q", why["gpu"])
	}
	if strings.Contains(body, "<script>alert") || !strings.Contains(why["m1"], "&lt;script&gt;alert(1)&lt;/script&gt; tidy") {
		t.Errorf("the title of m1 is not shown as text: %q", why["m1"])
	}

	// A pool that cannot be read says why; the runs are shown all the same.
	s.src.Tasks = func(context.Context) ([]taskpool.Listed, error) {
		return nil, stratus.FieldErrorf(stratus.EINVALID, "orchestrator.queue", "<b>bad</b>")
	}
	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/", nil)))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "The task pool could not be read: ") || !strings.Contains(body, "&lt;b&gt;bad") || !strings.Contains(body, `data-run="r-c1"`) {
		t.Errorf("an unreadable pool: %d\n%s", rec.Code, body)
	}

	// No pool (no pending/) and a viewer of a stack (no Tasks): no section.
	for name, tasks := range map[string]func(context.Context) ([]taskpool.Listed, error){
		"no pending/": func(ctx context.Context) ([]taskpool.Listed, error) {
			return taskpool.New(t.TempDir(), ".stratus", "tasks").Queued(ctx, "default", 1, st)
		},
		"no pool": nil,
	} {
		s.src.Tasks = tasks
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, authed(s, httptest.NewRequest("GET", "/", nil)))
		if rec.Code != 200 || strings.Contains(rec.Body.String(), "Queued tasks") {
			t.Errorf("%s: %d, and the page shows a pool:\n%s", name, rec.Code, rec.Body.String())
		}
	}
}
