//go:build !slim

// It reads the stand-in's bucket with the AWS SDK: not in the slim build.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/taskpool"
)

// README.md § Task pool, on a stack: five tasks — priorities, a queue the
// stack's claim does not serve, a depends_on chain — submitted on `dev aws`
// with MaxConcurrentTasks 2. submit returns at once and nothing of the
// operator's runs after it: the claim function (woken by the submit, by
// each run's end, by the task files) starts the runs, never more than two
// at a time, t2 only once t3, which it depends on, is done; each task runs
// once and its file moves to tasks/done/ beside its summary; the other
// queue's task stays pending, waiting "queue other".
func TestDevAWS_SubmittedTasksRunByTheClaimFunction(t *testing.T) {
	flags, devlog, _ := devAWSLog(t, []string{"--max-concurrent-tasks", "2"})
	engine := "read line\nsleep 1\nprintf '{\"subrun_report\": \"done\"}\\n'\n"
	dir, _ := tinyRun(t, "", engine, "{}", "t0")
	front := map[string]string{
		"t1": "priority: low\n",
		"t2": "priority: high\ndepends_on: [t3]\n",
		"t3": "priority: mid\n",
		"t4": "priority: high\nqueue: other\n",
		"t5": "priority: high\n",
	}
	var files []string
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5"} {
		f := filepath.Join(dir, "incoming", id+".md")
		writeTestFile(t, f, "---\nid: "+id+"\ntitle: "+id+"\ntask_type: tiny\n"+front[id]+"---\nbody\n")
		files = append(files, f)
	}
	r := runCLI(t, append(append([]string{"submit"}, files...), append([]string{"--dir", dir, "--json"}, flags...)...)...)
	var queued []SubmitResult
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &queued) != nil || len(queued) != 5 {
		t.Fatalf("submit --target aws: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, q := range queued {
		if q.RunID == "" || !strings.HasPrefix(q.File, "s3://") || !strings.HasSuffix(q.File, "/tasks/pending/"+q.TaskID+".md") {
			t.Errorf("submitted %+v; want a prepared run and its file under tasks/pending/", q)
		}
	}

	// From here on no process of the operator's runs: each look below is
	// a command that reads and exits.
	var pool []taskpool.Listed
	eventually(t, 4*time.Minute, "the claim function runs t1, t2, t3 and t5 to done", func() bool {
		r := runCLI(t, append([]string{"tasks", "--json"}, flags...)...)
		if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &pool) != nil {
			t.Fatalf("tasks --target aws: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		done := 0
		for _, l := range pool {
			if l.State == taskpool.Done {
				done++
			}
			if l.State == taskpool.Failed {
				t.Fatalf("task %s failed: %+v\ndev aws:\n%s", l.ID, pool, devlog.String())
			}
		}
		return done == 4
	})
	for _, l := range pool {
		if l.ID == "t4" && (l.State != taskpool.Pending || l.Waits != "queue other") {
			t.Errorf("t4, of another queue: %+v; want pending, waiting queue other", l)
		}
	}

	r = runCLI(t, append([]string{"runs", "--json"}, flags...)...)
	var runs []runview.RunLine
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &runs) != nil {
		t.Fatalf("runs --target aws: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	byTask := map[string][]runview.RunLine{}
	for _, l := range runs {
		byTask[l.TaskID] = append(byTask[l.TaskID], l)
	}
	for _, id := range []string{"t1", "t2", "t3", "t5"} {
		if len(byTask[id]) != 1 || byTask[id][0].Status != stratus.RunDone {
			t.Errorf("runs of %s: %+v; want one, done", id, byTask[id])
		}
	}
	if len(byTask["t4"]) != 0 {
		t.Errorf("t4, of another queue, ran: %+v", byTask["t4"])
	}
	// Never more than MaxConcurrentTasks at once: at each run's start,
	// the runs started and not ended.
	for _, a := range runs {
		at := 0
		for _, b := range runs {
			if !b.CreatedAt.After(a.CreatedAt) && b.EndedAt.After(a.CreatedAt) {
				at++
			}
		}
		if at > 2 {
			t.Errorf("%d runs at once when %s started (MaxConcurrentTasks 2): %+v", at, a.RunID, runs)
		}
	}
	if t2, t3 := byTask["t2"], byTask["t3"]; len(t2) == 1 && len(t3) == 1 && t2[0].CreatedAt.Before(t3[0].EndedAt) {
		t.Errorf("t2 started at %v, before t3, which it depends on, ended at %v", t2[0].CreatedAt, t3[0].EndedAt)
	}

	// Each done task's file and summary are under tasks/done/.
	s3c := standInS3(t, flags)
	bucket, _, _ := strings.Cut(strings.TrimPrefix(queued[0].File, "s3://"), "/")
	out, err := s3c.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String("stratus/tasks/")})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range out.Contents {
		keys = append(keys, strings.TrimPrefix(aws.ToString(o.Key), "stratus/tasks/"))
	}
	for _, id := range []string{"t1", "t2", "t3", "t5"} {
		for _, k := range []string{"done/" + id + ".md", "done/" + id + ".summary.md"} {
			if !slices.Contains(keys, k) {
				t.Errorf("no tasks/%s in the bucket: %v", k, keys)
			}
		}
	}
	if !slices.Contains(keys, "pending/t4.md") {
		t.Errorf("t4 left pending/: %v", keys)
	}

	// A task file written straight under tasks/pending/, by anyone who may
	// write there: the claim prepares its run from the pool's environment
	// (the last submit's work dir, config and flows) and runs it; one whose
	// flow the pool does not have goes to tasks/failed/ with the reason.
	for id, typ := range map[string]string{"t6": "tiny", "t7": "nosuch"} {
		body := "---\nid: " + id + "\ntitle: " + id + "\ntask_type: " + typ + "\n---\nbody\n"
		if _, err := s3c.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("stratus/tasks/pending/" + id + ".md"),
			Body: strings.NewReader(body)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) string {
		out, err := s3c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return ""
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return string(b)
	}
	eventually(t, 3*time.Minute, "t6, written straight into the pool, runs to done; t7 is refused", func() bool {
		return get("stratus/tasks/done/t6.summary.md") != "" && get("stratus/tasks/failed/t7.summary.md") != ""
	})
	if sum := get("stratus/tasks/failed/t7.summary.md"); !strings.Contains(sum, `flow "nosuch" is not among the flows`) {
		t.Errorf("t7's summary: %q; want the flow named", sum)
	}
	if get("stratus/tasks/done/t6.md") == "" || get("stratus/tasks/pending/t6.md") != "" {
		t.Errorf("t6's file did not move from pending/ to done/")
	}
	if t.Failed() {
		fmt.Println(devlog.String())
	}
}
