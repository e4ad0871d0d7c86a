package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// endless is a body that never ends, counting what was read of it.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// docs/security.md § Upload size limits: embedded (the fs sink), the blob
// route refuses a step bundle over limits.max_snapshot_bytes with 413
// ETOOLARGE, having read at most one byte past the limit (http.MaxBytesReader)
// however long the body is, and stores nothing; a body of the announced
// length over the limit is refused before any of it is read. Before the
// fix the route took up to the upload limit (32 MiB) whatever the bundle
// limit, reading it all.
func TestWorkspaceBlob_BundleOverTheLimitRefused413WithoutReadingIt(t *testing.T) {
	const limit = 1000
	base := ".stratus/runs/r1/workspace/base.bundle"
	b := setupRun(t, workertest.ImplementationFlow(t), func(r *stratus.Run) {
		r.Workspace = &stratus.Workspace{Root: worker.WorkspaceRoot("r1"), Base: strings.Repeat("a", 40), Head: strings.Repeat("a", 40),
			Bundles: []string{base}, Exclude: []string{".stratus", "workspace/tasks/t1/ctx"}}
	})
	env, _ := b.svc.Env(context.Background(), "r1")
	env.Config.Limits.MaxSnapshotBytes = limit
	auth := "Bearer " + b.dispatch(t, "implementation", "tok-1")

	code, body := b.do(t, "POST", "/v1/worker/workspace/upload", auth, `{"bytes": 1001}`)
	if code != 413 || !strings.Contains(body, `"field":"bytes"`) || !strings.Contains(body, "over the limit of 1000 bytes") {
		t.Errorf("upload of 1001 bytes asked: %d %s; want 413 on field bytes naming the limit", code, body)
	}
	code, body = b.do(t, "POST", "/v1/worker/workspace/upload", auth, `{"bytes": 10}`)
	var up worker.Upload
	if code != 200 || json.Unmarshal([]byte(body), &up) != nil || up.MaxBytes != limit || !strings.HasPrefix(up.URL, "/v1/worker/workspace/blob?key=") {
		t.Fatalf("upload of 10 bytes asked: %d %s; want 200 with the blob route and max_bytes %d", code, body, limit)
	}
	stored := filepath.Join(b.dir, filepath.FromSlash(up.Key))

	// A body that never ends, its length unannounced.
	src := &endless{}
	req := httptest.NewRequest("PUT", up.URL, io.NopCloser(src))
	req.ContentLength = -1
	req.Header.Set("Authorization", auth)
	rec := httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"code":"too_large"`) {
		t.Errorf("PUT of an endless bundle: %d %s; want 413 too_large", rec.Code, rec.Body)
	}
	if src.n > limit+1 {
		t.Errorf("the route read %d bytes of the body; want at most %d (the limit and one)", src.n, limit+1)
	}
	// Announced over the limit: refused unread.
	src = &endless{}
	req = httptest.NewRequest("PUT", up.URL, io.NopCloser(io.LimitReader(src, 5000)))
	req.ContentLength = 5000
	req.Header.Set("Authorization", auth)
	rec = httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || src.n != 0 {
		t.Errorf("PUT announcing 5000 bytes: %d, %d bytes read; want 413 with none read", rec.Code, src.n)
	}
	// Over the limit by one, over the wire.
	if code, body := b.do(t, "PUT", up.URL, auth, strings.Repeat("x", limit+1)); code != 413 {
		t.Errorf("PUT of %d bytes: %d %s; want 413", limit+1, code, body)
	}
	if _, err := os.Stat(stored); !os.IsNotExist(err) {
		t.Errorf("a refused bundle is stored at %s (%v)", stored, err)
	}
	// Without a credential: 401, and the body is not read.
	src = &endless{}
	req = httptest.NewRequest("PUT", up.URL, io.NopCloser(src))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	b.handler.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || src.n != 0 {
		t.Errorf("PUT without a credential: %d, %d bytes read; want 401 with none read", rec.Code, src.n)
	}
	// The limit itself is taken.
	if code, body := b.do(t, "PUT", up.URL, auth, strings.Repeat("x", limit)); code != 204 {
		t.Fatalf("PUT of %d bytes: %d %s; want 204", limit, code, body)
	}
	if fi, err := os.Stat(stored); err != nil || fi.Size() != limit {
		t.Errorf("stored bundle: %v, %v; want %d bytes", fi, err, limit)
	}
}
