package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/benchfig"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/webui"
	"github.com/stratusflow/stratus/internal/worker"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// BenchmarkFigure_ReadFlat prints `make bench`'s read-flat figures
// (README.md § Performance): `stratus status` (the command's whole path
// in process: its store opened, the run and its newest page read, the
// text printed) and the run viewer's run page (served whole) of a
// 1,000-step run, next to the same of a 10-step run in the same store —
// both runs written through the store's port, review and fixing in turn,
// each step with its attempt. Samples alternate between the two runs
// (medians of 21 each); read-flat-status and read-flat-ui are each
// reader's, read-flat their sum; goal: at most 1.5× — a reader's time
// does not grow with the run. A long run shows its newest
// runview.PageSteps steps (20), twice a 10-step run's: read-flat-page is
// read-flat against a run of one page (what the readers must show of any
// run that long), and read-flat-ui-rows the run page of that one-page
// run against the 10-step run's — what showing a page rather than 10
// rows costs, the run's length aside.
func BenchmarkFigure_ReadFlat(b *testing.B) {
	const samples = 21
	dir, st := longRunsDir(b)
	flows := filepath.Join(b.TempDir(), "flows")
	workertest.WriteFiles(b, flows, workertest.ImplementationFlow(b))
	f, err := flow.Load(flows, "implementation")
	if err != nil {
		b.Fatal(err)
	}
	env := &worker.RunEnv{Flow: f, FlowDir: flows, Config: config.Default()}
	ui, err := webui.New(webui.Source{Target: "embedded", Store: st, Sink: fs.New(dir),
		Env: func(context.Context, string) (*worker.RunEnv, error) { return env, nil }})
	if err != nil {
		b.Fatal(err)
	}
	status := func(id string) float64 {
		start := time.Now()
		if err := runStatus(&StatusOptions{IO: IO{Out: io.Discard, Err: io.Discard}, RunID: id, Dir: dir}); err != nil {
			b.Fatal(err)
		}
		return float64(time.Since(start).Microseconds()) / 1e3
	}
	page := func(id string) float64 {
		req := httptest.NewRequest("GET", "/runs/"+id, nil)
		req.Header.Set("Authorization", "Bearer "+ui.Secret())
		rec := httptest.NewRecorder()
		start := time.Now()
		ui.ServeHTTP(rec, req)
		d := float64(time.Since(start).Microseconds()) / 1e3
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /runs/%s: %d", id, rec.Code)
		}
		return d
	}
	printed := false
	for b.Loop() {
		if printed {
			continue
		}
		status(longRun) // warm: the store's file, the templates
		page(longRun)
		var longS, shortS, longU, shortU, oneU, longT, shortT, oneT []float64
		for range samples {
			ls, ss, os1 := status(longRun), status(shortRun), status(oneRun)
			lu, su, ou := page(longRun), page(shortRun), page(oneRun)
			longS, shortS = append(longS, ls), append(shortS, ss)
			longU, shortU, oneU = append(longU, lu), append(shortU, su), append(oneU, ou)
			longT, shortT, oneT = append(longT, ls+lu), append(shortT, ss+su), append(oneT, os1+ou)
		}
		benchfig.FromSamples(benchfig.Figure{Name: "read-flat-status", Unit: "ms/status", Goal: 1.5}, longS, shortS).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "read-flat-ui", Unit: "ms/page", Goal: 1.5}, longU, shortU).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "read-flat", Unit: "ms/read", Goal: 1.5}, longT, shortT).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "read-flat-page", Unit: "ms/read", Goal: 1.5}, longT, oneT).Print(os.Stdout)
		benchfig.FromSamples(benchfig.Figure{Name: "read-flat-ui-rows", Unit: "ms/page", Goal: 1.5}, oneU, shortU).Print(os.Stdout)
		printed = true
	}
}
