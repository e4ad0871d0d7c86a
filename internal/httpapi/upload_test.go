package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/workerclient"
)

// docs/security.md § Upload size limits: a part and a final body over the
// inline limit go through an upload — the same client code on both runtimes
// (here the embedded one: the fs sink, so the URL is this API's blob route) —
// and arrive whole: the tail, the ctx part and the projection hold every
// byte, and the uploads are gone once recorded. Before the fix the client
// sent them inline and the API answered 413.
func TestUpload_LargePartAndFinalGoThroughAnUpload(t *testing.T) {
	b := setup(t)
	b.svc.MaxBodyBytes = 64 << 10 // the inline limit
	b.svc.MaxUploadBytes = 1 << 20
	spec := b.dispatchSpec(t, "planning", "tok-1")
	c := &workerclient.Client{BaseURL: b.srv.URL, Credential: spec.Handle, InlineBytes: 16 << 10}
	ctx := context.Background()
	part := bytes.Repeat([]byte("p"), 200<<10)
	final := bytes.Repeat([]byte("f"), 300<<10)

	// Inline, the API refuses it, naming both limits.
	code, body := b.do(t, "POST", "/v1/worker/artifact?name=plan.md", "Bearer "+spec.Handle, string(part))
	if code != 413 || !strings.Contains(body, "65536 bytes for a body sent inline") || !strings.Contains(body, "POST /v1/worker/upload (up to 1048576 bytes)") {
		t.Fatalf("inline 200 KiB part = %d %s; want 413 naming the inline limit and the upload route's", code, body)
	}
	if err := c.Artifact(ctx, "plan.md", part); err != nil {
		t.Fatalf("Artifact(200 KiB): %v", err)
	}
	sv, err := c.Submit(ctx, spec.TaskID, final)
	if err != nil {
		t.Fatalf("Submit(300 KiB): %v", err)
	}
	if sv.Bytes != len(final) || sv.Outcome != "done" || !slices.Contains(sv.Parts, "plan.md") {
		t.Errorf("step value %+v; want %d bytes, done, part plan.md", sv, len(final))
	}
	got, err := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/plan.md"))
	if err != nil || !bytes.Equal(got, part) {
		t.Errorf("ctx plan.md: %d bytes (%v); want the 200 KiB part", len(got), err)
	}
	proj, err := os.ReadFile(filepath.Join(b.dir, "workspace/tasks/t1/ctx/planning.md"))
	if err != nil || !bytes.HasSuffix(bytes.TrimRight(proj, "\n"), final) {
		t.Errorf("projection planning.md: %d bytes (%v); want it to end with the 300 KiB body", len(proj), err)
	}
	tail, err := b.svc.Store.ListOutput(ctx, spec.TaskID, 1)
	if err != nil {
		t.Fatal(err)
	}
	var finalEv []byte
	for _, e := range tail {
		if e.Kind == stratus.OutputFinal {
			finalEv = e.Body
		}
	}
	if !bytes.Equal(finalEv, final) {
		t.Errorf("the tail's Final holds %d bytes; want the 300 KiB body", len(finalEv))
	}
	left, _ := filepath.Glob(filepath.Join(b.dir, ".stratus/uploads/r1/*"))
	if len(left) != 0 {
		t.Errorf("uploads left after they were recorded: %v", left)
	}
}

// A result (POST /v1/worker/result) over the inline limit goes through an
// upload too: its body is the value as the result would have made it.
func TestUpload_LargeResultGoesThroughAnUpload(t *testing.T) {
	b := setup(t)
	b.svc.MaxBodyBytes = 64 << 10
	spec := b.dispatchSpec(t, "planning", "tok-1")
	c := &workerclient.Client{BaseURL: b.srv.URL, Credential: spec.Handle}
	text := strings.Repeat("r", 100<<10)
	value, _ := json.Marshal(text)
	ok := true
	sv, err := c.Result(context.Background(), worker.ResultBody{TaskID: spec.TaskID, Value: value, OK: &ok})
	if err != nil || sv.Bytes != len(text) {
		t.Fatalf("Result(100 KiB string) = %+v, %v; want %d bytes (the string as is) after a 413 and an upload", sv, err, len(text))
	}
}

// The upload route's refusals, each with its status and field; nothing is
// stored by a refused request.
func TestUpload_Refusals(t *testing.T) {
	b := setup(t)
	b.svc.MaxUploadBytes = 1000
	b.svc.Minter.TTL = time.Hour // the handle outlives the upload's 15 minutes
	spec := b.dispatchSpec(t, "planning", "tok-1")
	auth := "Bearer " + spec.Handle
	ask := func(n int) worker.Upload {
		t.Helper()
		code, body := b.do(t, "POST", "/v1/worker/upload", auth, `{"bytes":`+itoa(n)+`}`)
		var u worker.Upload
		if code != 200 || json.Unmarshal([]byte(body), &u) != nil || u.MaxBytes != 1000 || !strings.HasPrefix(u.URL, "/v1/worker/workspace/blob?key=") {
			t.Fatalf("upload of %d bytes = %d %s", n, code, body)
		}
		return u
	}
	for _, c := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"zero bytes", `{"bytes":0}`, 400, `"field":"bytes"`},
		{"over the limit", `{"bytes":1001}`, 413, "over the limit of 1000 bytes for a body sent through an upload"},
		{"unknown field", `{"bytes":10,"name":"x"}`, 400, "unknown field"},
		{"a string", `{"bytes":"abc"}`, 400, `"message":"a JSON string is not valid here; valid: a JSON integer","field":"bytes"`},
		{"a fraction", `{"bytes":1.5}`, 400, `"field":"bytes"`},
		{"missing", `{}`, 400, `(or missing) is not a body size; valid: 1 to 1000 bytes","field":"bytes"`},
		{"an empty body", ``, 400, `"message":"empty; valid: a JSON object","field":"body"`},
	} {
		if code, body := b.do(t, "POST", "/v1/worker/upload", auth, c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	if code, _ := b.do(t, "POST", "/v1/worker/upload", "", `{"bytes":10}`); code != 401 {
		t.Errorf("upload without a credential = %d; want 401", code)
	}

	u := ask(10)
	for _, c := range []struct {
		name, path, body string
		code             int
		want             string
	}{
		{"nothing uploaded yet", "/v1/worker/submit?upload=" + u.Key, "", 400, "nothing was uploaded"},
		{"another attempt's key", "/v1/worker/submit?upload=" + strings.Replace(u.Key, ".a1.", ".a2.", 1), "", 400, "is not an upload of attempt 1"},
		{"a key outside uploads", "/v1/worker/artifact?name=x.md&upload=workspace/tasks/t1/ctx/x.md", "", 400, `"field":"upload"`},
		{"a body beside the upload", "/v1/worker/submit?upload=" + u.Key, "inline too", 400, "carries no body"},
		{"an empty upload parameter", "/v1/worker/submit?upload=", "", 400, `"field":"upload"`},
		{"an empty upload parameter on a part", "/v1/worker/artifact?name=p.md&upload=", "", 400, `"field":"upload"`},
		{"a key never issued", "/v1/worker/submit?upload=" + u.Key[:len(u.Key)-1] + flip(u.Key[len(u.Key)-1:]), "", 400, "was not issued by this API"},
		{"a path under the attempt's prefix", "/v1/worker/artifact?name=p.md&upload=" + strings.TrimSuffix(u.Key, u.Key[strings.LastIndex(u.Key, ".a1.")+4:]) + "s/dummy-secret12", "", 400, "is not an upload of attempt 1"},
	} {
		if code, body := b.do(t, "POST", c.path, auth, c.body); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s; want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
	// A PUT to another key than the attempt's, or of another size than
	// the upload was asked for, is refused.
	if code, body := b.do(t, "PUT", "/v1/worker/workspace/blob?key=.stratus/uploads/r1/other", auth, "x"); code != 400 {
		t.Errorf("PUT to a key that is no upload of the attempt = %d %s; want 400", code, body)
	}
	if code, body := b.do(t, "PUT", u.URL, auth, "eleven byte"); code != 400 || !strings.Contains(body, "11 bytes came; the upload was asked for 10") {
		t.Errorf("PUT of 11 bytes to a 10-byte upload = %d %s; want 400", code, body)
	}
	// An attempt holds at most worker.MaxPendingUploads stored and unnamed.
	for range worker.MaxPendingUploads {
		p := ask(1)
		if code, body := b.do(t, "PUT", p.URL, auth, "x"); code != 204 {
			t.Fatalf("PUT %s = %d %s", p.URL, code, body)
		}
	}
	if code, body := b.do(t, "POST", "/v1/worker/upload", auth, `{"bytes":1}`); code != 409 || !strings.Contains(body, "not yet named") {
		t.Errorf("upload past the pending limit = %d %s; want 409", code, body)
	}
	os.RemoveAll(filepath.Join(b.dir, ".stratus/uploads"))
	// Keys asked for first and stored after are counted at the PUT too.
	var asked []worker.Upload
	for range worker.MaxPendingUploads + 1 {
		asked = append(asked, ask(1))
	}
	for i, p := range asked {
		code, body := b.do(t, "PUT", p.URL, auth, "x")
		if want := map[bool]int{true: 409, false: 204}[i == worker.MaxPendingUploads]; code != want {
			t.Errorf("PUT %d of %d asked = %d %s; want %d", i+1, len(asked), code, body, want)
		}
	}
	os.RemoveAll(filepath.Join(b.dir, ".stratus/uploads"))

	// Nothing outside the attempt's uploads is read, written or deleted
	// through a link planted there, and a FIFO at a
	// key never blocks a request: each is a 400.
	secret := filepath.Join(b.dir, ".stratus", "secret.txt")
	os.WriteFile(secret, []byte("0123456789"), 0o600)
	runDir := filepath.Join(b.dir, ".stratus", "uploads", "r1")
	os.MkdirAll(runDir, 0o755)
	leak := ask(10)
	if err := os.Symlink(secret, filepath.Join(b.dir, leak.Key)); err != nil {
		t.Fatal(err)
	}
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=leak.md&upload="+leak.Key, auth, ""); code != 400 || !strings.Contains(body, "symbolic link") {
		t.Errorf("naming an upload that is a link to a secret = %d %s; want 400", code, body)
	}
	fifo := ask(10)
	if err := syscall.Mkfifo(filepath.Join(b.dir, fifo.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=fifo.md&upload="+fifo.Key, auth, ""); code != 400 || !strings.Contains(body, "not a regular file") {
		t.Errorf("naming an upload that is a FIFO = %d %s; want 400", code, body)
	}
	dirKey := ask(4)
	os.MkdirAll(filepath.Join(b.dir, dirKey.Key), 0o755)
	if code, body := b.do(t, "PUT", dirKey.URL, auth, "abcd"); code != 400 {
		t.Errorf("PUT onto a directory = %d %s; want 400", code, body)
	}
	os.RemoveAll(runDir)
	elsewhere := filepath.Join(b.dir, "elsewhere")
	os.MkdirAll(elsewhere, 0o755)
	if err := os.Symlink(elsewhere, runDir); err != nil {
		t.Fatal(err)
	}
	out := ask(5)
	if code, body := b.do(t, "PUT", out.URL, auth, "hello"); code != 400 || !strings.Contains(body, "symbolic link") {
		t.Errorf("PUT through a linked uploads dir = %d %s; want 400", code, body)
	}
	if left, _ := os.ReadDir(elsewhere); len(left) != 0 {
		t.Errorf("a PUT wrote outside the uploads: %v", left)
	}
	os.Remove(runDir)
	if b, err := os.ReadFile(secret); err != nil || string(b) != "0123456789" {
		t.Errorf("the secret: %q %v; want it untouched", b, err)
	}

	// Whatever a URL's holder stored, the server reads at most the limit:
	// an upload over it is 413 and is deleted.
	big := ask(1000)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(b.dir, big.Key)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(b.dir, big.Key), bytes.Repeat([]byte("x"), 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := b.do(t, "POST", "/v1/worker/submit?upload="+big.Key, auth, ""); code != 413 || !strings.Contains(body, "holds more than the 1000 bytes it was asked for") {
		t.Errorf("submit of a 5000-byte upload = %d %s; want 413", code, body)
	}
	if _, err := os.Stat(filepath.Join(b.dir, big.Key)); !os.IsNotExist(err) {
		t.Errorf("the oversized upload is still stored (%v)", err)
	}
	// A request refused for good (here a part that would overwrite a
	// projection) deletes the upload it named: the worker asks again.
	refused := ask(10)
	if code, _ := b.do(t, "PUT", refused.URL, auth, "0123456789"); code != 204 {
		t.Fatalf("PUT %s = %d", refused.URL, code)
	}
	if code, body := b.do(t, "POST", "/v1/worker/artifact?name=planning.md&upload="+refused.Key, auth, ""); code != 400 {
		t.Errorf("artifact over a projection = %d %s; want 400", code, body)
	}
	if _, err := os.Stat(filepath.Join(b.dir, refused.Key)); !os.IsNotExist(err) {
		t.Errorf("the upload of a refused request is still stored (%v)", err)
	}
	// The attempt is still open: a proper upload completes it.
	if code, body := b.do(t, "PUT", u.URL, auth, "final body"); code != 204 {
		t.Fatalf("PUT %s = %d %s", u.URL, code, body)
	}
	// An expired key is refused.
	now := time.Now()
	b.svc.Now = func() time.Time { return now.Add(worker.UploadTTL + time.Minute) }
	if code, body := b.do(t, "POST", "/v1/worker/submit?upload="+u.Key, auth, ""); code != 400 || !strings.Contains(body, "expired at") {
		t.Errorf("submit of an expired upload = %d %s; want 400", code, body)
	}
	b.svc.Now = nil
	u = ask(10)
	if code, body := b.do(t, "PUT", u.URL, auth, "final body"); code != 204 {
		t.Fatalf("PUT %s = %d %s", u.URL, code, body)
	}
	if code, body := b.do(t, "POST", "/v1/worker/submit?upload="+u.Key, auth, ""); code != 200 || !strings.Contains(body, `"bytes":10`) {
		t.Fatalf("submit of the upload = %d %s", code, body)
	}
	// The same request again (a client retry after a lost answer) is the
	// 409 of a recorded attempt, as inline, not a missing upload.
	if code, body := b.do(t, "POST", "/v1/worker/submit?upload="+u.Key, auth, ""); code != 409 {
		t.Errorf("a retried submit of an upload = %d %s; want 409", code, body)
	}
	// Fenced like every write once the attempt ended.
	if code, body := b.do(t, "POST", "/v1/worker/upload", auth, `{"bytes":10}`); code != 409 {
		t.Errorf("upload after the Final = %d %s; want 409", code, body)
	}
}

// flip changes one hex digit.
func flip(d string) string {
	if d == "0" {
		return "1"
	}
	return "0"
}

func itoa(n int) string { return strconv.Itoa(n) }

// README.md § Logs: the worker API serves its own contract, byte for byte.
func TestOpenAPI_ServedByTheAPI(t *testing.T) {
	b := setup(t)
	code, body := b.do(t, "GET", "/v1/openapi.yaml", "", "")
	want, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if code != 200 || body != string(want) {
		t.Errorf("GET /v1/openapi.yaml = %d, %d bytes; want 200 and openapi.yaml (%d bytes)", code, len(body), len(want))
	}
}
