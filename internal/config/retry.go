package config

import (
	"math"
	"strconv"
)

// Defaults of agents.retry and agents.max_stage_attempts, worc's (worc
// configuration.md § agents, § agents.retry).
const (
	DefaultRetryMaxAttempts = 2       // agents.retry.max_attempts
	DefaultRetryBaseDelayS  = 2.0     // agents.retry.base_delay_s, s
	DefaultRetryMaxDelayS   = 30.0    // agents.retry.max_delay_s, s
	DefaultRetryMaxBlockedS = 21600.0 // agents.retry.max_blocked_s, s (6 h)
	DefaultMaxStageAttempts = 3       // agents.max_stage_attempts
	// MaxStepAttemptsPerCycle bounds (max_attempts + 1) × max_stage_attempts,
	// the attempts of one step between two parks: each costs 4 of an
	// execution's 25,000 history events (Step Functions developer guide §
	// Quotas; internal/retry Policy.WorstCase), worc's defaults 9.
	MaxStepAttemptsPerCycle = 30
	// MaxRetryBlockedS bounds max_blocked_s, s: a year, a Standard
	// execution's longest run (developer guide § Quotas).
	MaxRetryBlockedS = 31536000.0
	// maxRetryDelayS bounds base_delay_s and max_delay_s, s: the largest
	// MaxDelaySeconds of a Retrier (ASL spec § Retrying after error; Step
	// Functions developer guide § Handling errors: 31622401).
	maxRetryDelayS = 31622401.0
)

// Retry is agents.retry: how a step recovers from a transient provider
// failure (a provider_unavailable, network_unavailable or rate_limited
// attempt; never a quality failure or a timeout), worc configuration.md
// § agents.retry. The policy itself is internal/retry's; the compiled
// state machine's Retry fields come from it. A nil field takes worc's
// default; Parse fills every one.
type Retry struct {
	// MaxAttempts is the same-provider retries after an attempt's first
	// transient failure (2 ⇒ up to 3 runs on one provider); 0 disables
	// same-provider retry. Applied per provider of the fallback order.
	MaxAttempts *int `yaml:"max_attempts,omitempty"`
	// BaseDelayS is the backoff base, s: the n-th retry of a step's
	// state waits min(ceil(base_delay_s) × 2^n, ceil(max_delay_s)).
	BaseDelayS *float64 `yaml:"base_delay_s,omitempty"`
	// MaxDelayS caps each retry's wait, s; at least base_delay_s.
	MaxDelayS *float64 `yaml:"max_delay_s,omitempty"`
	// MaxBlockedS is how long a step may stay parked in total (every
	// provider unavailable or rate-limited), s, before the run ends
	// manual_action_required; 0 never parks.
	MaxBlockedS *float64 `yaml:"max_blocked_s,omitempty"`
}

// RetrySettings are agents.retry and agents.max_stage_attempts with the
// defaults applied: plain values, seconds as float64.
type RetrySettings struct {
	MaxAttempts      int
	BaseDelayS       float64
	MaxDelayS        float64
	MaxBlockedS      float64
	MaxStageAttempts int
}

// RetrySettings returns agents.retry and agents.max_stage_attempts, each
// unset one at its default (worc's).
func (a Agents) RetrySettings() RetrySettings {
	s := RetrySettings{
		MaxAttempts: DefaultRetryMaxAttempts, BaseDelayS: DefaultRetryBaseDelayS, MaxDelayS: DefaultRetryMaxDelayS,
		MaxBlockedS: DefaultRetryMaxBlockedS, MaxStageAttempts: DefaultMaxStageAttempts,
	}
	r := a.Retry
	if r.MaxAttempts != nil {
		s.MaxAttempts = *r.MaxAttempts
	}
	if r.BaseDelayS != nil {
		s.BaseDelayS = *r.BaseDelayS
	}
	if r.MaxDelayS != nil {
		s.MaxDelayS = *r.MaxDelayS
	}
	if r.MaxBlockedS != nil {
		s.MaxBlockedS = *r.MaxBlockedS
	}
	if a.MaxStageAttempts != nil {
		s.MaxStageAttempts = *a.MaxStageAttempts
	}
	return s
}

// DefaultRetry returns agents.retry at worc's defaults, every field set
// (what `stratus install` writes out).
func DefaultRetry() Retry {
	return Retry{
		MaxAttempts: new(DefaultRetryMaxAttempts), BaseDelayS: new(DefaultRetryBaseDelayS),
		MaxDelayS: new(DefaultRetryMaxDelayS), MaxBlockedS: new(DefaultRetryMaxBlockedS),
	}
}

// retryBlock validates agents.retry and agents.max_stage_attempts (worc
// configuration.md § agents.retry: "Validation rejects negative values
// and max_delay_s < base_delay_s"), then fills what is unset with the
// defaults. Two bounds worc does not have keep a compiled state machine
// inside Step Functions' limits (developer guide § Quotas): the attempts
// of one park cycle, (max_attempts + 1) × max_stage_attempts, at most
// MaxStepAttemptsPerCycle (the execution history holds 25,000 events),
// and max_blocked_s at most a year (a Standard execution's longest run).
func (c *Config) retryBlock(ps *problems) {
	bad := ps.add
	s := c.Agents.RetrySettings()
	ok := true
	if s.MaxAttempts < 0 {
		bad("agents.retry.max_attempts", "%d is negative; valid: 0 (no same-provider retry) or more same-provider retries after an attempt's first transient failure (default %d)", s.MaxAttempts, DefaultRetryMaxAttempts)
		ok = false
	}
	if s.MaxStageAttempts < 1 {
		bad("agents.max_stage_attempts", "%d; valid: 1 (no fallback to another provider) or more providers one step may run on before it parks (default %d)", s.MaxStageAttempts, DefaultMaxStageAttempts)
		ok = false
	}
	seconds := func(field string, v, max float64, what string, def float64) bool {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			bad(field, "%v is not a number of seconds; valid: 0 to %s %s (default %s)", v, num(max), what, num(def))
		case v < 0:
			bad(field, "%s is negative; valid: 0 to %s %s (default %s)", num(v), num(max), what, num(def))
		case v > max:
			bad(field, "%s is too large; valid: 0 to %s %s (default %s)", num(v), num(max), what, num(def))
		default:
			return true
		}
		return false
	}
	baseOK := seconds("agents.retry.base_delay_s", s.BaseDelayS, maxRetryDelayS, "seconds", DefaultRetryBaseDelayS)
	maxOK := seconds("agents.retry.max_delay_s", s.MaxDelayS, maxRetryDelayS, "seconds", DefaultRetryMaxDelayS)
	seconds("agents.retry.max_blocked_s", s.MaxBlockedS, MaxRetryBlockedS,
		"seconds a step may stay parked in total before the run ends manual_action_required, 0 never parking (at most a year: a Step Functions execution's longest run)", DefaultRetryMaxBlockedS)
	if baseOK && maxOK && s.MaxDelayS < s.BaseDelayS {
		bad("agents.retry.max_delay_s", "%s is less than agents.retry.base_delay_s %s; valid: a cap of %s seconds or more", num(s.MaxDelayS), num(s.BaseDelayS), num(s.BaseDelayS))
	}
	if ok {
		// Divide rather than multiply: no overflow on a huge value.
		if s.MaxAttempts >= MaxStepAttemptsPerCycle || s.MaxStageAttempts > MaxStepAttemptsPerCycle/(s.MaxAttempts+1) {
			// Located at whichever of the two the file writes.
			field := "agents.max_stage_attempts"
			if _, written := ps.pos[field]; !written {
				field = "agents.retry.max_attempts"
			}
			bad(field, "agents.max_stage_attempts %d with agents.retry.max_attempts %d gives (%d + 1) × %d attempts of one step before it parks; valid: at most %d in all (each costs 4 of an execution's 25,000 Step Functions history events)",
				s.MaxStageAttempts, s.MaxAttempts, s.MaxAttempts, s.MaxStageAttempts, MaxStepAttemptsPerCycle)
		}
	}
	c.Agents.Retry = Retry{MaxAttempts: new(s.MaxAttempts), BaseDelayS: new(s.BaseDelayS), MaxDelayS: new(s.MaxDelayS), MaxBlockedS: new(s.MaxBlockedS)}
	c.Agents.MaxStageAttempts = new(s.MaxStageAttempts)
}

// StandIn reports whether the provider is one of Stratus's bundled
// stand-in engines (echo, script: `stratus engine echo|script`, or a
// provider of that name), which answer without a model. A step never
// falls back to one (internal/retry): its canned report would pass for
// the real provider's.
func (p Provider) StandIn(name string) bool {
	if name == "echo" || name == "script" {
		return true
	}
	return p.Command == StratusCommand && len(p.Args) >= 2 && p.Args[0] == "engine" && (p.Args[1] == "echo" || p.Args[1] == "script")
}

// num renders seconds as written: 2, 2.5, 21600.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
