package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus/internal/inputfile"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/workerclient"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// Scenario is the script engine's answer book: per node id, one Answer per
// visit (the last one repeats for later visits); Default answers any node
// not listed.
//
//	nodes:
//	  review:
//	    - report: {findings: [{severity: high, path: a.go, what: x, fix: y}]}
//	    - report: {findings: []}
//	default:
//	  report: done
type Scenario struct {
	Nodes   map[string][]Answer `yaml:"nodes"`
	Default *Answer             `yaml:"default"`
}

// Answer is what the engine does for one visit.
type Answer struct {
	Report           any               `yaml:"report"`            // string → the text; anything else → JSON
	Parts            map[string]string `yaml:"parts"`             // staged via POST /v1/worker/artifact before the report
	Steps            int               `yaml:"steps"`             // agent_step events 1..Steps (default 1)
	PromptTokens     int64             `yaml:"prompt_tokens"`     // one usage event (default 100)
	CompletionTokens int64             `yaml:"completion_tokens"` // (default 20)
	CostUSD          *float64          `yaml:"cost_usd"`          // reported with the usage; absent: unknown
	SleepMS          int               `yaml:"sleep_ms"`          // before answering
	Fail             string            `yaml:"fail"`              // emit turn_failed with this error and no report
	NoReport         bool              `yaml:"no_report"`         // exit cleanly without a report
	// Files are written before the report, each path relative to the
	// engine's working directory (the change a coding agent makes).
	Files map[string]string `yaml:"files"`
}

// LoadScenario reads a scenario file strictly: a regular file
// (inputfile.ReadFile: EINVALID otherwise).
func LoadScenario(path string) (*Scenario, error) {
	data, err := inputfile.ReadFile("scenario file", path)
	if err != nil {
		return nil, err
	}
	var s Scenario
	if err := yamlast.Check(data, yamlast.DefaultLimits); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := yaml.UnmarshalWithOptions(data, &s, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("%s: %s", path, yaml.FormatError(err, false, true))
	}
	check := func(where string, a Answer) error {
		if a.Steps < 0 || a.SleepMS < 0 || a.PromptTokens < 0 || a.CompletionTokens < 0 || (a.CostUSD != nil && *a.CostUSD < 0) {
			return fmt.Errorf("%s: %s: steps, sleep_ms, prompt_tokens, completion_tokens and cost_usd must not be negative", path, where)
		}
		for f := range a.Files {
			if !filepath.IsLocal(filepath.FromSlash(f)) {
				return fmt.Errorf("%s: %s: files: %q is not a relative path inside the working directory", path, where, f)
			}
		}
		return nil
	}
	for node, list := range s.Nodes {
		for i, a := range list {
			if err := check(fmt.Sprintf("nodes.%s[%d]", node, i), a); err != nil {
				return nil, err
			}
		}
	}
	if s.Default != nil {
		if err := check("default", *s.Default); err != nil {
			return nil, err
		}
	}
	return &s, nil
}

// Supervisor turns reach the engine as these nodes (docs/script-engine.md
// § Supervisor turns).
const (
	SupervisorObserve  = "supervisor.observe"
	SupervisorFinalize = "supervisor.finalize"
)

// supervisorAnswers answer a supervisor turn the scenario has neither an
// entry nor a default for: the layer is advisory and on by default, so a
// scenario written for a flow's nodes alone must not turn its turns into
// failed steps of a run that ends done (docs/script-engine.md § Supervisor
// turns). The finalize prose is over the layer's 120-character floor, so
// it is written as summary.md, and it says where it comes from.
var supervisorAnswers = map[string]Answer{
	SupervisorObserve: {Report: "No note: the script engine's scenario has no supervisor.observe answer."},
	SupervisorFinalize: {Report: "This summary was written by the script engine, whose scenario has no supervisor.finalize answer. " +
		"The sections below are the facts the run recorded."},
}

// Pick returns the answer for a node's visit (1-based): the node's own
// entries, else the scenario's default, else, for a supervisor turn, a
// built-in answer (supervisorAnswers).
func (s *Scenario) Pick(node string, visit int) (Answer, bool) {
	list := s.Nodes[node]
	if len(list) == 0 {
		if s.Default != nil {
			return *s.Default, true
		}
		if a, ok := supervisorAnswers[node]; ok {
			return a, true
		}
		return Answer{}, false
	}
	if visit < 1 {
		visit = 1
	}
	if visit > len(list) {
		visit = len(list)
	}
	return list[visit-1], true
}

// Script runs the script engine: it reads the request, takes `node` and
// `visit` from the input (the input Stratus's runner sends), and answers from
// the scenario (docs/script-engine.md). Parts are staged with the
// credentials the runner exports (STRATUS_API_URL, STRATUS_HANDLE). During
// an answer's sleep_ms, stdin EOF (the runner's cancel) ends the engine
// without a report.
func Script(ctx context.Context, s *Scenario, stdin io.Reader, stdout io.Writer) error {
	em := Emitter{W: stdout}
	env, err := ReadRequest(stdin)
	if err != nil {
		em.CommandError(err.Error())
		return nil
	}
	var in struct {
		Node  string `json:"node"`
		Visit int    `json:"visit"`
	}
	json.Unmarshal(env.Input, &in)
	a, ok := s.Pick(in.Node, in.Visit)
	if !ok {
		em.CommandError(fmt.Sprintf("scenario has no answer for node %q and no default", in.Node))
		return nil
	}
	if a.SleepMS > 0 {
		// stdin EOF is the runner's cancel (docs/child-contract.md §
		// Input): it cuts the sleep short, and the engine ends without a
		// report, as a cancelled engine does.
		eof := make(chan struct{})
		go func() {
			io.Copy(io.Discard, stdin)
			close(eof)
		}()
		select {
		case <-time.After(time.Duration(a.SleepMS) * time.Millisecond):
		case <-ctx.Done():
			return nil
		case <-eof:
			return nil
		}
	}
	steps := a.Steps
	if steps == 0 {
		steps = 1
	}
	for i := 1; i <= steps; i++ {
		em.Step(i)
	}
	pt, ct := a.PromptTokens, a.CompletionTokens
	if pt == 0 && ct == 0 {
		pt, ct = 100, 20
	}
	em.UsageCost(pt, ct, a.CostUSD)
	for _, f := range slices.Sorted(maps.Keys(a.Files)) {
		p := filepath.FromSlash(f)
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		if err == nil {
			err = os.WriteFile(p, []byte(a.Files[f]), 0o644)
		}
		if err != nil {
			em.TurnFailed(fmt.Sprintf("write %s: %v", f, err))
			return nil
		}
	}
	if a.Fail != "" {
		em.TurnFailed(a.Fail)
		return nil
	}
	if len(a.Parts) > 0 {
		if os.Getenv(launch.EnvAPIURL) == "" || os.Getenv(launch.EnvHandle) == "" {
			em.CommandError(fmt.Sprintf("this answer stages parts, which needs %s and %s (set by the runner)", launch.EnvAPIURL, launch.EnvHandle))
			return nil
		}
		c := &workerclient.Client{BaseURL: os.Getenv(launch.EnvAPIURL), Credential: os.Getenv(launch.EnvHandle)}
		names := make([]string, 0, len(a.Parts))
		for n := range a.Parts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if err := c.Artifact(ctx, n, []byte(a.Parts[n])); err != nil {
				em.CommandError(fmt.Sprintf("stage part %q: %v", n, err))
				return nil
			}
		}
	}
	if a.NoReport {
		return nil
	}
	report, err := json.Marshal(a.Report)
	if err != nil {
		em.CommandError(fmt.Sprintf("report: %v", err))
		return nil
	}
	em.Report(report)
	return nil
}
