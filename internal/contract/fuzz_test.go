package contract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stratusflow/stratus/internal/testenv"
)

// printfLine matches the format string of a printf in a vector script.
var printfLine = regexp.MustCompile(`printf '([^']*)'`)

// vectorLines returns the stdout lines the vector engines print: every
// printf format string (with \n dropped) and, for the usage_rules helper
// u(), the usage event each call expands to.
func vectorLines(tb testing.TB) []string {
	tb.Helper()
	scripts, err := filepath.Glob(filepath.Join(testenv.Cases(tb, "contract"), "*.sh"))
	if err != nil || len(scripts) == 0 {
		tb.Fatalf("no vector scripts (%v)", err)
	}
	helper := regexp.MustCompile(`^u '([^']*)'$`)
	var lines []string
	for _, s := range scripts {
		f, err := os.Open(s)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			text := sc.Text()
			if m := helper.FindStringSubmatch(text); m != nil {
				lines = append(lines, `{"event":"usage","usage":`+m[1]+`}`)
				continue
			}
			for _, m := range printfLine.FindAllStringSubmatch(text, -1) {
				if l := bytes.TrimSuffix([]byte(m[1]), []byte(`\n`)); !bytes.Contains(l, []byte("%s")) {
					lines = append(lines, string(l))
				}
			}
		}
		f.Close()
	}
	return lines
}

// malformedLines are lines a leaky or broken engine might print.
var malformedLines = []string{
	``,
	`{`,
	`}`,
	`null`,
	`[]`,
	`"subrun_report"`,
	`{"event":"usage"}`,
	`{"event":"usage","usage":null}`,
	`{"event":"usage","usage":[1,2]}`,
	`{"event":"usage","usage":{"prompt_tokens":1e2,"completion_tokens":2.50e1,"total_tokens":125,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":100,"cost_usd":1e-3}}`,
	`{"event":"usage","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1,"cost_usd":1e309}}`,
	`{"event":"usage","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1,"cost_usd":null}}`,
	`{"event":"usage","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1,"cost_usd":-0}}`,
	`{"event":"usage","usage":{"prompt_tokens":9223372036854775808,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1}}`,
	`{"event":"usage","usage":{"prompt_tokens":1e99999999999,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1}}`,
	`{"event":"usage","usage":{"prompt_tokens":3,"prompt_tokens":4,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1}}`,
	`{"event":"agent_step","step":-3}`,
	`{"event":"agent_step","step":1e400}`,
	`{"event":"agent_step","step":"7"}`,
	`{"event":"context_yield","to_sequence":1.5,"answer":"x"}`,
	`{"event":"turn_failed","error":42}`,
	`{"event":"turn_failed","error":""}`,
	`{"subrun_report":}`,
	`{"subrun_report":null,"event":"turn_failed","error":"x"}`,
	"{\"event\":\"agent_step\",\"step\":1}\r",
	"\xff\xfe{\"event\":\"agent_step\"}",
	`   {"event" : "agent_step" , "step" : 12 }   `,
}

// FuzzEventLine feeds one stdout line to the classifier
// (docs/contracts.md § The event stream, § The report line), once on a fresh
// stream and once after earlier accounting, and checks: it never panics;
// steps, tokens and cost never go negative; a usage line charges both token
// counts exactly or nothing; cost stays unknown or a finite non-negative
// number; non-usage lines never touch the tokens.
func FuzzEventLine(f *testing.F) {
	for _, l := range vectorLines(f) {
		f.Add(l)
	}
	for _, l := range malformedLines {
		f.Add(l)
	}
	// Lines that once broke the invariants: negative counts, counts whose
	// sum wraps around int64, and a negative cost that underflows to -0.
	f.Add(`{"event":"usage","usage":{"prompt_tokens":-5,"completion_tokens":-3,"total_tokens":-8,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":-5}}`)
	f.Add(`{"event":"usage","usage":{"prompt_tokens":5000000000000000000,"completion_tokens":1,"total_tokens":5000000000000000001,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":5000000000000000000}}`)
	f.Add(`{"event":"usage","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1,"cost_usd":-1e-400}}`)
	f.Fuzz(func(t *testing.T, line string) {
		prior := observed{steps: 3, promptTokens: 100, completionTokens: 40, cost: 0.5, costKnown: true}
		for _, start := range []observed{{}, prior} {
			o := start
			changed := o.apply([]byte(line))
			checkAccounting(t, line, start, o, changed)
			// The same line again: totals must still not wrap or go negative.
			before := o
			changed = o.apply([]byte(line))
			checkAccounting(t, line, before, o, changed)
		}
	})
}

func checkAccounting(t *testing.T, line string, before, after observed, changed bool) {
	t.Helper()
	if after.steps < 0 || after.promptTokens < 0 || after.completionTokens < 0 {
		t.Fatalf("line %q: accounting went negative: steps %d, tokens %d/%d",
			line, after.steps, after.promptTokens, after.completionTokens)
	}
	if after.steps < before.steps {
		t.Fatalf("line %q: steps fell from %d to %d", line, before.steps, after.steps)
	}
	if after.costKnown {
		if math.IsNaN(after.cost) || math.IsInf(after.cost, 0) || after.cost < 0 {
			t.Fatalf("line %q: cost_usd = %v", line, after.cost)
		}
	} else if after.cost != 0 {
		t.Fatalf("line %q: unknown cost carries %v", line, after.cost)
	}
	if before.costKnown && !after.costKnown {
		t.Fatalf("line %q: a known cost became unknown", line)
	}

	dP := after.promptTokens - before.promptTokens
	dC := after.completionTokens - before.completionTokens
	costMoved := after.costKnown != before.costKnown || after.cost != before.cost
	u, isUsage := usageObject(line)
	if !isUsage {
		if dP != 0 || dC != 0 || costMoved {
			t.Fatalf("line %q is not a usage event but charged %d/%d tokens (cost %v -> %v)",
				line, dP, dC, before.cost, after.cost)
		}
		return
	}
	if !changed {
		if dP != 0 || dC != 0 || costMoved {
			t.Fatalf("line %q: usage ignored but charged %d/%d tokens (cost %v -> %v)",
				line, dP, dC, before.cost, after.cost)
		}
	} else {
		p, okP := integral(u["prompt_tokens"])
		c, okC := integral(u["completion_tokens"])
		if !okP || !okC || dP != p || dC != c {
			t.Fatalf("line %q: usage partially charged: +%d/+%d tokens for prompt %s, completion %s",
				line, dP, dC, u["prompt_tokens"], u["completion_tokens"])
		}
	}
	// Independent oracle (exact rationals) for what must be charged: all
	// five fields integral int64s, and cost_usd absent or finite >= 0.
	want, decided := usageValid(u)
	if want && decided {
		// A valid line whose counts would wrap the totals is voided whole.
		p, _ := integral(u["prompt_tokens"])
		c, _ := integral(u["completion_tokens"])
		if before.promptTokens > math.MaxInt64-p || before.completionTokens > math.MaxInt64-c {
			want = false
		}
	}
	if decided && want != changed {
		t.Fatalf("line %q: usage charged = %v, want %v", line, changed, want)
	}
}

// usageObject decodes line as the classifier does and returns its usage
// object when it is a usage event (not a report).
func usageObject(line string) (map[string]json.RawMessage, bool) {
	trimmed := bytes.TrimSpace([]byte(line))
	var obj map[string]json.RawMessage
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &obj) != nil {
		return nil, false
	}
	if _, ok := obj["subrun_report"]; ok {
		return nil, false
	}
	var tag string
	if json.Unmarshal(obj["event"], &tag) != nil || tag != "usage" {
		return nil, false
	}
	var u map[string]json.RawMessage
	if json.Unmarshal(obj["usage"], &u) != nil {
		return nil, true // a usage event whose usage is not an object
	}
	return u, true
}

// exponentTooLong keeps big.Rat away from numbers like 1e999999999, whose
// exact value it would try to build.
var exponentTooLong = regexp.MustCompile(`[eE][+-]?\d{5,}`)

// usageValid decides, without the package's integral, whether a usage
// object must be charged; decided is false when a number is out of the
// oracle's reach.
func usageValid(u map[string]json.RawMessage) (valid, decided bool) {
	if u == nil {
		return false, true
	}
	minI, maxI := big.NewRat(math.MinInt64, 1), new(big.Rat).SetInt(new(big.Int).SetUint64(math.MaxInt64))
	for _, f := range usageFields {
		raw := bytes.TrimSpace(u[f])
		if !isNumber(raw) {
			return false, true
		}
		if exponentTooLong.Match(raw) {
			return false, false
		}
		r, ok := new(big.Rat).SetString(string(raw))
		if !ok {
			return false, false
		}
		if !r.IsInt() || r.Cmp(minI) < 0 || r.Cmp(maxI) > 0 || r.Sign() < 0 {
			return false, true // a token count is a non-negative integer
		}
	}
	if raw, present := u["cost_usd"]; present {
		raw = bytes.TrimSpace(raw)
		if !isNumber(raw) {
			return false, true
		}
		if raw[0] == '-' {
			r, ok := new(big.Rat).SetString(string(raw))
			if exponentTooLong.Match(raw) || !ok {
				return false, false
			}
			if r.Sign() < 0 {
				return false, true
			}
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if math.IsInf(v, 0) {
			return false, true // beyond float64: not finite
		}
		if err != nil {
			return false, false // underflow: the seed does not say
		}
	}
	return true, true
}
