package retry

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stratusflow/stratus/internal/asl"
	"github.com/stratusflow/stratus/internal/config"
)

// Class is an attempt's failure class, the strings internal/failclass
// uses (provider_unavailable, rate_limited,
// network_unavailable, timeout, quality, infrastructure). "" is an
// attempt that did not fail, or was not classified.
type Class string

// The failure classes.
const (
	ProviderUnavailable Class = "provider_unavailable" // 5xx, overloaded (529), the provider reset the connection
	RateLimited         Class = "rate_limited"         // 429, a usage window or quota
	NetworkUnavailable  Class = "network_unavailable"  // DNS, connection refused, no route, TLS handshake to the provider
	Timeout             Class = "timeout"              // the attempt ran past its deadline (terminal TimedOut, docs/contracts.md § Terminal classification)
	Quality             Class = "quality"              // a bad or invalid report, a verdict contract violation, max steps
	Infrastructure      Class = "infrastructure"       // the worker died, its task stopped, launch failed
)

// Transient reports whether the policy handles the class: the provider
// (or the way to it) was unavailable or rate-limited.
func (c Class) Transient() bool {
	return c == ProviderUnavailable || c == RateLimited || c == NetworkUnavailable
}

// Attempt is what the policy reads of one attempt of a step.
type Attempt struct {
	Provider string
	Class    Class
	// RetryAt is when a rate limit resets, when the provider said so;
	// zero when unknown.
	RetryAt time.Time
	// Started and Ended bound the attempt; an Ended left zero reads as
	// the decision's now.
	Started, Ended time.Time
}

// MaxParkInterval caps the park interval's doubling, unless max_delay_s
// is longer or max_blocked_s is more than MaxParksAtCap hours: an outage
// that outlasts an hour is re-tried hourly, and a rate limit whose reset
// is known is waited out to the second anyway.
const MaxParkInterval = time.Hour

// MaxParksAtCap bounds the parks at the capped interval: the cap grows to
// max_blocked_s / MaxParksAtCap when that is longer than an hour, so that
// however long max_blocked_s, a step parks a bounded number of times and
// its history events stay bounded (Policy.WorstCase).
const MaxParksAtCap = 16

// Policy is the retry configuration of one run.
type Policy struct {
	// MaxAttempts is agents.retry.max_attempts: same-provider retries
	// after an attempt's first transient failure (0: none).
	MaxAttempts int
	// BaseDelay and MaxDelay are agents.retry.base_delay_s and
	// max_delay_s; the compiled Retrier rounds them up to whole seconds.
	BaseDelay, MaxDelay time.Duration
	// MaxBlocked is agents.retry.max_blocked_s: how long a step may stay
	// parked in all (0: never park).
	MaxBlocked time.Duration
	// MaxStageAttempts is agents.max_stage_attempts: the providers of one
	// park cycle, the node's own and its fallbacks (at least 1).
	MaxStageAttempts int
	// Primary is agents.primary, the global primary.
	Primary string
	// Fallbacks are the providers a step may fall back to, in
	// agents.allowed order: allowed, with a launch spec, not a stand-in.
	Fallbacks []string
}

// FromConfig returns the policy of a parsed config (config.Parse applied
// the defaults and the validation).
func FromConfig(cfg *config.Config) Policy {
	s := cfg.Agents.RetrySettings()
	p := Policy{
		MaxAttempts: s.MaxAttempts, MaxStageAttempts: s.MaxStageAttempts,
		BaseDelay: seconds(s.BaseDelayS), MaxDelay: seconds(s.MaxDelayS), MaxBlocked: seconds(s.MaxBlockedS),
		Primary: cfg.Agents.Primary,
	}
	eligible := func(name string) bool {
		spec, ok := cfg.Agents.Providers[name]
		return ok && !spec.StandIn(name)
	}
	for _, name := range cfg.Agents.Allowed {
		if eligible(name) && !slices.Contains(p.Fallbacks, name) {
			p.Fallbacks = append(p.Fallbacks, name)
		}
	}
	// The primary is always allowed (config.Config.Provider).
	if eligible(p.Primary) && !slices.Contains(p.Fallbacks, p.Primary) {
		p.Fallbacks = append(p.Fallbacks, p.Primary)
	}
	return p
}

// Default is the policy of worc's defaults with the given providers: the
// first is the primary, all are fallbacks.
func Default(providers ...string) Policy {
	p := Policy{
		MaxAttempts: config.DefaultRetryMaxAttempts, MaxStageAttempts: config.DefaultMaxStageAttempts,
		BaseDelay: seconds(config.DefaultRetryBaseDelayS), MaxDelay: seconds(config.DefaultRetryMaxDelayS),
		MaxBlocked: seconds(config.DefaultRetryMaxBlockedS),
		Fallbacks:  slices.Clone(providers),
	}
	if len(providers) > 0 {
		p.Primary = providers[0]
	}
	return p
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// Order returns the providers a node's step runs on, in fallback order
// (worc configuration.md § Provider routing): its own (pinned, or the
// global primary when pinned is ""), then — for a node pinned off the
// primary — the global primary, then the other fallbacks in
// agents.allowed order; at most MaxStageAttempts of them.
func (p Policy) Order(pinned string) []string {
	own := pinned
	if own == "" {
		own = p.Primary
	}
	out := []string{own}
	if own != p.Primary && slices.Contains(p.Fallbacks, p.Primary) {
		out = append(out, p.Primary)
	}
	for _, f := range p.Fallbacks {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out[:min(len(out), max(1, p.MaxStageAttempts))]
}

// Retrier holds the fields of one compiled Retrier (ASL spec § Retrying
// after error): IntervalSeconds and MaxDelaySeconds in whole seconds.
type Retrier struct {
	MaxAttempts     int
	IntervalSeconds int
	BackoffRate     float64
	MaxDelaySeconds int
}

// ASL returns it as the embedded executor's model, whose Delay is the
// wait Step Functions applies.
func (r Retrier) ASL() asl.Retrier {
	return asl.Retrier{MaxAttempts: r.MaxAttempts, IntervalSeconds: r.IntervalSeconds, BackoffRate: r.BackoffRate,
		MaxDelaySeconds: r.MaxDelaySeconds, JitterStrategy: "NONE"}
}

// InfrastructureRetrier is the Retrier every Task state carries for
// stratus.InfrastructureFailed and the SQS integration's own errors
// (compiler.Compile documents the shape): 5 s, 10 s, 20 s, three
// retries.
var InfrastructureRetrier = Retrier{MaxAttempts: 3, IntervalSeconds: 5, BackoffRate: 2.0, MaxDelaySeconds: 60}

// TransientRetrier returns the Retrier of the transient error names
// (stratus.ProviderUnavailable, stratus.RateLimited,
// stratus.NetworkUnavailable): MaxAttempts = max_stage_attempts ×
// (max_attempts + 1) − 1, every attempt of one park cycle but the first;
// IntervalSeconds = ceil(base_delay_s), at least 1 (the ASL minimum);
// BackoffRate 2, as worc's base_delay_s × 2^k; MaxDelaySeconds =
// ceil(max_delay_s), at least IntervalSeconds. A MaxAttempts of 0 means
// the compiler emits no such Retrier, and the policy never retries.
func (p Policy) TransientRetrier() Retrier {
	interval := max(1, ceilSeconds(p.BaseDelay))
	return Retrier{
		MaxAttempts:     max(1, p.MaxStageAttempts)*(max(0, p.MaxAttempts)+1) - 1,
		IntervalSeconds: interval,
		BackoffRate:     2.0,
		MaxDelaySeconds: max(interval, ceilSeconds(p.MaxDelay)),
	}
}

func ceilSeconds(d time.Duration) int {
	return int(math.Ceil(d.Seconds()))
}

// Delay is the wait before the transient retry that follows n earlier
// ones in the same entry of the state: the compiled Retrier's.
func (p Policy) Delay(n int) time.Duration {
	r := p.TransientRetrier().ASL()
	return r.Delay(n)
}

// ParkInterval is how long the k-th park of a step (k from 0) waits when
// no rate-limit reset says otherwise: the compiled MaxDelaySeconds
// doubled k times, capped at the longest of MaxParkInterval, that
// MaxDelaySeconds and max_blocked_s / MaxParksAtCap.
func (p Policy) ParkInterval(k int) time.Duration {
	base := time.Duration(p.TransientRetrier().MaxDelaySeconds) * time.Second
	limit := max(MaxParkInterval, base, p.MaxBlocked/MaxParksAtCap)
	d := base
	for range k {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, limit)
}

// History events a step costs in a Step Functions execution (developer
// guide § Quotas: 25,000 per execution), as the compiled machine spends
// them: an attempt of a callback Task state is TaskScheduled,
// TaskStarted, TaskSubmitted and TaskSucceeded or TaskFailed; an entry of
// the state adds TaskStateEntered and TaskStateExited; a park adds the
// park Pass's and the Wait's entered and exited events.
const (
	EventsPerAttempt = 4
	EventsPerEntry   = 2
	EventsPerPark    = 4
)

// WorstCase is what one step can cost at most under the policy: every
// attempt failing at once, transiently, on every provider, each state
// entry also spending the infrastructure Retrier, until the step gives
// up. Parks is the parks before the give-up; Attempts and Events the
// attempts made and the history events spent.
func (p Policy) WorstCase() (parks, attempts, events int) {
	for blocked := time.Duration(0); blocked < p.MaxBlocked; parks++ {
		blocked += min(p.ParkInterval(parks), p.MaxBlocked-blocked)
	}
	entries := parks + 1
	perEntry := p.TransientRetrier().MaxAttempts + 1 + InfrastructureRetrier.MaxAttempts
	attempts = entries * perEntry
	return parks, attempts, attempts*EventsPerAttempt + entries*EventsPerEntry + parks*EventsPerPark
}

// Action is what a failed attempt leads to.
type Action int

const (
	// NotTransient: not the policy's to handle (quality, timeout,
	// infrastructure, or the attempt did not fail).
	NotTransient Action = iota
	// Retry: the same provider again, after Delay.
	Retry
	// Hop: the next provider of the fallback order, after Delay.
	Hop
	// Park: every provider is unavailable or rate-limited; the step tries
	// again at Until, on Provider.
	Park
	// GiveUp: the step has been parked MaxBlocked in all; the run ends
	// manual_action_required.
	GiveUp
)

var actionNames = [...]string{"not transient", "retry", "hop", "park", "give up"}

func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is what one failed attempt leads to.
type Decision struct {
	Action Action
	// Class is the failed attempt's.
	Class Class
	// Provider runs the next attempt: the same (Retry), the next of the
	// order (Hop), the first not known to be rate-limited at Until (Park).
	// Empty for NotTransient and GiveUp.
	Provider string
	// Delay is the wait before the next attempt (Retry, Hop): the
	// compiled Retrier's for the Retries-th retry.
	Delay time.Duration
	// Retries is how many transient retries the state's current entry
	// had before this decision ($$.State.RetryCount counts them, and
	// infrastructure retries too).
	Retries int
	// Until is when a parked step tries again; Wait is the whole seconds
	// from the decision's now until then (Park).
	Until time.Time
	Wait  time.Duration
	// Blocked is how long the step has been parked in all, this park not
	// included.
	Blocked time.Duration
	// Reason says why, for the run's record and the Blocked cause.
	Reason string
}

// BlockedCause is the Cause of a stratus.Blocked task failure, which the
// compiled "<node>.park" state parses (States.StringToJson) and
// "<node>.wait" waits on ($.last.wait.wait_s, SecondsPath): JSON
// {"wait_s": <int seconds>, "retry_at": "<RFC3339>", "reason": "<text>"}.
type BlockedCause struct {
	WaitS   int64  `json:"wait_s"`
	RetryAt string `json:"retry_at"`
	Reason  string `json:"reason"`
}

// Cause returns the JSON Cause to fail the task with: BlockedCause for
// Park, the Reason otherwise.
func (d Decision) Cause() string {
	if d.Action != Park {
		return d.Reason
	}
	b, _ := json.Marshal(BlockedCause{WaitS: int64(d.Wait / time.Second), RetryAt: d.Until.UTC().Format(time.RFC3339), Reason: d.Reason})
	return string(b)
}

// Decide returns what the last attempt of a step's history leads to.
// history is the step's attempts, oldest first, the last one ended; pinned
// is the node's provider ("" for the global primary); now is when the
// decision is taken (Park's Wait counts from it). A history whose last
// attempt did not fail transiently is NotTransient.
func (p Policy) Decide(pinned string, history []Attempt, now time.Time) Decision {
	if len(history) == 0 {
		return Decision{Action: NotTransient, Reason: "no attempt"}
	}
	r := p.replay(pinned, history, now)
	return r.last
}

// Provider returns the provider the step's next attempt runs on: the
// first of the order for a step with no attempt, else what the last
// attempt's decision names (the same provider after a non-transient
// failure retried by the infrastructure Retrier; the first of the order
// after a failure that ended the state's entry).
func (p Policy) Provider(pinned string, history []Attempt, now time.Time) string {
	if len(history) == 0 {
		return p.Order(pinned)[0]
	}
	return p.replay(pinned, history, now).next
}

// replayer walks a step's history, taking each failed attempt's decision
// in turn: the policy has no state of its own, a decision is a function
// of the history before it.
type replayer struct {
	p     Policy
	order []string
	now   time.Time

	// limited holds the known rate-limit resets (zero: unknown), across
	// park cycles, until the provider is seen again not rate-limited.
	limited map[string]time.Time

	// The current entry of the state (one park cycle).
	open    bool
	cur     string          // the provider of the entry's last attempt
	same    int             // transient retries on cur
	retries int             // transient retries of the entry: the Retrier's count
	infra   int             // infrastructure retries of the entry
	failed  map[string]bool // providers that failed transiently in the entry

	parks     int
	blocked   time.Duration
	parkedAt  time.Time // set while parked
	parkUntil time.Time

	last Decision
	next string
}

func (p Policy) replay(pinned string, history []Attempt, now time.Time) *replayer {
	r := &replayer{p: p, order: p.Order(pinned), now: now, limited: map[string]time.Time{}}
	r.next = r.order[0]
	for _, a := range history {
		r.last = r.step(a)
	}
	return r
}

func (r *replayer) ended(a Attempt) time.Time {
	if a.Ended.IsZero() {
		return r.now
	}
	return a.Ended
}

func (r *replayer) step(a Attempt) Decision {
	if !r.parkedAt.IsZero() {
		back := a.Started
		if back.IsZero() {
			back = r.parkUntil
		}
		r.blocked += max(0, back.Sub(r.parkedAt))
		r.parkedAt = time.Time{}
	}
	if !r.open {
		r.open, r.same, r.retries, r.infra, r.failed = true, 0, 0, 0, map[string]bool{}
	} else if a.Provider != r.cur {
		r.same = 0 // not the provider the policy named (the config changed, say): go on from it
	}
	r.cur = a.Provider
	if a.Class != RateLimited {
		delete(r.limited, a.Provider)
	}
	d := r.decide(a)
	switch d.Action {
	case Retry:
		r.same++
		r.retries++
	case Hop:
		r.same = 0
		r.retries++
	case Park:
		r.parks++
		r.parkedAt, r.parkUntil = r.ended(a), d.Until
		r.open = false
	case GiveUp:
		r.fresh()
		return d
	case NotTransient:
		switch {
		case a.Class == "":
			d.Provider = a.Provider
		case a.Class == Infrastructure && r.infra < InfrastructureRetrier.MaxAttempts:
			// The infrastructure Retrier runs the state again, on the
			// same provider.
			r.infra++
			d.Provider = a.Provider
		default:
			// A timeout, a quality failure or an infrastructure failure
			// past its Retrier ended the state's entry: only an
			// operator's resume follows, and it starts afresh.
			r.fresh()
			return d
		}
	}
	r.next = d.Provider
	return d
}

// fresh forgets the entry and the parks: what follows is an operator's
// resume, whose blocked budget starts again.
func (r *replayer) fresh() {
	r.open = false
	r.parks, r.blocked, r.parkedAt = 0, 0, time.Time{}
	r.next = r.firstAvailable(r.now)
}

// decide takes one failed attempt's decision, in the entry's state
// before it.
func (r *replayer) decide(a Attempt) Decision {
	d := Decision{Class: a.Class, Retries: r.retries, Blocked: r.blocked}
	if !a.Class.Transient() {
		d.Action = NotTransient
		d.Reason = fmt.Sprintf("a %s failure is not transient", orNone(a.Class))
		return d
	}
	at := r.ended(a)
	r.failed[a.Provider] = true
	if a.Class == RateLimited {
		r.limited[a.Provider] = a.RetryAt
	}
	budget := r.p.TransientRetrier().MaxAttempts
	if a.Class != RateLimited && r.same < r.p.MaxAttempts && r.retries < budget {
		d.Action, d.Provider, d.Delay = Retry, a.Provider, r.p.Delay(r.retries)
		d.Reason = fmt.Sprintf("%s on %s: same-provider retry %d of %d", a.Class, a.Provider, r.same+1, r.p.MaxAttempts)
		return d
	}
	if r.retries < budget {
		// The providers after the current one in the order (all of them
		// when it is not in the order) that have not failed in the entry.
		for _, next := range r.order[slices.Index(r.order, a.Provider)+1:] {
			if r.failed[next] || r.limitedAt(next, at) {
				continue
			}
			d.Action, d.Provider, d.Delay = Hop, next, r.p.Delay(r.retries)
			d.Reason = fmt.Sprintf("%s on %s: falling back to %s", a.Class, a.Provider, next)
			return d
		}
	}
	return r.park(d, a, at)
}

// park decides a park, or gives up when the blocked budget is spent.
func (r *replayer) park(d Decision, a Attempt, at time.Time) Decision {
	left := r.p.MaxBlocked - r.blocked
	if left <= 0 {
		d.Action = GiveUp
		d.Reason = fmt.Sprintf("%s on %s, every provider unavailable or rate-limited, and the step has been parked %s in all (agents.retry.max_blocked_s %s)",
			a.Class, a.Provider, r.blocked.Round(time.Second), r.p.MaxBlocked)
		return d
	}
	// A provider known to be rate-limited is back at its reset; any other
	// is tried again after the interval. When every one is known to be
	// limited, the earliest reset is waited for, however far.
	interval := r.p.ParkInterval(r.parks)
	var until time.Time
	known := true
	for _, p := range r.order {
		back := at.Add(interval)
		if r.limitedAt(p, at) {
			back = r.limited[p]
		} else {
			known = false
		}
		if until.IsZero() || back.Before(until) {
			until = back
		}
	}
	known = known || until.Before(at.Add(interval))
	until = maxTime(until, at.Add(time.Second))
	capped := false
	if limit := at.Add(left); until.After(limit) {
		until, capped = limit, true
	}
	d.Action, d.Until = Park, until
	d.Provider = r.firstAvailable(until)
	// Whole seconds (the Wait state's SecondsPath), rounded up.
	d.Wait = (max(0, until.Sub(r.now)) + time.Second - 1) / time.Second * time.Second
	why := fmt.Sprintf("park %d, %s", r.parks+1, interval)
	switch {
	case capped:
		why = "what is left of agents.retry.max_blocked_s"
	case known:
		why = "a rate limit's reset"
	}
	d.Reason = fmt.Sprintf("%s on %s; every provider of %v unavailable or rate-limited: tries again at %s on %s (%s)",
		a.Class, a.Provider, r.order, until.UTC().Format(time.RFC3339), d.Provider, why)
	return d
}

// limitedAt reports whether a provider is known to be rate-limited past t.
func (r *replayer) limitedAt(p string, t time.Time) bool {
	reset, ok := r.limited[p]
	return ok && !reset.IsZero() && reset.After(t)
}

// firstAvailable is the first provider of the order not known to be
// rate-limited at t; the first of the order when every one is.
func (r *replayer) firstAvailable(t time.Time) string {
	for _, p := range r.order {
		if !r.limitedAt(p, t) {
			return p
		}
	}
	return r.order[0]
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func orNone(c Class) string {
	if c == "" {
		return "unclassified"
	}
	return string(c)
}

// Notes says what a valid but surprising configuration means, one line
// each: a max_stage_attempts above the providers a step can run on
// (agents.allowed, the stand-ins left out) leaves the extra hops unused.
func (p Policy) Notes() []string {
	q := p
	q.MaxStageAttempts = math.MaxInt
	can := q.Order("")
	if p.MaxStageAttempts <= len(can) {
		return nil
	}
	return []string{fmt.Sprintf("agents.max_stage_attempts %d is more than the %d provider(s) a step on the primary can run on (%s: agents.primary, then as fallbacks agents.allowed without the bundled echo and script engines): a step runs on each of them at most once between two parks, and the other %d hop(s) go unused",
		p.MaxStageAttempts, len(can), strings.Join(can, ", "), p.MaxStageAttempts-len(can))}
}
