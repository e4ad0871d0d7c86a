package orchestrator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/statedir"
)

// RunsDir holds one address file per running embedded run:
// DIR/.stratus/runs/<run_id>.json.
const RunsDir = "runs"

// RunAddress is the address file of a running embedded run: where its API
// listens and which process serves it. `stratus approve|reject|answer`
// read it to reach the run (README.md § A human gate, step by step).
type RunAddress struct {
	APIURL string `json:"api_url"`
	PID    int    `json:"pid"`
}

// WriteRunAddress writes DIR/.stratus/runs/<runID>.json (mode 0600: it
// says where a run that takes replies listens) and returns the function
// that removes it when the run ends.
func WriteRunAddress(state, runID, apiURL string) (remove func(), err error) {
	dir := filepath.Join(state, RunsDir)
	if err := os.MkdirAll(dir, statedir.DirPerm); err != nil {
		return nil, fmt.Errorf("run address: %w", err)
	}
	b, _ := json.Marshal(RunAddress{APIURL: apiURL, PID: os.Getpid()})
	path := filepath.Join(dir, runID+".json")
	tmp, err := os.CreateTemp(dir, ".run-*")
	if err != nil {
		return nil, fmt.Errorf("run address: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("run address: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil { // CreateTemp made it 0600
		return nil, fmt.Errorf("run address: %w", err)
	}
	return func() { os.Remove(path) }, nil
}

// ReadRunAddress reads the address file of run runID under state
// (DIR/.stratus). Errors: ENOTFOUND when the run is not running (no file).
func ReadRunAddress(state, runID string) (RunAddress, error) {
	var a RunAddress
	if runID == "" || filepath.Base(runID) != runID || runID[0] == '.' {
		return a, stratus.FieldErrorf(stratus.EINVALID, "run_id", "%q is not a run id (r-<time>-<hex>)", runID)
	}
	path := filepath.Join(state, RunsDir, runID+".json")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, stratus.Errorf(stratus.ENOTFOUND, "run %s is not running here (no %s): it ended, or it runs under another --dir", runID, path)
	} else if err != nil {
		return a, err
	}
	if err := json.Unmarshal(b, &a); err != nil || a.APIURL == "" {
		return a, fmt.Errorf("run address %s is unreadable: %v", path, err)
	}
	return a, nil
}
