package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/projection"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/testenv"
)

func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	var se *stratus.Error
	if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != field {
		t.Errorf("err = %v, want *stratus.Error EINVALID Field %q", err, field)
	}
}

// docs/contracts.md § Files are the server's job: every vector of
// testdata/cases/partnames.
func TestCheckPartName_SharedVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(testenv.Cases(t, "partnames", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct{ Accept, Reject []string }
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Accept) == 0 || len(v.Reject) == 0 {
		t.Fatal("empty partname vectors")
	}
	for _, name := range v.Accept {
		if err := projection.CheckPartName(name); err != nil {
			t.Errorf("CheckPartName(%q) = %v, want accepted", name, err)
		}
	}
	for _, name := range v.Reject {
		err := projection.CheckPartName(name)
		wantInvalid(t, err, "name")
		if err != nil && !strings.Contains(stratus.ErrorMessage(err), "want a plain file name") {
			t.Errorf("CheckPartName(%q) message %q should say what is valid", name, stratus.ErrorMessage(err))
		}
	}
}

// docs/contracts.md § Files are the server's job (cases/partnames README:
// names no portable file system can hold): each refusal names its rule.
func TestCheckPartName_RefusalNamesTheRule(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, rule string }{
		{"", "is empty"},
		{".", `"." or ".."`},
		{"a/b", `contains "/"`},
		{`a\b`, `contains "\"`},
		{"a..b", `contains ".."`},
		{"a\x00b", "NUL"},
		{"a\tb", "control character"},
		{"a\u0085b", "control character"},
		{"d:x", "drive prefix"},
		{"a\xffb", "UTF-8"},
		{strings.Repeat("x", 256), "255 bytes"},
	}
	for _, tt := range tests {
		err := projection.CheckPartName(tt.name)
		if !strings.Contains(stratus.ErrorMessage(err), tt.rule) {
			t.Errorf("CheckPartName(%.20q) = %v, want a message naming %q", tt.name, err, tt.rule)
		}
	}
	for _, ok := range []string{strings.Repeat("x", 255), "ünïcødé 名前.md"} {
		if err := projection.CheckPartName(ok); err != nil {
			t.Errorf("CheckPartName(%.20q) = %v, want accepted", ok, err)
		}
	}
}

func sampleFM() projection.FrontMatter {
	return projection.FrontMatter{
		TaskID:      "T-17",
		Step:        "review",
		StepRef:     "review#2",
		Attempt:     3,
		Agent:       "reviewer",
		Format:      "json",
		SHA256:      "00ff",
		Bytes:       2,
		SubmittedAt: time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600)),
	}
}

// docs/contracts.md § Files are the server's job: the final body is
// front-matter wrapped, written as YAML in UTC RFC 3339.
func TestEncode_FrontMatterThenBodyVerbatim(t *testing.T) {
	t.Parallel()
	got, err := projection.Encode(sampleFM(), []byte("body"))
	if err != nil {
		t.Fatal(err)
	}
	want := "---\n" +
		"task_id: T-17\n" +
		"step: review\n" +
		"step_ref: \"review#2\"\n" +
		"attempt: 3\n" +
		"agent: reviewer\n" +
		"format: json\n" +
		"sha256: 00ff\n" +
		"bytes: 2\n" +
		"submitted_at: 2025-03-04T04:06:07Z\n" +
		"---\n" +
		"body"
	if string(got) != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
}

// docs/contracts.md § Files are the server's job: the wrapped file is
// round-trippable — Decode is Encode's exact inverse.
func TestDecode_RoundTripsEveryBodyExactly(t *testing.T) {
	t.Parallel()
	bodies := []string{
		"",
		"plain",
		"no trailing newline",
		"---",
		"---\n",
		"---\ntask_id: evil\n---\nbody",
		"a\n---\nb\n---\n",
		"\n\n",
		"\r\n---\r\n",
		"```json\n{\"a\":1}\n```\n",
		"\x00\xff\xfe binary",
	}
	strs := []string{"", "---", "x\n---\ny", "a\tb", "? x", ".inf", "yes", "null", "123", "#c", "a: b", "'\"", " lead", "trail ", "\r", "\u2028", "~", "review#2", "é 名"}
	for _, body := range bodies {
		for i, s := range strs {
			fm := sampleFM()
			fm.SubmittedAt = time.Date(2025, 1, 2, 3, 4, 5, 123456789, time.UTC)
			switch i % 4 {
			case 0:
				fm.TaskID = s
			case 1:
				fm.Agent = s
			case 2:
				fm.StepRef = s
			case 3:
				fm.Format = s
			}
			doc, err := projection.Encode(fm, []byte(body))
			if err != nil {
				t.Fatalf("Encode(%q, %q): %v", s, body, err)
			}
			gotFM, gotBody, err := projection.Decode(doc)
			if err != nil {
				t.Fatalf("Decode(%q): %v", doc, err)
			}
			if !bytes.Equal(gotBody, []byte(body)) {
				t.Errorf("body %q came back %q", body, gotBody)
			}
			if !gotFM.SubmittedAt.Equal(fm.SubmittedAt) || gotFM.SubmittedAt.Location() != time.UTC {
				t.Errorf("submitted_at %v came back %v", fm.SubmittedAt, gotFM.SubmittedAt)
			}
			gotFM.SubmittedAt = fm.SubmittedAt
			if !reflect.DeepEqual(gotFM, fm) {
				t.Errorf("front matter %+v came back %+v", fm, gotFM)
			}
		}
	}
}

// docs/contracts.md § Files are the server's job: what cannot round-trip is
// refused rather than written lossy, and a document Encode did not write is
// EINVALID.
func TestDecode_RefusesWhatEncodeDidNotWrite(t *testing.T) {
	t.Parallel()
	fm := sampleFM()
	fm.Agent = "bad\xff"
	_, err := projection.Encode(fm, nil)
	wantInvalid(t, err, "front_matter")

	for _, doc := range []string{"", "body", "--- \nx: 1\n---\n", "---\r\ntask_id: x\r\n---\r\n", "---\ntask_id: x\n", "---\n: : :\n---\n", "---\nattempt: many\n---\n"} {
		_, _, err := projection.Decode([]byte(doc))
		wantInvalid(t, err, "front_matter")
	}
}

// docs/contracts.md § Files are the server's job: <ctx-dir> resolves through
// the placement (default workspace/tasks/{task_id}/ctx); a task id that would
// escape is refused.
func TestCtxDir_PlacementAndEscapingTaskID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		placement, taskID, want string
	}{
		{"", "T-17", "workspace/tasks/T-17/ctx"},
		{projection.DefaultPlacement, "a b", "workspace/tasks/a b/ctx"},
		{"out/{task_id}/", "T1", "out/T1"},
		{"ctx/{task_id}/{task_id}", "T1", "ctx/T1/T1"},
		{"shared", "T1", "shared"},
		{"", "{task_id}", "workspace/tasks/{task_id}/ctx"},
	}
	for _, tt := range tests {
		got, err := projection.CtxDir(tt.placement, tt.taskID)
		if err != nil || got != tt.want {
			t.Errorf("CtxDir(%q, %q) = %q, %v; want %q", tt.placement, tt.taskID, got, err, tt.want)
		}
	}
	for _, id := range []string{"", ".", "..", "../x", "a/b", `a\b`, "a..b", "C:", "a\x00"} {
		_, err := projection.CtxDir("", id)
		wantInvalid(t, err, "task_id")
	}
	for _, p := range []string{"/abs/{task_id}", "../{task_id}", "a/../../{task_id}", "a//{task_id}", "./{task_id}"} {
		_, err := projection.CtxDir(p, "T1")
		wantInvalid(t, err, "placement")
	}
}

type setup struct {
	ctx  context.Context
	sink *fs.Sink
	fm   projection.FrontMatter
}

func newSetup(t *testing.T) setup {
	t.Helper()
	return setup{ctx: context.Background(), sink: fs.New(t.TempDir()), fm: sampleFM()}
}

func (s setup) get(t *testing.T, key string) []byte {
	t.Helper()
	b, err := s.sink.Get(s.ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return b
}

// docs/contracts.md § Files are the server's job: the final body lands
// wrapped as <ctx-dir>/<step>.md with its own checksum; each part lands raw.
func TestProject_BodyWrappedPartsRaw(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	body := []byte("# Review\n\nLooks good.")
	plan := []byte(`{"lanes": [1.50, 2]}`) // JSON stays bytes on disk, not a folded value
	parts := []projection.Part{
		{Name: "plan.md", Body: []byte("v1")},
		{Name: "plan-meta.json", Body: plan},
		{Name: "plan.md", Body: []byte("# Plan\n")},
		{Name: ".hidden", Body: nil},
	}
	written, err := projection.Project(s.ctx, s.sink, "workspace/tasks/T-17/ctx", "review", s.fm, body, parts)
	if skipped := projection.SkippedParts("review", parts); err != nil || len(skipped) != 0 {
		t.Fatalf("Project: %v, skipped %v", err, skipped)
	}
	want := []string{
		"workspace/tasks/T-17/ctx/review.md",
		"workspace/tasks/T-17/ctx/plan.md",
		"workspace/tasks/T-17/ctx/plan-meta.json",
		"workspace/tasks/T-17/ctx/.hidden",
	}
	if !reflect.DeepEqual(written, want) {
		t.Errorf("written = %q, want %q", written, want)
	}
	fm, gotBody, err := projection.Decode(s.get(t, want[0]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotBody, body) {
		t.Errorf("body = %q, want %q", gotBody, body)
	}
	if sha, n := projection.Checksum(body); fm.SHA256 != sha || fm.Bytes != n || fm.TaskID != "T-17" {
		t.Errorf("front matter %+v, want sha256 %s bytes %d", fm, sha, n)
	}
	if got := s.get(t, want[1]); string(got) != "# Plan\n" {
		t.Errorf("plan.md = %q, want the last staging", got)
	}
	if got := s.get(t, want[2]); !bytes.Equal(got, plan) {
		t.Errorf("plan-meta.json = %q, want %q verbatim", got, plan)
	}
	if got := s.get(t, want[3]); len(got) != 0 {
		t.Errorf(".hidden = %q, want empty", got)
	}
}

// docs/contracts.md § Files are the server's job: a bad part name skips its
// file fail-open; the body and the good parts are still written.
func TestProject_BadPartNameSkippedFailOpen(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	parts := []projection.Part{
		{Name: "../escape", Body: []byte("x")},
		{Name: "ok.txt", Body: []byte("ok")},
		{Name: "a/b", Body: []byte("x")},
		{Name: "plan.md", Body: []byte("would clobber the body")},
	}
	written, err := projection.Project(s.ctx, s.sink, "ctx", "plan", s.fm, []byte("b"), parts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ctx/plan.md", "ctx/ok.txt"}; !reflect.DeepEqual(written, want) {
		t.Errorf("written = %q, want %q", written, want)
	}
	skipped := projection.SkippedParts("plan", parts)
	codes := []string{}
	for _, e := range skipped {
		codes = append(codes, stratus.ErrorCode(e))
	}
	if want := []string{stratus.EINVALID, stratus.EINVALID, stratus.ECONFLICT}; !reflect.DeepEqual(codes, want) {
		t.Errorf("skipped codes = %q (%v), want %q", codes, skipped, want)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(s.sink.Root()), "escape")); !os.IsNotExist(err) {
		t.Errorf("escaping part written outside the root")
	}
	if _, body, _ := projection.Decode(s.get(t, "ctx/plan.md")); string(body) != "b" {
		t.Errorf("body file clobbered: %q", body)
	}
}

// docs/contracts.md § Files are the server's job: the step and ctx dir become
// path segments, so they must be safe; a failure there writes nothing.
func TestProject_BadStepOrCtxDirIsFatal(t *testing.T) {
	t.Parallel()
	s := newSetup(t)
	for _, step := range []string{"", "..", "a/b", strings.Repeat("s", 253)} {
		_, err := projection.Project(s.ctx, s.sink, "ctx", step, s.fm, nil, nil)
		wantInvalid(t, err, "step")
	}
	for _, dir := range []string{"", "/abs", "../up", "a/../../b"} {
		_, err := projection.Project(s.ctx, s.sink, dir, "plan", s.fm, nil, nil)
		wantInvalid(t, err, "ctx_dir")
	}
	if entries, _ := os.ReadDir(s.sink.Root()); len(entries) != 0 {
		t.Errorf("root holds %d entries after refused projections, want none", len(entries))
	}
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	if _, err := projection.Project(ctx, s.sink, "ctx", "plan", s.fm, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: err %v, want context.Canceled", err)
	}
}
