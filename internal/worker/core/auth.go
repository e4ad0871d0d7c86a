package core

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/captoken"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/launch"
)

// Caller is an authorized worker request: the attempt its credential names,
// with the step, run and run environment around it.
type Caller struct {
	// Handle is the handle the request came with (nil for a capability
	// token): what a heartbeat renews.
	Handle  *stratus.Handle
	Step    stratus.Step
	Attempt stratus.Attempt
	Latest  int // the dispatch task's latest attempt number when authorized
	Run     stratus.Run
	Env     *RunEnv
}

// Authorize resolves an Authorization header value to a Caller
// (docs/contracts.md § Bearer authentication). The scheme is "Bearer" in any
// letter case; the credential is a wh- handle (mapped server side) or a full
// capability token (HMAC, TTL and role × verb checked). When tid is non-empty it
// must name the credential's own dispatch task. A credential is fenced to its
// run (docs/security.md § Handles): it names its run, which must be the run this
// API serves (Service.RunID) and its task's run, and which must not have ended.
//
// Errors: EUNAUTHORIZED for a missing, malformed, unknown or expired
// credential, or a token naming no run; EFORBIDDEN for another task's
// credential, a verb outside it, or another run's credential (one this
// API does not serve); ECONFLICT once the credential's run has ended
// ("run R ended done"), or once its attempt ended or a newer attempt of
// its step exists (fence), for a read as for a write.
func (s *Service) Authorize(ctx context.Context, authorization, verb, tid string) (*Caller, error) {
	cred, err := bearer(authorization, "wh- handle or capability token")
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(cred, captoken.BootstrapPrefix) {
		return nil, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "a bootstrap value (%s…) is no credential: exchange it once at POST /v1/worker/bootstrap for the step's handle", captoken.BootstrapPrefix)
	}
	var owner, runID string
	var attempt int
	var handle *stratus.Handle
	if strings.HasPrefix(cred, captoken.HandlePrefix) {
		h, err := s.Store.GetHandle(ctx, cred)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			return nil, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "unknown handle %q", cred)
		} else if err != nil {
			return nil, err
		}
		if s.NowUTC().After(h.ExpiresAt) {
			return nil, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "handle %s expired at %s", cred, h.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
		}
		owner, runID, attempt, handle = h.TID, h.RunID, h.Attempt, &h
	} else {
		c, err := s.Minter.Verify(cred)
		if err != nil {
			return nil, err
		}
		if c.Role != captoken.RoleWorker || !c.Allows(verb) {
			return nil, stratus.Errorf(stratus.EFORBIDDEN, "token (role %q, verbs %v) does not grant %s", c.Role, c.Verbs, verb)
		}
		if c.RunID == "" {
			return nil, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "capability token names no run; valid: a token minted for one run (docs/security.md § Handles)")
		}
		owner, runID, attempt = c.TaskID, c.RunID, c.Attempt
	}
	// Another run's credential learns nothing here, not even whether its
	// task exists.
	if err := s.serves(runID); err != nil {
		return nil, err
	}
	if tid != "" && tid != owner {
		return nil, stratus.FieldErrorf(stratus.EFORBIDDEN, "task_id", "%q is not the task this credential was issued for", tid)
	}
	st, run, err := s.FenceRun(ctx, runID, owner)
	if err != nil {
		return nil, err
	}
	env, err := s.Env(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("run %s: %w", run.ID, err)
	}
	att, latest, err := s.AttemptOf(ctx, owner, attempt)
	if err != nil {
		return nil, err
	}
	c := &Caller{Handle: handle, Step: st, Attempt: att, Latest: latest, Run: run, Env: env}
	// A credential holds while its attempt is its step's live attempt:
	// reads too (docs/security.md § Handles). Once the attempt ended or
	// was superseded — and so across a cancel and a resume, which close
	// every running attempt — the prompt, the system prompt, the blobs and
	// the render size are refused like any write. What the runner does
	// after its engine ended (its last stats, the workspace upload and
	// head move, the submit or failure) happens while its attempt still
	// runs: the attempt ends with the submit.
	if err := s.Fence(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// AttemptOf returns AttemptOf n of task tid and the number of the task's
// latest AttemptOf: what a fetch shows and what fence compares against (in
// the common case they are one). Errors: the store's (ENOTFOUND for a
// task with no AttemptOf n).
func (s *Service) AttemptOf(ctx context.Context, tid string, n int) (stratus.Attempt, int, error) {
	latest, err := s.Store.LatestAttempt(ctx, tid)
	if err != nil || latest.N == n {
		return latest, latest.N, err
	}
	att, err := s.Store.GetAttempt(ctx, tid, n)
	return att, latest.N, err
}

// serves refuses a credential of run runID unless this API serves that run
// (docs/security.md § Handles: embedded, each run serves its own API over
// the work dir's shared store and key). "" (a handle stored before handles
// named their run) is checked once its task's run is known. Errors:
// EFORBIDDEN.
func (s *Service) serves(runID string) error {
	if s.RunID == "" || runID == "" || runID == s.RunID {
		return nil
	}
	return stratus.FieldErrorf(stratus.EFORBIDDEN, "Authorization", "the credential is for run %s; this API serves run %s only (docs/security.md § Handles)", runID, s.RunID)
}

// FenceRun returns the step of dispatch task tid and its run, for a
// credential naming run runID ("": the task's run), once the credential
// holds for them (docs/security.md § Handles): this API serves the run
// (serves), the task is of that run, and the run has not ended. Errors:
// EFORBIDDEN for another run's credential; ECONFLICT "run R ended S" once
// the run is terminal (done, failed, manual_action_required, interrupted:
// cancelled runs are interrupted); the store's (ENOTFOUND for a task
// without a step).
func (s *Service) FenceRun(ctx context.Context, runID, tid string) (stratus.Step, stratus.Run, error) {
	if err := s.serves(runID); err != nil {
		return stratus.Step{}, stratus.Run{}, err
	}
	st, err := s.Store.GetStep(ctx, tid)
	if err != nil {
		return st, stratus.Run{}, err
	}
	if runID == "" {
		if err := s.serves(st.RunID); err != nil {
			return st, stratus.Run{}, err
		}
	} else if st.RunID != runID {
		return st, stratus.Run{}, stratus.FieldErrorf(stratus.EFORBIDDEN, "Authorization", "the credential is for run %s, but its task %s is of run %s (docs/security.md § Handles)", runID, tid, st.RunID)
	}
	run, err := s.Store.GetRun(ctx, st.RunID)
	if err != nil {
		return st, run, err
	}
	if stratus.RunTerminal(run.Status) {
		return st, run, stratus.Errorf(stratus.ECONFLICT, "run %s ended %s: its handles and tokens are refused (docs/security.md § Handles)", run.ID, run.Status)
	}
	return st, run, nil
}

// bearer is the credential of an "Authorization: Bearer <credential>"
// value (the scheme in any letter case); valid names what it should hold
// in the error. Errors: EUNAUTHORIZED for a missing value, another
// scheme, or no credential.
func bearer(authorization, valid string) (string, error) {
	scheme, cred, _ := strings.Cut(strings.TrimSpace(authorization), " ")
	cred = strings.TrimSpace(cred)
	switch {
	case authorization == "":
		return "", stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "missing; valid: Bearer <%s>", valid)
	case !strings.EqualFold(scheme, "Bearer"):
		return "", stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "scheme %q is not supported; valid: Bearer <%s>", scheme, valid)
	case cred == "":
		return "", stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "Bearer without a credential; valid: Bearer <%s>", valid)
	}
	return cred, nil
}

// Bootstrapped is what POST /v1/worker/bootstrap answers: the step's
// handle and the attempt it is for.
type Bootstrapped struct {
	Handle  string `json:"handle"`
	TaskID  string `json:"task_id"`
	Attempt int    `json:"attempt"`
}

// ExchangeBootstrap serves POST /v1/worker/bootstrap (docs/contracts.md §
// Bearer authentication; docs/security.md § Handles): the
// one-time value a worker was launched with (Authorization: Bearer wb-…)
// is taken — it never works again — and a fresh handle for the same
// attempt is returned, living one HandleLease (never past the value's own
// expiry, the step's handleLifetime) and renewed by the worker's
// heartbeats (RecordStats, renewHandle). A launch's
// environment (RunTask overrides: ecs:DescribeTasks, CloudTrail) thus
// holds nothing of use once its worker has started. Errors: EUNAUTHORIZED
// for a missing, unknown, already exchanged or expired value; EFORBIDDEN
// for another run's value; ECONFLICT once its run ended or its attempt
// ended or was superseded (fenceBootstrap) — a refused value is not spent.
func (s *Service) ExchangeBootstrap(ctx context.Context, authorization string) (Bootstrapped, error) {
	cred, err := bearer(authorization, captoken.BootstrapPrefix+"<value>, the bootstrap value the worker was launched with")
	if err != nil {
		return Bootstrapped{}, err
	}
	if !strings.HasPrefix(cred, captoken.BootstrapPrefix) {
		return Bootstrapped{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "want Bearer %s<value>, the bootstrap value the worker was launched with", captoken.BootstrapPrefix)
	}
	// Fenced before it is taken, as a handle is on every call: a value
	// sent to another run's API, once its run has ended, or once its
	// attempt ended or was superseded is refused and not spent
	// (docs/security.md § Handles).
	b, err := s.Store.GetHandle(ctx, cred)
	if err == nil {
		err = s.fenceBootstrap(ctx, b)
		if stratus.ErrorCode(err) == stratus.ENOTFOUND {
			err = nil // no step or no attempt: the take below says what there is to say
		}
		if err != nil {
			return Bootstrapped{}, err
		}
		b, err = s.Store.TakeHandle(ctx, cred)
	}
	if stratus.ErrorCode(err) == stratus.ENOTFOUND {
		return Bootstrapped{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "bootstrap value unknown or already exchanged (it works once)")
	} else if err != nil {
		return Bootstrapped{}, err
	}
	if !b.ExpiresAt.IsZero() && s.NowUTC().After(b.ExpiresAt) {
		return Bootstrapped{}, stratus.FieldErrorf(stratus.EUNAUTHORIZED, "Authorization", "bootstrap value expired at %s", b.ExpiresAt.Format("2006-01-02T15:04:05Z07:00"))
	}
	exp := s.NowUTC().Add(s.HandleLease())
	if !b.ExpiresAt.IsZero() && b.ExpiresAt.Before(exp) {
		exp = b.ExpiresAt
	}
	h := stratus.Handle{Handle: NewHandle(), RunID: b.RunID, TID: b.TID, Attempt: b.Attempt, ExpiresAt: exp}
	if err := s.Store.PutHandle(ctx, h); err != nil {
		return Bootstrapped{}, err
	}
	return Bootstrapped{Handle: h.Handle, TaskID: h.TID, Attempt: h.Attempt}, nil
}

// LaunchCredential is the credential dispatch records for attempt n of
// task tid of run runID and hands its worker's launch (Spec.Handle;
// docs/contracts.md § Bearer authentication): a one-time bootstrap value
// living the step's handle lifetime ttl, exchanged once the worker starts
// (ExchangeBootstrap); or, for a launcher that hands it in memory
// (launch.InMemory: the in-process twin), the handle that exchange would
// return, living one HandleLease (never past ttl) and renewed by the
// worker's heartbeats. The caller stores it (Store.PutHandle).
func (s *Service) LaunchCredential(runID, tid string, n int, ttl time.Duration) stratus.Handle {
	now := s.NowUTC()
	if m, ok := s.Launcher.(launch.InMemory); ok && m.HandsHandleInMemory() {
		return stratus.Handle{Handle: NewHandle(), RunID: runID, TID: tid, Attempt: n, ExpiresAt: now.Add(min(ttl, s.HandleLease()))}
	}
	return stratus.Handle{Handle: NewBootstrap(), RunID: runID, TID: tid, Attempt: n, ExpiresAt: now.Add(ttl)}
}

// fenceBootstrap refuses bootstrap value b where its handle would be
// refused (fenceRun, then fence): another run's, its run ended, its
// attempt ended or superseded. Errors: EFORBIDDEN, ECONFLICT; the store's
// (ENOTFOUND for a step or attempt not found).
func (s *Service) fenceBootstrap(ctx context.Context, b stratus.Handle) error {
	st, run, err := s.FenceRun(ctx, b.RunID, b.TID)
	if err != nil {
		return err
	}
	att, latest, err := s.AttemptOf(ctx, b.TID, b.Attempt)
	if err != nil {
		return err
	}
	return s.Fence(ctx, &Caller{Step: st, Attempt: att, Latest: latest, Run: run})
}

// Fence refuses a call that can no longer count (docs/security.md §
// Handles): the run is terminal, a newer attempt exists, or this attempt
// already ended. Authorize applies it to every call, reads included;
// writes call it again before they write. Errors: ECONFLICT naming the
// run, the step and the attempt.
func (s *Service) Fence(_ context.Context, c *Caller) error {
	// The records were read when the caller was authorized, in this request.
	if stratus.RunTerminal(c.Run.Status) {
		return stratus.Errorf(stratus.ECONFLICT, "run %s is %s; it accepts no more output", c.Run.ID, c.Run.Status)
	}
	if c.Latest > c.Attempt.N {
		return stratus.Errorf(stratus.ECONFLICT, "run %s: attempt %d of %s (task %s) is superseded by attempt %d: its handle and tokens are refused (docs/security.md § Handles)",
			c.Run.ID, c.Attempt.N, c.Step.StepRef, c.Step.TID, c.Latest)
	}
	if c.Attempt.Status != stratus.AttemptRunning {
		return stratus.Errorf(stratus.ECONFLICT, "run %s: attempt %d of %s (task %s) already ended (%s): its handle and tokens are refused (docs/security.md § Handles)",
			c.Run.ID, c.Attempt.N, c.Step.StepRef, c.Step.TID, c.Attempt.Status)
	}
	return nil
}

// RenewHandle extends the caller's handle to one HandleLease from now,
// never past its attempt's handleLifetime; the store is written only when
// that moves the expiry by a tenth of a lease or more (a worker's stats
// come every 10 s, its heartbeat every 20 s). A failure is warned about:
// the lease has time for the next heartbeat.
func (s *Service) RenewHandle(ctx context.Context, c *Caller) {
	h := c.Handle
	if h == nil {
		return
	}
	lease := s.HandleLease()
	var node *flow.Node
	if c.Step.Kind != SupervisorKind {
		node = c.Env.Flow.Node(c.Step.Node)
	}
	exp := s.NowUTC().Add(lease)
	if limit := c.Attempt.StartedAt.Add(s.HandleLifetime(c.Env, node, c.Attempt.Resolved)); !c.Attempt.StartedAt.IsZero() && limit.Before(exp) {
		exp = limit
	}
	if exp.Sub(h.ExpiresAt) < lease/10 {
		return
	}
	if err := s.Store.RenewHandle(ctx, h.Handle, exp); err != nil {
		s.WarnCall(c, "%s: renew the worker's handle: %v", c.Step.StepRef, err)
		return
	}
	h.ExpiresAt = exp
}
