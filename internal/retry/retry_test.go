package retry

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/config"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// at is t0 plus s seconds.
func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// fail is an instant failed attempt at second s.
func fail(provider string, class Class, s float64) Attempt {
	return Attempt{Provider: provider, Class: class, Started: at(s), Ended: at(s)}
}

func limited(provider string, s float64, reset time.Time) Attempt {
	a := fail(provider, RateLimited, s)
	a.RetryAt = reset
	return a
}

// worc configuration.md § agents.retry: the compiled Retrier's numbers
// come from agents.retry and agents.max_stage_attempts —
// MaxAttempts = max_stage_attempts × (max_attempts + 1) − 1,
// IntervalSeconds = ceil(base_delay_s) ≥ 1, MaxDelaySeconds =
// ceil(max_delay_s) ≥ IntervalSeconds, BackoffRate 2.
func TestTransientRetrier_NumbersFromTheConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name                string
		attempts, stage     int
		base, maxDelay      float64
		want                Retrier
		wantDelays          []time.Duration
		wantFirstParkPeriod time.Duration
	}{
		{"worc's defaults", 2, 3, 2, 30, Retrier{8, 2, 2, 30},
			[]time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}, 30 * time.Second},
		{"fractions round up", 1, 2, 0.5, 2.5, Retrier{3, 1, 2, 3},
			[]time.Duration{1 * time.Second, 2 * time.Second, 3 * time.Second}, 3 * time.Second},
		{"no delay at all: still one second, the ASL minimum", 3, 1, 0, 0, Retrier{3, 1, 2, 1},
			[]time.Duration{time.Second, time.Second}, time.Second},
		{"no same-provider retry: hops only", 0, 3, 2, 30, Retrier{2, 2, 2, 30}, nil, 30 * time.Second},
		{"no retry, no fallback: MaxAttempts 0, no Retrier", 0, 1, 2, 30, Retrier{0, 2, 2, 30}, nil, 30 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Default("claude", "codex")
			p.MaxAttempts, p.MaxStageAttempts = tc.attempts, tc.stage
			p.BaseDelay, p.MaxDelay = seconds(tc.base), seconds(tc.maxDelay)
			if got := p.TransientRetrier(); got != tc.want {
				t.Errorf("TransientRetrier %+v, want %+v", got, tc.want)
			}
			for n, want := range tc.wantDelays {
				if got := p.Delay(n); got != want {
					t.Errorf("Delay(%d) = %v, want %v", n, got, want)
				}
			}
			if got := p.ParkInterval(0); got != tc.wantFirstParkPeriod {
				t.Errorf("ParkInterval(0) = %v, want %v", got, tc.wantFirstParkPeriod)
			}
		})
	}
}

// The park interval doubles from max_delay_s, capped at an hour (or at
// max_delay_s when that is longer).
func TestParkInterval_DoublesThenCaps(t *testing.T) {
	t.Parallel()
	p := Default("claude")
	var got []time.Duration
	for k := range 10 {
		got = append(got, p.ParkInterval(k))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour, time.Hour}
	if !slices.Equal(got, want) {
		t.Errorf("park intervals %v, want %v", got, want)
	}
	p.MaxDelay = 2 * time.Hour
	if got := p.ParkInterval(3); got != 2*time.Hour {
		t.Errorf("max_delay_s 2h: ParkInterval(3) = %v, want 2h", got)
	}
}

// worc configuration.md § Provider routing: a node on the global primary
// falls back to the other allowed providers in agents.allowed order; a
// node pinned to another provider falls back to the global primary
// first. At most max_stage_attempts providers.
func TestOrder_FollowsWorcsFallback(t *testing.T) {
	t.Parallel()
	p := Default("claude", "codex", "openseek")
	cases := []struct {
		pinned string
		stage  int
		want   []string
	}{
		{"", 3, []string{"claude", "codex", "openseek"}},
		{"claude", 3, []string{"claude", "codex", "openseek"}},
		{"codex", 3, []string{"codex", "claude", "openseek"}},
		{"openseek", 3, []string{"openseek", "claude", "codex"}},
		{"codex", 2, []string{"codex", "claude"}},
		{"", 1, []string{"claude"}},
		{"", 9, []string{"claude", "codex", "openseek"}}, // more hops than providers: the extra ones are unused
	}
	for _, tc := range cases {
		q := p
		q.MaxStageAttempts = tc.stage
		if got := q.Order(tc.pinned); !slices.Equal(got, tc.want) {
			t.Errorf("pinned %q, max_stage_attempts %d: order %v, want %v", tc.pinned, tc.stage, got, tc.want)
		}
	}
}

// The bundled stand-in engines never receive a fallback: the default
// config allows echo and script, and a claude node must not fall back to
// a canned report. The primary is a fallback target even when
// agents.allowed leaves it out (config.Config.Provider allows it).
func TestFromConfig_FallbacksLeaveStandInsOut(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Agents.Primary = "claude"
	p := FromConfig(cfg)
	if want := []string{"openseek", "claude", "codex"}; !slices.Equal(p.Fallbacks, want) {
		t.Errorf("fallbacks %v, want %v", p.Fallbacks, want)
	}
	if got, want := p.Order(""), []string{"claude", "openseek", "codex"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if p.MaxAttempts != 2 || p.MaxStageAttempts != 3 || p.BaseDelay != 2*time.Second || p.MaxDelay != 30*time.Second || p.MaxBlocked != 6*time.Hour {
		t.Errorf("policy %+v: want worc's defaults", p)
	}
	// A node on the stand-in primary keeps it first and falls back to
	// real providers only.
	cfg = config.Default()
	cfg.Agents.Allowed = []string{"codex"}
	p = FromConfig(cfg)
	if got, want := p.Order(""), []string{"echo", "codex"}; !slices.Equal(got, want) {
		t.Errorf("echo primary: order %v, want %v", got, want)
	}
	if got, want := p.Order("codex"), []string{"codex"}; !slices.Equal(got, want) {
		t.Errorf("codex pinned, echo primary: order %v, want %v", got, want)
	}
}

// The decisions of worc configuration.md § agents.retry, one failed
// attempt at a time: retry the same provider with backoff, then switch
// to the next provider; a rate limit is never retried on the same
// provider but falls back; when every provider is unavailable or
// rate-limited, park; after max_blocked_s parked in all, give up. A
// quality, timeout or infrastructure failure is not the policy's.
func TestDecide_Table(t *testing.T) {
	t.Parallel()
	three := Default("claude", "codex", "openseek")
	two := Default("claude", "codex")
	reset := at(5 * 3600)
	type want struct {
		action   Action
		provider string
		delay    time.Duration
		until    time.Time
		wait     time.Duration
	}
	cases := []struct {
		name    string
		p       Policy
		pinned  string
		history []Attempt
		now     time.Time // zero: the last attempt's end
		want    want
	}{
		{"first unavailable: same provider after base_delay_s", three, "", []Attempt{fail("claude", ProviderUnavailable, 0)}, time.Time{},
			want{Retry, "claude", 2 * time.Second, time.Time{}, 0}},
		{"network unavailable: the same", three, "", []Attempt{fail("claude", NetworkUnavailable, 0)}, time.Time{},
			want{Retry, "claude", 2 * time.Second, time.Time{}, 0}},
		{"second retry doubles", three, "", []Attempt{fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2)}, time.Time{},
			want{Retry, "claude", 4 * time.Second, time.Time{}, 0}},
		{"max_attempts spent: the next provider", three, "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2), fail("claude", ProviderUnavailable, 6)}, time.Time{},
			want{Hop, "codex", 8 * time.Second, time.Time{}, 0}},
		{"the backoff exponent runs on across a hop (one Retrier)", three, "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2), fail("claude", ProviderUnavailable, 6),
			fail("codex", ProviderUnavailable, 14)}, time.Time{},
			want{Retry, "codex", 16 * time.Second, time.Time{}, 0}},
		{"rate limit: no same-provider retry, fall back at once", three, "", []Attempt{limited("claude", 0, reset)}, time.Time{},
			want{Hop, "codex", 2 * time.Second, time.Time{}, 0}},
		{"pinned off the primary falls back to the primary", three, "codex", []Attempt{limited("codex", 0, time.Time{})}, time.Time{},
			want{Hop, "claude", 2 * time.Second, time.Time{}, 0}},
		{"every provider rate-limited, resets known: park until the earliest", two, "", []Attempt{
			limited("claude", 0, at(7200)), limited("codex", 2, at(3600))}, time.Time{},
			want{Park, "codex", 0, at(3600), 3598 * time.Second}},
		{"rate limits without a reset: the park interval", two, "", []Attempt{
			limited("claude", 0, time.Time{}), limited("codex", 2, time.Time{})}, time.Time{},
			want{Park, "claude", 0, at(32), 30 * time.Second}},
		{"one limited for hours, one down: park the interval, then the one down", two, "", []Attempt{
			limited("claude", 0, reset), fail("codex", ProviderUnavailable, 2), fail("codex", ProviderUnavailable, 4), fail("codex", ProviderUnavailable, 8)}, time.Time{},
			want{Park, "codex", 0, at(38), 30 * time.Second}},
		{"a fallback known to be limited is skipped, after a park too", three, "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2), fail("claude", ProviderUnavailable, 6),
			limited("codex", 14, reset),
			fail("openseek", ProviderUnavailable, 30), fail("openseek", ProviderUnavailable, 60), fail("openseek", ProviderUnavailable, 90), // park until 120
			fail("claude", ProviderUnavailable, 120), fail("claude", ProviderUnavailable, 122), fail("claude", ProviderUnavailable, 126)}, time.Time{},
			want{Hop, "openseek", 8 * time.Second, time.Time{}, 0}},
		{"the wait counts from the decision's now", two, "", []Attempt{
			limited("claude", 0, time.Time{}), limited("codex", 2, time.Time{})}, at(12.5),
			want{Park, "claude", 0, at(32), 20 * time.Second}},
		{"max_stage_attempts 1: retries, then park", func() Policy { p := three; p.MaxStageAttempts = 1; return p }(), "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2), fail("claude", ProviderUnavailable, 6)}, time.Time{},
			want{Park, "claude", 0, at(36), 30 * time.Second}},
		{"max_attempts 0: hop at once", func() Policy { p := three; p.MaxAttempts = 0; return p }(), "", []Attempt{fail("claude", ProviderUnavailable, 0)}, time.Time{},
			want{Hop, "codex", 2 * time.Second, time.Time{}, 0}},
		{"no retry and no fallback: park at once", func() Policy { p := three; p.MaxAttempts, p.MaxStageAttempts = 0, 1; return p }(), "", []Attempt{fail("claude", ProviderUnavailable, 0)}, time.Time{},
			want{Park, "claude", 0, at(30), 30 * time.Second}},
		{"max_blocked_s 0: never park, give up", func() Policy { p := two; p.MaxBlocked = 0; return p }(), "", []Attempt{
			limited("claude", 0, time.Time{}), limited("codex", 2, time.Time{})}, time.Time{},
			want{GiveUp, "", 0, time.Time{}, 0}},
		{"a park is capped by what is left of max_blocked_s", func() Policy { p := two; p.MaxBlocked = 100 * time.Second; return p }(), "", []Attempt{
			limited("claude", 0, at(3600)), limited("codex", 2, at(3600)), // park until 3600, capped to 102
			limited("claude", 102, at(3600))}, time.Time{}, // codex is known to be limited: park again, but nothing is left
			want{GiveUp, "", 0, time.Time{}, 0}},
		{"the second park doubles the interval", two, "", []Attempt{
			limited("claude", 0, time.Time{}), limited("codex", 2, time.Time{}), // park until 32
			limited("claude", 32, time.Time{}), limited("codex", 34, time.Time{})}, time.Time{},
			want{Park, "claude", 0, at(94), 60 * time.Second}},
		{"quality is not transient", three, "", []Attempt{fail("claude", Quality, 0)}, time.Time{}, want{NotTransient, "", 0, time.Time{}, 0}},
		{"timeout is not transient", three, "", []Attempt{fail("claude", Timeout, 0)}, time.Time{}, want{NotTransient, "", 0, time.Time{}, 0}},
		{"infrastructure is not transient", three, "", []Attempt{fail("claude", Infrastructure, 0)}, time.Time{}, want{NotTransient, "claude", 0, time.Time{}, 0}},
		{"unclassified is not transient", three, "", []Attempt{fail("claude", "", 0)}, time.Time{}, want{NotTransient, "claude", 0, time.Time{}, 0}},
		{"an infrastructure retry does not spend the transient budget", three, "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", Infrastructure, 2), fail("claude", ProviderUnavailable, 7)}, time.Time{},
			want{Retry, "claude", 4 * time.Second, time.Time{}, 0}},
		{"after a give-up, a resumed step starts afresh", func() Policy { p := two; p.MaxBlocked = 0; return p }(), "", []Attempt{
			limited("claude", 0, time.Time{}), limited("codex", 2, time.Time{}), // give up
			fail("claude", ProviderUnavailable, 500)}, time.Time{},
			want{Retry, "claude", 2 * time.Second, time.Time{}, 0}},
		{"after a timeout, a resumed step starts afresh", three, "", []Attempt{
			fail("claude", ProviderUnavailable, 0), fail("claude", ProviderUnavailable, 2), fail("claude", Timeout, 6),
			fail("claude", ProviderUnavailable, 900)}, time.Time{},
			want{Retry, "claude", 2 * time.Second, time.Time{}, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := tc.now
			if now.IsZero() {
				now = tc.history[len(tc.history)-1].Ended
			}
			d := tc.p.Decide(tc.pinned, tc.history, now)
			got := want{d.Action, d.Provider, d.Delay, d.Until, d.Wait}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decision %v %q delay %v until %v wait %v\nwant     %v %q delay %v until %v wait %v\nreason: %s",
					got.action, got.provider, got.delay, got.until, got.wait, tc.want.action, tc.want.provider, tc.want.delay, tc.want.until, tc.want.wait, d.Reason)
			}
			if d.Reason == "" {
				t.Error("no reason")
			}
			// The next attempt runs where the decision says.
			if d.Action != NotTransient && d.Action != GiveUp {
				if next := tc.p.Provider(tc.pinned, tc.history, now); next != d.Provider {
					t.Errorf("Provider %q, decision %q", next, d.Provider)
				}
			}
		})
	}
}

// Park's cause is the JSON the compiled "<node>.park" state parses:
// {"wait_s": int, "retry_at": RFC3339, "reason": text}.
func TestDecision_CauseIsTheBlockedJSON(t *testing.T) {
	t.Parallel()
	p := Default("claude", "codex")
	d := p.Decide("", []Attempt{limited("claude", 0, at(90)), limited("codex", 1, at(120))}, at(1.2))
	var c map[string]any
	if err := json.Unmarshal([]byte(d.Cause()), &c); err != nil {
		t.Fatal(err)
	}
	if c["wait_s"] != 89.0 || c["retry_at"] != "2026-03-01T09:01:30Z" || !strings.Contains(c["reason"].(string), "a rate limit's reset") || len(c) != 3 {
		t.Errorf("cause %s", d.Cause())
	}
	if strings.Contains(d.Cause(), ".") && !strings.Contains(c["reason"].(string), ".") {
		t.Errorf("wait_s must be an integer: %s", d.Cause())
	}
}

// engine answers the attempt n of a step, started at now on provider:
// its failure class ("" succeeds) and a rate limit's reset.
type engine func(provider string, n int, now time.Time) (Class, time.Time)

// simulate runs one step against an engine whose every attempt ends at
// once, driving the clock as the compiled machine would: the decision's
// Delay after a retry or a hop, its Wait after a park. It returns the
// attempts made and the decision after each.
func simulate(t *testing.T, p Policy, pinned string, eng engine) ([]Attempt, []Decision) {
	t.Helper()
	var history []Attempt
	var decisions []Decision
	now := t0
	budget := p.TransientRetrier().MaxAttempts
	entryRetries := 0
	for n := 0; ; n++ {
		if n > 10000 {
			t.Fatalf("no end after %d attempts: a hot loop", n)
		}
		provider := p.Provider(pinned, history, now)
		c, reset := eng(provider, n, now)
		history = append(history, Attempt{Provider: provider, Class: c, RetryAt: reset, Started: now, Ended: now})
		d := p.Decide(pinned, history, now)
		decisions = append(decisions, d)
		switch d.Action {
		case Retry, Hop:
			if d.Retries != entryRetries {
				t.Fatalf("attempt %d: the decision counts %d retries, the state entry had %d", n, d.Retries, entryRetries)
			}
			if entryRetries++; entryRetries > budget {
				t.Fatalf("attempt %d: retry %d of a state entry whose Retrier allows %d", n, entryRetries, budget)
			}
			if r := p.TransientRetrier().ASL(); d.Delay != r.Delay(d.Retries) {
				want := r.Delay(d.Retries)
				t.Fatalf("attempt %d: the decision waits %v, the compiled Retrier %v", n, d.Delay, want)
			}
			now = now.Add(d.Delay)
		case Park:
			entryRetries = 0 // the state is entered afresh after the wait
			now = now.Add(d.Wait)
		default:
			return history, decisions
		}
	}
}

// failing is an engine that fails with class forever; a rate limit
// resets reset after each attempt (0: unknown).
func failing(class Class, reset time.Duration) engine {
	return func(_ string, _ int, now time.Time) (Class, time.Time) {
		if reset == 0 {
			return class, time.Time{}
		}
		return class, now.Add(reset)
	}
}

// An engine that fails at once, forever: the budget ends it, never a hot
// loop. Every attempt is followed by a wait of at least a second, no
// state entry retries past its compiled MaxAttempts, each retry waits
// the Retrier's delay, and the step gives up once parked max_blocked_s
// in all.
func TestSimulate_AnEngineThatFailsInstantlyForeverEnds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		p            Policy
		eng          engine
		wantAttempts int
		wantParks    []time.Duration
	}{
		// 3 providers × 3 runs = 9 attempts a cycle; parks of 30 s, 1, 2,
		// 4, 8, 16, 32 min, then 1 h ×4 and the 3390 s left of 6 h: 12
		// parks, 13 cycles.
		{"defaults, three providers down", Default("claude", "codex", "openseek"), failing(ProviderUnavailable, 0), 13 * 9, defaultParks},
		{"defaults, two providers unreachable", Default("claude", "codex"), failing(NetworkUnavailable, 0), 13 * 6, defaultParks},
		{"two providers rate-limited, reset unknown", Default("claude", "codex"), failing(RateLimited, 0), 13 * 2, defaultParks},
		// A reset 5 h after each attempt: claude at 0, codex at 2 s, a park
		// until claude's reset; claude again, codex still limited for 2 s:
		// a park of 2 s; codex, claude limited: the hour left of 6 h; then
		// the step gives up.
		{"two providers rate-limited for 5 h", Default("claude", "codex"), failing(RateLimited, 5*time.Hour), 5,
			[]time.Duration{5*time.Hour - 2*time.Second, 2 * time.Second, time.Hour}},
		{"one provider, no retries", func() Policy { p := Default("claude"); p.MaxAttempts = 0; return p }(), failing(ProviderUnavailable, 0), 13, defaultParks},
		{"never park", func() Policy { p := Default("claude", "codex"); p.MaxBlocked = 0; return p }(), failing(ProviderUnavailable, 0), 6, nil},
		{"one hour blocked", func() Policy { p := Default("claude", "codex"); p.MaxBlocked = time.Hour; return p }(), failing(ProviderUnavailable, 0), 8 * 6,
			[]time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 28*time.Minute + 30*time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			attempts, decisions := simulate(t, tc.p, "", tc.eng)
			last := decisions[len(decisions)-1]
			if last.Action != GiveUp {
				t.Fatalf("ended with %v, want give up", last.Action)
			}
			if len(attempts) != tc.wantAttempts {
				t.Errorf("%d attempts, want %d", len(attempts), tc.wantAttempts)
			}
			var parks []time.Duration
			var blocked time.Duration
			for i, d := range decisions[:len(decisions)-1] {
				w := d.Delay
				if d.Action == Park {
					w = d.Wait
					parks = append(parks, w)
					blocked += w
				}
				if w < time.Second {
					t.Errorf("attempt %d waits %v after a %v: a hot loop", i, w, d.Action)
				}
			}
			if !slices.Equal(parks, tc.wantParks) {
				t.Errorf("parks %v\nwant  %v", parks, tc.wantParks)
			}
			if blocked != tc.p.MaxBlocked && tc.p.MaxBlocked > 0 {
				t.Errorf("parked %v in all; want exactly max_blocked_s %v", blocked, tc.p.MaxBlocked)
			}
			if last.Blocked != blocked {
				t.Errorf("the give-up says %v blocked, the waits %v", last.Blocked, blocked)
			}
		})
	}
}

var defaultParks = []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute,
	time.Hour, time.Hour, time.Hour, time.Hour, 3390 * time.Second}

// A provider that comes back: the step goes on on it, and the policy
// has nothing more to say.
func TestSimulate_RecoversWhenTheProviderComesBack(t *testing.T) {
	t.Parallel()
	p := Default("claude", "codex")
	attempts, decisions := simulate(t, p, "", func(_ string, n int, _ time.Time) (Class, time.Time) {
		if n < 7 {
			return ProviderUnavailable, time.Time{}
		}
		return "", time.Time{}
	})
	var got []string
	for _, a := range attempts {
		got = append(got, a.Provider)
	}
	// 3 on claude, 3 on codex, a park, then claude again.
	if want := []string{"claude", "claude", "claude", "codex", "codex", "codex", "claude", "claude"}; !slices.Equal(got, want) {
		t.Errorf("providers %v, want %v", got, want)
	}
	var actions []string
	var waits []time.Duration
	for _, d := range decisions {
		actions = append(actions, d.Action.String())
		waits = append(waits, d.Delay+d.Wait)
	}
	if want := []string{"retry", "retry", "hop", "retry", "retry", "park", "retry", "not transient"}; !slices.Equal(actions, want) {
		t.Errorf("actions %v, want %v", actions, want)
	}
	if want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 2 * time.Second, 0}; !slices.Equal(waits, want) {
		t.Errorf("waits %v, want %v", waits, want)
	}
}

// A max_stage_attempts above what agents.allowed can give is valid, and
// said: the extra hops go unused.
func TestNotes_MoreHopsThanProviders(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Agents.Primary = "claude"
	cfg.Agents.Allowed = []string{"echo", "claude", "codex"}
	cfg.Agents.MaxStageAttempts = new(5)
	notes := FromConfig(cfg).Notes()
	if len(notes) != 1 || !strings.Contains(notes[0], "agents.max_stage_attempts 5 is more than the 2 provider(s) a step on the primary can run on (claude, codex:") ||
		!strings.Contains(notes[0], "the other 3 hop(s) go unused") {
		t.Errorf("notes %q", notes)
	}
	cfg.Agents.MaxStageAttempts = new(2)
	if notes := FromConfig(cfg).Notes(); len(notes) != 0 {
		t.Errorf("notes %q for a max_stage_attempts the providers can give", notes)
	}
}

// Step Functions holds 25,000 history events per execution (developer
// guide § Quotas): one step, failing transiently at once forever, costs a
// bounded number of them — with worc's defaults 698 (12 parks, 13 state
// entries of 9 transient and 3 infrastructure attempts); at the config's
// limits (30 attempts a cycle, a year blocked, no delay) the park cap
// grows with max_blocked_s, so the parks stay few.
func TestWorstCase_BoundsAStepsHistory(t *testing.T) {
	t.Parallel()
	parks, attempts, events := Default("claude", "codex", "openseek").WorstCase()
	if parks != 12 || attempts != 13*12 || events != 698 {
		t.Errorf("defaults: %d parks, %d attempts, %d events; want 12, 156, 698", parks, attempts, events)
	}
	// The simulation agrees on the transient attempts (13 × 9).
	p := Default("claude", "codex", "openseek")
	if got, _ := simulate(t, p, "", failing(ProviderUnavailable, 0)); len(got) != 13*9 {
		t.Errorf("simulated %d attempts, want 117", len(got))
	}
	max := Default("claude", "codex", "openseek")
	max.MaxAttempts, max.MaxStageAttempts = 9, 3 // (9 + 1) × 3 = config.MaxStepAttemptsPerCycle
	max.BaseDelay, max.MaxDelay = 0, 0
	max.MaxBlocked = time.Duration(config.MaxRetryBlockedS) * time.Second
	parks, attempts, events = max.WorstCase()
	if parks > 40 || events > 6000 {
		t.Errorf("at the config's limits: %d parks, %d attempts, %d events; want at most 40 parks and 6,000 events", parks, attempts, events)
	}
	t.Logf("at the config's limits: %d parks, %d attempts, %d events", parks, attempts, events)
}
