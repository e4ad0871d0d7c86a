//go:build !slim

// It reads the stand-in's bucket with the AWS SDK: not in the slim build.

package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratusflow/stratus"
)

// README § On an AWS account: two projects whose tasks share an id, run on
// one stack. The second run is refused while the first runs, as a second
// run of a task is in one work dir, naming the stack and the run that
// holds the task's lock, and nothing of it is recorded; once the first has
// ended (its end, handled by the events function or its follower, released
// the lock), the second runs. Each run's ctx files and summary are its
// own objects, under runs/<run_id>/ in the bucket: the first's are intact
// after the second, and the task's logs dir names the latest run.
func TestDevAWS_TwoProjectsOneTaskID_LockedThenKeptApart(t *testing.T) {
	flags := devAWS(t)
	spy := t.TempDir()
	// The engine says which project it ran for; project a's waits while
	// the spy dir holds its hold file.
	engine := `read line
: > "$SPY/started-$MARK"
while [ -f "$SPY/hold-$MARK" ]; do sleep 0.05; done
printf '{"subrun_report": "report of project %s"}\n' "$MARK"
`
	dirA, taskA := tinyRun(t, "", engine, "{SPY: "+spy+", MARK: a}", "t-twin")
	dirB, taskB := tinyRun(t, "", engine, "{SPY: "+spy+", MARK: b}", "t-twin")
	writeTestFile(t, filepath.Join(spy, "hold-a"), "")

	r := runCLI(t, append([]string{"run", taskA, "--dir", dirA, "--detach", "--json"}, flags...)...)
	var a struct {
		RunID string `json:"run_id"`
	}
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &a) != nil || a.RunID == "" {
		t.Fatalf("run --detach of project a: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(spy, "started-a")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("project a's first engine did not start within 90 s")
		}
	}

	// Project a's run is running (its engine waits): project b's is refused.
	stack := flags[slices.Index(flags, "--stack")+1]
	r = runCLI(t, append([]string{"run", taskB, "--dir", dirB}, flags...)...)
	want := "task t-twin is already running on stack " + stack + " (lock: run " + a.RunID + " holds it); wait for it or stop it first (stratus cancel " + a.RunID + " --target aws)"
	if r.code != ExitUsage || !strings.Contains(r.stderr, want) {
		t.Fatalf("a second run of t-twin while the first runs: exit %d\n%s\nwant exit %d and %q", r.code, r.stderr, ExitUsage, want)
	}
	if _, err := os.Stat(filepath.Join(spy, "started-b")); err == nil {
		t.Errorf("the refused run started an engine")
	}
	if r := runCLI(t, append([]string{"status", "t-twin", "--json"}, flags...)...); r.code != ExitOK || !strings.Contains(r.stdout, `"run_id": "`+a.RunID+`"`) {
		t.Errorf("the task's latest run after the refusal: exit %d\n%s%s\nwant %s (the refused run not recorded)", r.code, r.stdout, r.stderr, a.RunID)
	}

	// Project a's run goes to its end; then project b's runs.
	os.Remove(filepath.Join(spy, "hold-a"))
	if r := runCLI(t, append([]string{"status", a.RunID, "--follow"}, flags...)...); r.code != ExitOK {
		t.Fatalf("project a's run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runCLI(t, append([]string{"run", taskB, "--dir", dirB, "--json"}, flags...)...)
	if r.code != ExitOK {
		t.Fatalf("project b's run after project a's ended: exit %d\n%s", r.code, r.stderr)
	}
	b := decodeRun(t, r.stdout)

	// Each run's summary and ctx files are its own objects.
	statusA := runCLI(t, append([]string{"status", a.RunID, "--json"}, flags...)...)
	var sa StatusResult
	if err := json.Unmarshal([]byte(statusA.stdout), &sa); err != nil || statusA.code != ExitOK {
		t.Fatalf("status of project a's run: exit %d %v\n%s%s", statusA.code, err, statusA.stdout, statusA.stderr)
	}
	if len(sa.Summary) != 2 || len(b.Summary) != 2 || slices.ContainsFunc(sa.Summary, func(u string) bool { return slices.Contains(b.Summary, u) }) {
		t.Fatalf("summaries: project a %v, project b %v; want two each, none shared", sa.Summary, b.Summary)
	}
	bucket, _, _ := strings.Cut(strings.TrimPrefix(b.Summary[0], "s3://"), "/")
	s3c := standInS3(t, flags)
	objects := func(prefix string) map[string]string {
		t.Helper()
		out, err := s3c.ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, o := range out.Contents {
			g, err := s3c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: o.Key})
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(g.Body)
			g.Body.Close()
			m[strings.TrimPrefix(aws.ToString(o.Key), prefix)] = string(body)
		}
		return m
	}
	for _, run := range []struct{ id, mark, other string }{{a.RunID, "a", "b"}, {b.RunID, "b", "a"}} {
		files := "stratus/runs/" + run.id + "/workdir/"
		ctxFiles := objects(files + "workspace/tasks/t-twin/ctx/")
		if ctxFiles["first.md"] == "" || !strings.Contains(ctxFiles["first.md"], "report of project "+run.mark) {
			t.Errorf("run %s's ctx first.md = %q; want project %s's report (ctx files %v)", run.id, ctxFiles["first.md"], run.mark, sortedKeys(ctxFiles))
		}
		for name, body := range ctxFiles {
			if strings.Contains(body, "report of project "+run.other) {
				t.Errorf("run %s's ctx file %s holds project %s's report:\n%s", run.id, name, run.other, body)
			}
		}
		if md := objects(files + ".stratus/logs/t-twin/")["summary.md"]; !strings.Contains(md, ", run `"+run.id+"`") {
			t.Errorf("run %s's summary.md does not name it:\n%s", run.id, md)
		}
	}
	if shared := objects("stratus/workspace/"); len(shared) != 0 {
		t.Errorf("ctx files outside the runs: %v", sortedKeys(shared))
	}
	if latest := objects("stratus/.stratus/logs/t-twin/"); strings.TrimSpace(latest["run_id"]) != b.RunID || len(latest) != 1 {
		t.Errorf("the task's logs dir in the bucket: %v; want only run_id naming the latest run %s", latest, b.RunID)
	}
	// The task id names its latest run, whose own summary status shows.
	latest := runCLI(t, append([]string{"status", "t-twin", "--json"}, flags...)...)
	var sl StatusResult
	if err := json.Unmarshal([]byte(latest.stdout), &sl); err != nil || sl.RunID != b.RunID || !slices.Equal(sl.Summary, b.Summary) {
		t.Errorf("status t-twin: run %s, summary %v (%v); want the latest run %s and its summary %v", sl.RunID, sl.Summary, err, b.RunID, b.Summary)
	}
	if r := runCLI(t, append([]string{"logs", "t-twin", "--json"}, flags...)...); r.code != ExitOK {
		t.Errorf("logs t-twin: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if b.Status != stratus.RunDone || sa.Status != stratus.RunDone {
		t.Errorf("project a's run %s, project b's %s; want both done", sa.Status, b.Status)
	}
}

// standInS3 is an S3 client on the stand-in whose flags `stratus dev aws`
// printed (any credentials do).
func standInS3(t *testing.T, flags []string) *awss3.Client {
	t.Helper()
	arg := func(name string) string {
		i := slices.Index(flags, name)
		if i < 0 || i+1 >= len(flags) {
			t.Fatalf("the stand-in's flags %v have no %s", flags, name)
		}
		return flags[i+1]
	}
	return awss3.New(awss3.Options{Region: arg("--region"), BaseEndpoint: aws.String(arg("--endpoint-url")), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
}
