package lifecycle

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/stratusflow/stratus/internal/compiler"
	"github.com/stratusflow/stratus/internal/executor"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

// stateData is what the compiled machine keeps in its state data that the
// reading of a run's end needs (internal/compiler: $.last, $.human,
// $.loops, $.error).
type stateData struct {
	Last *struct {
		StepRef string `json:"step_ref"`
		Outcome string `json:"outcome"`
	} `json:"last"`
	Human *struct {
		StepRef string `json:"step_ref"`
		Outcome string `json:"outcome"`
	} `json:"human"`
	Loops map[string]int `json:"loops"`
	Error *struct {
		Error string `json:"Error"`
		Cause string `json:"Cause"`
	} `json:"error"`
}

// definition is the part of a compiled definition readStop reads: each
// state's type and, for a Choice, its rules.
type definition struct {
	States map[string]struct {
		Type    string `json:"Type"`
		Choices []struct {
			Variable                 string `json:"Variable"`
			NumericGreaterThanEquals *int   `json:"NumericGreaterThanEquals"`
			Next                     string `json:"Next"`
		} `json:"Choices"`
	} `json:"States"`
}

// ReadStop reads how an execution reached a Fail terminal from its history
// and its definition: the state whose exit led to the terminal is a budget
// Choice ("<loop>.budget", internal/compiler: a spent loop parks the run),
// a route Choice ("<node>.route", "<node>.hitl.route": no edge takes the
// outcome, fail closed), or a Task whose Catch caught an error. errName and
// cause are the execution's. It returns nil when the history holds no Fail
// state (a done, aborted or timed-out execution).
func ReadStop(hist []executor.HistoryEvent, def []byte, fl *flow.Flow, errName, cause string) *report.Stop {
	fail := -1
	for i := len(hist) - 1; i >= 0; i-- {
		if hist[i].Type == executor.EventFailStateEntered {
			fail = i
			break
		}
	}
	if fail < 0 {
		if errName == "" {
			return nil
		}
		return &report.Stop{Error: errName, Cause: cause}
	}
	s := &report.Stop{Error: errName, Cause: cause}
	var data stateData
	json.Unmarshal(hist[fail].Input, &data)
	if data.Error != nil && data.Error.Error != "" {
		s.Error, s.Cause = data.Error.Error, data.Error.Cause
	}
	from := ""
	for i := fail - 1; i >= 0; i-- {
		if hist[i].IsStateExited() {
			from = hist[i].State
			break
		}
	}
	var d definition
	if from == "" || json.Unmarshal(def, &d) != nil {
		return s
	}
	st, ok := d.States[from]
	if !ok || st.Type != "Choice" {
		return s // a Task's Catch: the error says why
	}
	outcome := func(human bool) {
		switch {
		case human && data.Human != nil:
			s.StepRef, s.Outcome = data.Human.StepRef, data.Human.Outcome
		case data.Last != nil:
			s.StepRef, s.Outcome = data.Last.StepRef, data.Last.Outcome
		}
	}
	for _, r := range st.Choices {
		counter, ok := strings.CutPrefix(r.Variable, "$.loops.")
		if !ok || r.NumericGreaterThanEquals == nil || r.Next != hist[fail].State {
			continue
		}
		if data.Loops[counter] >= *r.NumericGreaterThanEquals {
			s.Budget, s.Limit = budgetName(fl, counter), *r.NumericGreaterThanEquals
			outcome(strings.HasPrefix(s.Budget, "the hitl rounds"))
			return s
		}
	}
	if node, ok := strings.CutSuffix(from, ".route"); ok {
		hitl := strings.HasSuffix(node, compiler.HITLSuffix)
		outcome(hitl)
		s.Node = node
	}
	return s
}

// budgetName names the budget behind a $.loops counter the way the flow
// writes it, by the rules that name the counters (flow.CounterName,
// flow.EdgeCounter, flow.HITLCounter, flow.GlobalBudgetName).
func budgetName(fl *flow.Flow, counter string) string {
	if fl == nil {
		return fmt.Sprintf("budget %q", counter)
	}
	if g := flow.GlobalBudgetName(fl); g != "" && flow.CounterName(g) == counter {
		return fmt.Sprintf("the global backstop %q", g)
	}
	for _, e := range fl.Edges {
		if c, source := flow.EdgeCounter(e); c == counter {
			return source
		}
	}
	for i := range fl.Nodes {
		if n := &fl.Nodes[i]; flow.AsksHuman(n) && flow.HITLCounter(n.ID) == counter {
			return fmt.Sprintf("the hitl rounds of node %q", n.ID)
		}
	}
	return fmt.Sprintf("budget %q", counter)
}

// SpentBudgets is what a run spent of each loop budget, from its
// execution's history: for every $.loops counter (internal/compiler: one
// per loop, inline budget, agent hitl grant and the global backstop), the
// sum of the charges its counting states made. It reads every terminal —
// a Fail state has no output, so $.loops of the last output would be known
// only for a done run — and counts across a decomposition's subtasks,
// whose per-subtask reset zeroes a counter but takes nothing back. nil
// when the history holds no $.loops.
func SpentBudgets(hist []executor.HistoryEvent) map[string]int {
	var spent, prev map[string]int
	for _, ev := range hist {
		raw := ev.Output
		if ev.IsStateEntered() {
			raw = ev.Input
		}
		if len(raw) == 0 {
			continue
		}
		var data struct {
			Loops map[string]int `json:"loops"`
		}
		if json.Unmarshal(raw, &data) != nil || data.Loops == nil {
			continue
		}
		if spent == nil {
			spent = map[string]int{}
		}
		for k, v := range data.Loops {
			if _, ok := spent[k]; !ok {
				spent[k] = 0
			}
			if d := v - prev[k]; d > 0 {
				spent[k] += d
			}
		}
		prev = maps.Clone(data.Loops)
	}
	return spent
}
