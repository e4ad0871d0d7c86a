// Package host is one stratus process that hosts many embedded runs of
// one work dir: `stratus run --detach` hands its run to the
// work dir's host — starting one when none is up — instead of starting a
// process per run. The runs share the host's store (one SQLite connection
// pool), its reaper and its engine slots (worker.max_concurrent_engines:
// across every run, first come first served), so a thousand runs cost a
// thousand sets of goroutines, not a thousand processes.
//
// The host answers on a Unix socket, DIR/.stratus/host/host.sock
// (SocketPath: elsewhere when that path is too long), to the work dir's
// owner alone: the socket's directory is theirs with mode 0700, and the
// host answers a client of another uid 403 (docs/security.md § The host
// socket):
//
//	POST /v1/runs              {"task": PATH, "run_id": ID, "no_pull": BOOL}
//	                           → 201 {"run_id": ID} once the run is recorded;
//	                             4xx {"error": {"code", "message"}} when it
//	                             cannot start (the same errors as `stratus run`)
//	POST /v1/runs/{id}/resume  {"reset_fix_budget", "max_cost_usd", "max_tokens"}
//	                           → 201 {"run_id": ID} once the resume is
//	                             recorded, or 4xx as `stratus resume` refuses
//	POST /v1/runs/{id}/cancel  → 200 {"status": S} once the run has stopped
//	                             (interrupted, as a SIGTERM'd `stratus run`)
//	GET  /v1/runs              → 200 {"pid": PID, "runs": [ID...]} the host's
//	                             process and the runs under way in it
//
// Each run's progress lines go to DIR/.stratus/runs/<run_id>/run.log, as
// a detached run's do. Every hosted run's owner (stratus.Run.Owner) is the
// host's process: `stratus status` reads a run whose host died as
// interrupted, and `stratus resume` goes on with it.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/lifecycle"
	"github.com/stratusflow/stratus/internal/orchestrator"
	"github.com/stratusflow/stratus/internal/statedir"
)

// Host hosts the runs of one work dir.
type Host struct {
	Dir  string // the work dir (absolute)
	Self string // the stratus binary ("" = os.Executable())
	// Idle ends Serve once no run has been under way for this long (0:
	// never): a host started for `run --detach` goes away with its runs.
	Idle time.Duration
	Log  *slog.Logger // the host's own records (nil: none)

	shared *orchestrator.Shared
	mu     sync.Mutex
	runs   map[string]*hosted
	idleAt time.Time // when the last run ended (or the host started)
	wg     sync.WaitGroup
}

type hosted struct {
	cancel context.CancelFunc
	done   chan struct{}
	status string // the run's end (stratus.RunDone, …), once done
}

// Serve listens on the work dir's socket and hosts runs until ctx ends (the
// runs under way are then interrupted, as `stratus run` is on SIGTERM, and
// Serve waits for them) or the host has been idle for Idle. It refuses to
// start when another host answers on the socket (EINVALID).
func (h *Host) Serve(ctx context.Context) error {
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	state := filepath.Join(h.Dir, orchestrator.StateDir)
	cfg, err := config.Load(filepath.Join(state, orchestrator.ConfigFile))
	if err != nil {
		return err
	}
	if err := statedir.Secure(state); err != nil {
		return err
	}
	ln, err := listen(SocketPath(h.Dir))
	if err != nil {
		return err
	}
	slots := cfg.Worker.MaxConcurrentEngines
	if slots == 0 {
		slots = config.DefaultMaxConcurrentEngines()
	}
	h.shared = orchestrator.NewShared(h.Dir, slots)
	defer h.shared.Close()
	h.runs, h.idleAt = map[string]*hosted{}, time.Now()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", h.start)
	mux.HandleFunc("POST /v1/runs/{id}/resume", h.resume)
	mux.HandleFunc("POST /v1/runs/{id}/cancel", h.cancel)
	mux.HandleFunc("GET /v1/runs", h.list)
	srv := &http.Server{Handler: h.sameUser(mux), ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			uid, known, err := peerUID(c)
			return context.WithValue(ctx, peerKey{}, peer{uid: uid, known: known, err: err})
		}}
	go srv.Serve(ln)
	h.Log.Info(fmt.Sprintf("hosting the runs of %s on %s (%d engine slots)", h.Dir, ln.Addr(), slots))

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for stop := false; !stop; {
		select {
		case <-ctx.Done():
			stop = true
		case <-tick.C:
			h.mu.Lock()
			stop = h.Idle > 0 && len(h.runs) == 0 && time.Since(h.idleAt) >= h.Idle
			h.mu.Unlock()
		}
	}
	// No new run from here on; the runs under way stop (interrupted) and
	// record their end before the store closes.
	ln.Close()
	h.mu.Lock()
	for _, r := range h.runs {
		r.cancel()
	}
	h.mu.Unlock()
	h.wg.Wait()
	srv.Close()
	os.Remove(SocketPath(h.Dir))
	return nil
}

// listen opens the socket at path, in a directory made and checked first
// (makeSocketDir: this user's, mode 0700, or EFORBIDDEN): a socket left by
// a host that is gone is replaced; one that answers is another host's
// (EINVALID).
func listen(path string) (net.Listener, error) {
	if err := makeSocketDir(path); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if c, err := dialHost(ctx, path); err == nil {
		c.Close()
		return nil, stratus.Errorf(stratus.EINVALID, "a host already serves this work dir (%s)", path)
	} else if stratus.ErrorCode(err) == stratus.EFORBIDDEN {
		return nil, err
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("host socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// peer is what the kernel says of a connection's client (peerUID).
type peer struct {
	uid   int
	known bool
	err   error
}

type peerKey struct{}

// sameUser answers 403 (EFORBIDDEN) to a client running as another uid
// than the host, whatever reached the socket (docs/security.md § The
// host socket: the directory keeps them out; this holds if it did not).
func (h *Host) sameUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(peerKey{}).(peer)
		switch {
		case p.err != nil:
			writeError(w, stratus.Errorf(stratus.EFORBIDDEN, "the host cannot tell who the client is (%v): refused (docs/security.md § The host socket)", p.err))
			return
		case p.known && p.uid != os.Geteuid():
			h.Log.Warn(fmt.Sprintf("refused %s %s from uid %d (the host serves uid %d alone)", r.Method, r.URL.Path, p.uid, os.Geteuid()))
			writeError(w, stratus.Errorf(stratus.EFORBIDDEN, "this host serves uid %d alone, not uid %d (docs/security.md § The host socket)", os.Geteuid(), p.uid))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// StartRequest is the body of POST /v1/runs.
type StartRequest struct {
	Task   string `json:"task"`   // the task file, absolute
	RunID  string `json:"run_id"` // the new run's id ("" = a fresh one)
	NoPull bool   `json:"no_pull,omitempty"`
}

func (h *Host) start(w http.ResponseWriter, r *http.Request) {
	var req StartRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, stratus.FieldErrorf(stratus.EINVALID, "body", "not a start request: %v", err))
		return
	}
	// Everything the request names is checked before anything is written
	// (docs/security.md § Files under .stratus): the run id names a
	// directory, and a refused run removes the one it made.
	if err := lifecycle.CheckRunID(req.RunID); err != nil {
		writeError(w, err)
		return
	}
	if !filepath.IsAbs(req.Task) {
		writeError(w, stratus.FieldErrorf(stratus.EINVALID, "task", "%q is not an absolute path", req.Task))
		return
	}
	h.host(w, req.RunID, true, func(ctx context.Context, logf *os.File, started func(string)) (*orchestrator.Result, error) {
		return orchestrator.Run(ctx, orchestrator.Options{Dir: h.Dir, TaskPath: req.Task, Self: h.Self, Progress: logf,
			RunID: req.RunID, NoPull: req.NoPull, Shared: h.shared, Started: started})
	})
}

// ResumeRequest is the body of POST /v1/runs/{id}/resume: `stratus
// resume`'s flags (lifecycle.Resume).
type ResumeRequest struct {
	ResetFixBudget bool     `json:"reset_fix_budget,omitempty"`
	MaxCostUSD     *float64 `json:"max_cost_usd,omitempty"` // the new cost cap, US dollars (0: none)
	MaxTokens      *int64   `json:"max_tokens,omitempty"`   // the new token cap (0: none)
}

func (h *Host) resume(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := lifecycle.CheckRunID(id); err != nil {
		writeError(w, err)
		return
	}
	var req ResumeRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil {
		writeError(w, stratus.FieldErrorf(stratus.EINVALID, "body", "not a resume request: %v", err))
		return
	}
	h.host(w, id, false, func(ctx context.Context, logf *os.File, started func(string)) (*orchestrator.Result, error) {
		res, err := orchestrator.Resume(ctx, orchestrator.ResumeOptions{Dir: h.Dir, RunID: id, Self: h.Self, Progress: logf,
			Resume: lifecycle.Resume{ResumeOptions: lifecycle.ResumeOptions{ResetFixBudget: req.ResetFixBudget}, MaxCostUSD: req.MaxCostUSD, MaxTokens: req.MaxTokens},
			Shared: h.shared, Started: started})
		if spent := (*lifecycle.BudgetSpentError)(nil); errors.As(err, &spent) {
			err = stratus.Errorf(stratus.EINVALID, "%s", spent.Error()) // the flag that allows it was not given
		}
		return res, err
	})
}

// host runs a run (run: orchestrator.Run or Resume, calling started once
// the run is recorded) as one of the host's, its lines appended to the
// run's run.log, and answers w once it is recorded (201 {"run_id"}) or
// refused (its error). A refused new run (fresh) leaves nothing behind,
// and never takes anything of another run with it: its directory is one
// it made (runLog).
func (h *Host) host(w http.ResponseWriter, runID string, fresh bool, run func(ctx context.Context, logf *os.File, started func(string)) (*orchestrator.Result, error)) {
	logf, err := h.runLog(runID, fresh)
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	hr := &hosted{cancel: cancel, done: make(chan struct{})}
	started := make(chan string, 1)
	failed := make(chan error, 1)
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer logf.Close()
		defer cancel()
		res, err := run(ctx, logf, func(id string) {
			h.mu.Lock()
			h.runs[id] = hr
			h.mu.Unlock()
			started <- id
		})
		switch {
		case res != nil:
			hr.status = res.Status
			fmt.Fprintf(logf, "run %s: %s\n", res.Run.ID, res.Status)
			// A run that ended before it said it started (a full disk
			// stopped it once recorded) is answered as started: its end
			// is in its run.log.
			select {
			case started <- res.Run.ID:
			default:
			}
		case err != nil:
			if fresh { // refused before it was recorded: nothing of it is kept
				os.RemoveAll(filepath.Dir(logf.Name()))
			}
			failed <- err
		}
		h.mu.Lock()
		for id, r := range h.runs {
			if r == hr {
				delete(h.runs, id)
			}
		}
		h.idleAt = time.Now()
		h.mu.Unlock()
		close(hr.done)
	}()
	select {
	case id := <-started:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]string{"run_id": id})
	case err := <-failed:
		writeError(w, err)
	}
}

// runLog opens DIR/.stratus/runs/<run_id>/run.log for appending (runID
// checked: lifecycle.CheckRunID). For a new run (fresh) the directory must
// not exist yet and is made here, so that removing it on refusal removes
// nothing but what this request wrote: an existing run's id is ECONFLICT
// (field run_id), its files untouched.
func (h *Host) runLog(runID string, fresh bool) (*os.File, error) {
	dir := filepath.Join(h.Dir, orchestrator.StateDir, orchestrator.RunsDir, runID)
	if fresh {
		if err := os.MkdirAll(filepath.Dir(dir), statedir.DirPerm); err != nil {
			return nil, err
		}
		if err := os.Mkdir(dir, statedir.DirPerm); errors.Is(err, fs.ErrExist) {
			return nil, stratus.FieldErrorf(stratus.ECONFLICT, "run_id", "run %s already exists (%s); a new run takes a fresh id", runID, dir)
		} else if err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(dir, statedir.DirPerm); err != nil {
		return nil, err
	}
	return os.OpenFile(filepath.Join(dir, "run.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, statedir.FilePerm)
}

func (h *Host) cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	h.mu.Lock()
	run := h.runs[id]
	h.mu.Unlock()
	if run == nil {
		writeError(w, stratus.Errorf(stratus.ENOTFOUND, "run %s is not under way in this host", id))
		return
	}
	run.cancel()
	select {
	case <-run.done:
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"status": run.status})
}

func (h *Host) list(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	ids := make([]string, 0, len(h.runs))
	for id := range h.runs {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	slices.Sort(ids)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"pid": os.Getpid(), "runs": ids})
}

// httpStatus maps a stratus error code to its HTTP status (error.go).
var httpStatus = map[string]int{
	stratus.EINVALID: 400, stratus.EFORBIDDEN: 403, stratus.ENOTFOUND: 404, stratus.ECONFLICT: 409,
	stratus.EUNPROCESSABLE: 422, stratus.ENOSPACE: 507,
}

func writeError(w http.ResponseWriter, err error) {
	code := stratus.ErrorCode(err)
	status, ok := httpStatus[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	// The caller is the work dir's owner (the socket is theirs alone):
	// every error is told whole.
	msg, field := err.Error(), ""
	if e := (*stratus.Error)(nil); errors.As(err, &e) {
		msg, field = e.Message, e.Field
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
}
