package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Time to first contentful paint of a 50-step run's page in headless
// Chromium, next to its anchor measured in the same
// rounds: the same browser painting a one-line page from a bare net/http
// handler. Each round runs both, interleaved; the figures are medians:
//
//	go test ./internal/webui -run '^$' -bench FirstPaint -benchtime 7x
//
// Chromium's own trace gives the figure: firstContentfulPaint minus the
// navigationStart of the page's navigation. Skipped without chromium.
func BenchmarkRunPage_FirstPaint(b *testing.B) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		b.Skip("chromium is not installed")
	}
	s, path := fiftyStepRun(b)
	// The browser holds the viewer's cookie, as after its login; the
	// Bearer header stands for it, so the page loads without a redirect.
	viewer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.ServeHTTP(w, authed(s, r)) }))
	defer viewer.Close()
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<!doctype html><title>anchor</title><h1>hello</h1>"))
	}))
	defer bare.Close()
	var project, anchor []float64
	for b.Loop() {
		a, err := firstPaint(b, chromium, bare.URL+"/")
		if err != nil {
			b.Fatal(err)
		}
		p, err := firstPaint(b, chromium, viewer.URL+path)
		if err != nil {
			b.Fatal(err)
		}
		anchor, project = append(anchor, a), append(project, p)
	}
	pm, am := median(project), median(anchor)
	b.ReportMetric(pm, "fcp_ms")
	b.ReportMetric(am, "anchor_fcp_ms")
	b.ReportMetric(pm/am, "ratio")
}

// firstPaint loads url in a fresh headless Chromium with tracing on and
// returns its first contentful paint, ms after its navigation started.
func firstPaint(b *testing.B, chromium, url string) (float64, error) {
	dir := b.TempDir()
	trace := filepath.Join(dir, "trace.json")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--trace-startup=loading,blink.user_timing", "--trace-startup-format=json", "--trace-startup-file="+trace, "--trace-startup-duration=2",
		"--window-size=1000,680", "--screenshot="+filepath.Join(dir, "shot.png"), url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("chromium: %v\n%.500s", err, out)
	}
	raw, err := os.ReadFile(trace)
	if err != nil {
		return 0, err
	}
	var t struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			TS   float64 `json:"ts"` // µs
			Args struct {
				Data struct {
					URL          string `json:"documentLoaderURL"`
					NavigationID string `json:"navigationId"`
				} `json:"data"`
			} `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return 0, err
	}
	starts := map[string]float64{}
	for _, e := range t.TraceEvents {
		if e.Name == "navigationStart" && e.Args.Data.URL == url {
			starts[e.Args.Data.NavigationID] = e.TS
		}
	}
	for _, e := range t.TraceEvents {
		if start, ok := starts[e.Args.Data.NavigationID]; ok && e.Name == "firstContentfulPaint" {
			return (e.TS - start) / 1000, nil
		}
	}
	return 0, fmt.Errorf("no first contentful paint of %s in the trace", url)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
