package asl

import (
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"
)

// Parse decodes and checks a definition (ASL JSON, JSONPath query
// language) against the subset the embedded executor runs. Everything
// outside it — Map, Parallel, JSONata, variables, *Path variants of
// timeouts, unknown fields, transitions to missing states, a Task with
// neither Next nor End, a Wait with not exactly one of its four fields,
// unreachable states, ... — is reported, all of it,
// as a *DefinitionError whose lines read
//
//	state "X": field "Y": what is supported
func Parse(def []byte) (*StateMachine, error) {
	v, err := Decode(def)
	if err != nil {
		return nil, &DefinitionError{Problems: []Problem{{Message: "the definition is not JSON: " + err.Error()}}}
	}
	c := &checker{}
	sm := c.machine(v)
	if len(c.problems) > 0 {
		return nil, &DefinitionError{Problems: c.problems}
	}
	return sm, nil
}

type checker struct {
	problems []Problem
	refs     []ref // transitions, checked once every state is known
	// partial is set when a state could not be compiled: its transitions
	// are unknown, so reachability is not judged.
	partial bool
}

type ref struct {
	state, field, target string
}

func (c *checker) add(state, field, format string, args ...any) {
	c.problems = append(c.problems, Problem{State: state, Field: field, Message: fmt.Sprintf(format, args...)})
}

var topFields = []string{"Comment", "StartAt", "States", "TimeoutSeconds", "Version", "QueryLanguage"}

func (c *checker) machine(v Value) *StateMachine {
	root, ok := v.(*Object)
	if !ok {
		c.add("", "", "the definition must be a JSON object, got %s", describe(v))
		return nil
	}
	sm := &StateMachine{States: map[string]*State{}}
	var statesObj *Object
	for _, m := range root.Members() {
		switch m.Key {
		case "Comment":
			sm.Comment = c.str("", m.Key, m.Value)
		case "StartAt":
			sm.StartAt = c.str("", m.Key, m.Value)
		case "Version":
			sm.Version = c.str("", m.Key, m.Value)
		case "TimeoutSeconds":
			sm.TimeoutSeconds = c.integer("", m.Key, m.Value, 1, maxTimeoutSeconds)
		case "QueryLanguage":
			c.queryLanguage("", m.Value)
		case "States":
			if statesObj, ok = m.Value.(*Object); !ok || statesObj.Len() == 0 {
				c.add("", "States", "must be a non-empty JSON object of states, got %s", describe(m.Value))
				statesObj = nil
			}
		default:
			c.add("", m.Key, "%s", unknownField(m.Key, "the top level", topFields))
		}
	}
	if _, ok := root.Get("StartAt"); !ok {
		c.add("", "StartAt", "required: the name of the first state")
	}
	if _, ok := root.Get("States"); !ok {
		c.add("", "States", "required: a JSON object of states")
	}
	for _, m := range statesObj.Members() {
		sm.Names = append(sm.Names, m.Key)
		if st := c.state(m.Key, m.Value); st != nil {
			sm.States[m.Key] = st
		} else {
			c.partial = true
		}
	}
	if statesObj == nil {
		return sm
	}
	names := map[string]bool{}
	for _, n := range sm.Names {
		names[n] = true
	}
	if sm.StartAt != "" && !names[sm.StartAt] {
		c.add("", "StartAt", "no state named %q in States", sm.StartAt)
	}
	for _, r := range c.refs {
		if !names[r.target] {
			c.add(r.state, r.field, "no state named %q in States", r.target)
		}
	}
	c.reachability(sm, names)
	return sm
}

// reachability reports states no transition leads to, as AWS does, and a
// machine that cannot end.
func (c *checker) reachability(sm *StateMachine, names map[string]bool) {
	if !names[sm.StartAt] || c.partial {
		return
	}
	next := map[string][]string{}
	for _, r := range c.refs {
		next[r.state] = append(next[r.state], r.target)
	}
	seen := map[string]bool{sm.StartAt: true}
	queue := []string{sm.StartAt}
	terminal := false
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if st := sm.States[n]; st != nil && (st.End || st.Type == TypeSucceed || st.Type == TypeFail) {
			terminal = true
		}
		for _, t := range next[n] {
			if names[t] && !seen[t] {
				seen[t] = true
				queue = append(queue, t)
			}
		}
	}
	for _, n := range sm.Names {
		if !seen[n] {
			c.add(n, "", "not reachable from StartAt %q; remove the state or add a transition to it", sm.StartAt)
		}
	}
	if !terminal && len(c.problems) == 0 {
		c.add("", "States", "no reachable state ends the execution (End: true, Succeed or Fail)")
	}
}

var stateFields = map[StateType][]string{
	TypePass:    {"Type", "Comment", "QueryLanguage", "InputPath", "OutputPath", "ResultPath", "Parameters", "Result", "Next", "End"},
	TypeTask:    {"Type", "Comment", "QueryLanguage", "Resource", "InputPath", "OutputPath", "ResultPath", "Parameters", "ResultSelector", "TimeoutSeconds", "HeartbeatSeconds", "Retry", "Catch", "Next", "End"},
	TypeChoice:  {"Type", "Comment", "QueryLanguage", "Choices", "Default", "InputPath", "OutputPath"},
	TypeWait:    {"Type", "Comment", "QueryLanguage", "InputPath", "OutputPath", "Seconds", "Timestamp", "SecondsPath", "TimestampPath", "Next", "End"},
	TypeSucceed: {"Type", "Comment", "QueryLanguage", "InputPath", "OutputPath"},
	TypeFail:    {"Type", "Comment", "QueryLanguage", "Error", "Cause"},
}

const supportedTypes = "Pass, Task, Choice, Wait, Succeed, Fail"

func (c *checker) state(name string, v Value) *State {
	if len(name) == 0 || len([]rune(name)) > maxStateNameLength {
		c.add(name, "", "a state name must be 1 to %d characters long", maxStateNameLength)
	}
	obj, ok := v.(*Object)
	if !ok {
		c.add(name, "", "a state must be a JSON object, got %s", describe(v))
		return nil
	}
	tv, ok := obj.Get("Type")
	if !ok {
		c.add(name, "Type", "required; supported: %s", supportedTypes)
		return nil
	}
	ts, _ := tv.(string)
	st := &State{Name: name, Type: StateType(ts)}
	allowed, ok := stateFields[st.Type]
	if !ok {
		c.add(name, "Type", "%s is not supported by the embedded executor; supported: %s", EncodeString(tv), supportedTypes)
		return nil
	}
	st.InputPath, st.OutputPath, st.ResultPath = RootPath, RootPath, RootPath
	hasNext, hasEnd := false, false
	for _, m := range obj.Members() {
		f, val := m.Key, m.Value
		if !contains(allowed, f) {
			c.add(name, f, "%s", unknownField(f, "a "+ts+" state", allowed))
			continue
		}
		switch f {
		case "Type":
		case "Comment":
			st.Comment = c.str(name, f, val)
		case "QueryLanguage":
			c.queryLanguage(name, val)
		case "InputPath":
			st.InputPath = c.path(name, f, val, false)
		case "OutputPath":
			st.OutputPath = c.path(name, f, val, false)
		case "ResultPath":
			st.ResultPath = c.path(name, f, val, false)
		case "Parameters":
			st.Parameters = compileTemplate(val, f, func(field, msg string) { c.add(name, field, "%s", msg) })
		case "ResultSelector":
			st.ResultSelector = compileTemplate(val, f, func(field, msg string) { c.add(name, field, "%s", msg) })
		case "Result":
			st.Result, st.HasResult = val, true
		case "Next":
			hasNext = true
			st.Next = c.str(name, f, val)
			if st.Next != "" {
				c.refs = append(c.refs, ref{name, f, st.Next})
			}
		case "End":
			hasEnd = true
			b, ok := val.(bool)
			if !ok || !b {
				c.add(name, f, "must be true when present (use Next to continue), got %s", EncodeString(val))
			}
			st.End = b
		case "Resource":
			c.resource(st, val)
		case "TimeoutSeconds":
			st.TimeoutSeconds = c.integer(name, f, val, 1, maxTimeoutSeconds)
		case "HeartbeatSeconds":
			st.HeartbeatSeconds = c.integer(name, f, val, 1, maxTimeoutSeconds)
		case "Retry":
			st.Retry = c.retry(name, val)
		case "Catch":
			st.Catch = c.catch(name, val)
		case "Choices":
			arr, ok := val.([]Value)
			if !ok || len(arr) == 0 {
				c.add(name, f, "must be a non-empty array of Choice Rules, got %s", describe(val))
				continue
			}
			for i, rv := range arr {
				if r := c.rule(name, fmt.Sprintf("Choices[%d]", i), rv, true); r != nil {
					st.Choices = append(st.Choices, r)
				}
			}
		case "Default":
			st.Default = c.str(name, f, val)
			if st.Default != "" {
				c.refs = append(c.refs, ref{name, f, st.Default})
			}
		case "Seconds":
			st.Seconds, st.HasSeconds = c.integer(name, f, val, 0, maxWaitSeconds), true
		case "Timestamp":
			s := c.str(name, f, val)
			if t, ok := ParseTimestamp(s); ok {
				st.Timestamp = t
			} else if _, isString := val.(string); isString {
				c.add(name, f, "%q is not a timestamp; valid: RFC 3339 with an uppercase T and Z (or a numeric offset), e.g. \"2024-08-18T17:33:00Z\"", s)
			}
		case "SecondsPath", "TimestampPath":
			p := c.path(name, f, val, false)
			if p == nil {
				c.add(name, f, "must be a path string, got null")
				p = RootPath
			}
			if f == "SecondsPath" {
				st.SecondsPath = p
			} else {
				st.TimestampPath = p
			}
		case "Error":
			st.Error = c.str(name, f, val)
		case "Cause":
			st.Cause = c.str(name, f, val)
		}
	}
	switch st.Type {
	case TypePass, TypeTask, TypeWait:
		if hasNext == hasEnd {
			c.add(name, "Next", "a %s state needs exactly one of \"Next\" (a state name) or \"End\": true", ts)
		}
	case TypeChoice:
		if _, ok := obj.Get("Choices"); !ok {
			c.add(name, "Choices", "required: a non-empty array of Choice Rules")
		}
	}
	if st.Type == TypeWait {
		var set []string
		for _, f := range []string{"Seconds", "Timestamp", "SecondsPath", "TimestampPath"} {
			if _, ok := obj.Get(f); ok {
				set = append(set, f)
			}
		}
		if len(set) != 1 {
			field := "Seconds"
			if len(set) > 1 {
				field = set[1]
			}
			c.add(name, field, "a Wait state needs exactly one of Seconds, Timestamp, SecondsPath or TimestampPath; it has %d%s", len(set), listed(set))
		}
	}
	if st.Type == TypeTask {
		if _, ok := obj.Get("Resource"); !ok {
			c.add(name, "Resource", "required: the ARN of the task's resource")
		}
		if st.HeartbeatSeconds > 0 && st.TimeoutSeconds > 0 && st.HeartbeatSeconds >= st.TimeoutSeconds {
			c.add(name, "HeartbeatSeconds", "must be smaller than TimeoutSeconds (%d), got %d", st.TimeoutSeconds, st.HeartbeatSeconds)
		}
	}
	return st
}

// unknownFieldHints explain fields that exist in ASL but not in the subset.
var unknownFieldHints = map[string]string{
	"TimeoutSecondsPath":   "not supported; use TimeoutSeconds",
	"HeartbeatSecondsPath": "not supported; use HeartbeatSeconds",
	"Arguments":            "is JSONata; only the JSONPath query language is supported (use Parameters)",
	"Output":               "is JSONata; only the JSONPath query language is supported (use OutputPath)",
	"Condition":            "is JSONata; only the JSONPath query language is supported (use Variable and an operator)",
	"Assign":               "variables are not supported",
	"Credentials":          "not supported",
	"ErrorPath":            "not supported; use Error",
	"CausePath":            "not supported; use Cause",
}

func unknownField(field, where string, allowed []string) string {
	if h, ok := unknownFieldHints[field]; ok {
		return h
	}
	return fmt.Sprintf("not supported in %s; supported fields: %s", where, strings.Join(allowed, ", "))
}

// listed renders names as " (A, B)", or "" for none.
func listed(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " (" + strings.Join(names, ", ") + ")"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) queryLanguage(state string, v Value) {
	if s, _ := v.(string); s != "JSONPath" {
		c.add(state, "QueryLanguage", "%s is not supported; only \"JSONPath\"", EncodeString(v))
	}
}

func (c *checker) str(state, field string, v Value) string {
	s, ok := v.(string)
	if !ok {
		c.add(state, field, "must be a string, got %s", describe(v))
	}
	return s
}

// integer checks that v is a JSON integer within [min, max].
func (c *checker) integer(state, field string, v Value, min, max int) int {
	n, ok := v.(json.Number)
	if ok {
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			if r, rok := toRat(n); rok && r.IsInt() && r.Num().IsInt64() {
				i, err = r.Num().Int64(), nil
			}
		}
		if err == nil && i >= int64(min) && i <= int64(max) {
			return int(i)
		}
	}
	c.add(state, field, "must be an integer from %d to %d, got %s", min, max, EncodeString(v))
	return 0
}

// path parses a path field; null is allowed and returns nil.
func (c *checker) path(state, field string, v Value, allowContext bool) *Path {
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		c.add(state, field, "must be a path string or null, got %s", describe(v))
		return RootPath
	}
	p, err := ParsePath(s)
	if err != nil {
		c.add(state, field, "%v", err)
		return RootPath
	}
	if p.IsContext() && !allowContext {
		c.add(state, field, "path %q: the context object ($$) is not supported here; use a path from $", s)
		return RootPath
	}
	return p
}

func (c *checker) resource(st *State, v Value) {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "arn:") {
		c.add(st.Name, "Resource", "must be an ARN such as \"arn:aws:states:::sqs:sendMessage.waitForTaskToken\", got %s", EncodeString(v))
		return
	}
	st.Resource, st.ResourceBase = s, s
	switch {
	case strings.HasSuffix(s, ".waitForTaskToken"):
		st.Pattern, st.ResourceBase = WaitForTaskToken, strings.TrimSuffix(s, ".waitForTaskToken")
	case strings.HasSuffix(s, ".sync"):
		st.Pattern, st.ResourceBase = Sync, strings.TrimSuffix(s, ".sync")
	case strings.HasSuffix(s, ".sync:2"):
		st.Pattern, st.ResourceBase = Sync, strings.TrimSuffix(s, ".sync:2")
	}
}

func (c *checker) errorEquals(state, field string, v Value, last bool) []string {
	arr, ok := v.([]Value)
	if !ok || len(arr) == 0 {
		c.add(state, field, "must be a non-empty array of error names, got %s", describe(v))
		return nil
	}
	var names []string
	for i, e := range arr {
		s, ok := e.(string)
		if !ok || s == "" {
			c.add(state, fmt.Sprintf("%s[%d]", field, i), "must be a non-empty error name, got %s", EncodeString(e))
			continue
		}
		if strings.HasPrefix(s, "States.") && !contains(knownStatesErrors, s) {
			c.add(state, fmt.Sprintf("%s[%d]", field, i), "%q is not a predefined error name; names starting with \"States.\" are reserved: %s", s, strings.Join(knownStatesErrors, ", "))
		}
		names = append(names, s)
	}
	if contains(names, ErrAll) {
		if len(names) > 1 {
			c.add(state, field, "States.ALL must appear alone in ErrorEquals")
		}
		if !last {
			c.add(state, field, "States.ALL must appear in the last element of the array")
		}
	}
	return names
}

var retrierFields = []string{"ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "JitterStrategy", "Comment"}

func (c *checker) retry(state string, v Value) []Retrier {
	arr, ok := v.([]Value)
	if !ok {
		c.add(state, "Retry", "must be an array of Retriers, got %s", describe(v))
		return nil
	}
	out := make([]Retrier, 0, len(arr))
	for i, rv := range arr {
		field := fmt.Sprintf("Retry[%d]", i)
		obj, ok := rv.(*Object)
		if !ok {
			c.add(state, field, "must be a Retrier object, got %s", describe(rv))
			continue
		}
		r := Retrier{IntervalSeconds: 1, MaxAttempts: 3, BackoffRate: 2.0, JitterStrategy: "NONE"}
		for _, m := range obj.Members() {
			sub := field + "." + m.Key
			switch m.Key {
			case "ErrorEquals":
				r.ErrorEquals = c.errorEquals(state, sub, m.Value, i == len(arr)-1)
			case "IntervalSeconds":
				r.IntervalSeconds = c.integer(state, sub, m.Value, 1, maxIntervalSeconds)
			case "MaxAttempts":
				r.MaxAttempts = c.integer(state, sub, m.Value, 0, maxMaxAttempts)
			case "MaxDelaySeconds":
				r.MaxDelaySeconds = c.integer(state, sub, m.Value, 1, maxMaxDelaySeconds)
			case "BackoffRate":
				n, ok := m.Value.(json.Number)
				f, err := strconv.ParseFloat(string(n), 64)
				if !ok || err != nil || f < 1.0 {
					c.add(state, sub, "must be a number greater than or equal to 1.0, got %s", EncodeString(m.Value))
					continue
				}
				r.BackoffRate = f
			case "JitterStrategy":
				if s, _ := m.Value.(string); s != "FULL" && s != "NONE" {
					c.add(state, sub, "must be \"FULL\" or \"NONE\", got %s", EncodeString(m.Value))
					continue
				}
				r.JitterStrategy = m.Value.(string)
			case "Comment":
				c.str(state, sub, m.Value)
			default:
				c.add(state, sub, "%s", unknownField(m.Key, "a Retrier", retrierFields))
			}
		}
		if _, ok := obj.Get("ErrorEquals"); !ok {
			c.add(state, field+".ErrorEquals", "required: a non-empty array of error names")
		}
		out = append(out, r)
	}
	return out
}

var catcherFields = []string{"ErrorEquals", "Next", "ResultPath", "Comment"}

func (c *checker) catch(state string, v Value) []Catcher {
	arr, ok := v.([]Value)
	if !ok {
		c.add(state, "Catch", "must be an array of Catchers, got %s", describe(v))
		return nil
	}
	out := make([]Catcher, 0, len(arr))
	for i, cv := range arr {
		field := fmt.Sprintf("Catch[%d]", i)
		obj, ok := cv.(*Object)
		if !ok {
			c.add(state, field, "must be a Catcher object, got %s", describe(cv))
			continue
		}
		k := Catcher{ResultPath: RootPath}
		for _, m := range obj.Members() {
			sub := field + "." + m.Key
			switch m.Key {
			case "ErrorEquals":
				k.ErrorEquals = c.errorEquals(state, sub, m.Value, i == len(arr)-1)
			case "Next":
				k.Next = c.str(state, sub, m.Value)
				if k.Next != "" {
					c.refs = append(c.refs, ref{state, sub, k.Next})
				}
			case "ResultPath":
				k.ResultPath = c.path(state, sub, m.Value, false)
			case "Comment":
				c.str(state, sub, m.Value)
			default:
				c.add(state, sub, "%s", unknownField(m.Key, "a Catcher", catcherFields))
			}
		}
		if _, ok := obj.Get("ErrorEquals"); !ok {
			c.add(state, field+".ErrorEquals", "required: a non-empty array of error names")
		}
		if _, ok := obj.Get("Next"); !ok {
			c.add(state, field+".Next", "required: the state to go to when the catcher matches")
		}
		out = append(out, k)
	}
	return out
}

// rule compiles one Choice Rule; top says whether it is an element of
// Choices (which must carry Next) or nested in And/Or/Not (which must not).
func (c *checker) rule(state, field string, v Value, top bool) *ChoiceRule {
	obj, ok := v.(*Object)
	if !ok {
		c.add(state, field, "must be a Choice Rule object, got %s", describe(v))
		return nil
	}
	r := &ChoiceRule{}
	var ops []string
	hasVariable := false
	for _, m := range obj.Members() {
		sub := field + "." + m.Key
		switch m.Key {
		case "Next":
			if !top {
				c.add(state, sub, "only a top-level Choice Rule has Next; nested rules inside And, Or and Not do not")
				continue
			}
			r.Next = c.str(state, sub, m.Value)
			if r.Next != "" {
				c.refs = append(c.refs, ref{state, sub, r.Next})
			}
		case "Comment":
			c.str(state, sub, m.Value)
		case "Variable":
			hasVariable = true
			r.variable = c.path(state, sub, m.Value, true)
			if r.variable == nil {
				c.add(state, sub, "must be a path, got null")
				r.variable = RootPath
			} else if err := checkContextPath(r.variable); err != nil {
				c.add(state, sub, "%v", err)
			}
		case "And", "Or":
			ops = append(ops, m.Key)
			arr, ok := m.Value.([]Value)
			if !ok || len(arr) == 0 {
				c.add(state, sub, "must be a non-empty array of Choice Rules, got %s", describe(m.Value))
				continue
			}
			subs := make([]*ChoiceRule, 0, len(arr))
			for i, e := range arr {
				if sr := c.rule(state, fmt.Sprintf("%s[%d]", sub, i), e, false); sr != nil {
					subs = append(subs, sr)
				}
			}
			if m.Key == "And" {
				r.and = subs
			} else {
				r.or = subs
			}
		case "Not":
			ops = append(ops, m.Key)
			r.not = c.rule(state, sub, m.Value, false)
		default:
			op, ok := choiceOps[m.Key]
			if !ok {
				msg := "unknown Choice Rule field; supported operators: " + supportedChoiceOps
				if strings.HasPrefix(m.Key, "Timestamp") || m.Key == "IsTimestamp" {
					msg = "timestamp comparisons are not supported; supported operators: " + supportedChoiceOps
				}
				c.add(state, sub, "%s", msg)
				continue
			}
			ops = append(ops, m.Key)
			r.op, r.kind, r.cmp = m.Key, op.kind, op.cmp
			c.operand(state, sub, r, op, m.Value)
		}
	}
	if top && r.Next == "" {
		if _, ok := obj.Get("Next"); !ok {
			c.add(state, field+".Next", "required in a top-level Choice Rule")
		}
	}
	switch {
	case len(ops) == 0:
		c.add(state, field, "needs one comparison operator (with Variable) or And, Or, Not; supported: %s", supportedChoiceOps)
	case len(ops) > 1:
		sort.Strings(ops)
		c.add(state, field, "has %d operators (%s); a Choice Rule has exactly one", len(ops), strings.Join(ops, ", "))
	case r.op != "" && !hasVariable:
		c.add(state, field+".Variable", "required with %s", r.op)
	case r.op == "" && hasVariable:
		c.add(state, field+".Variable", "not allowed with %s", ops[0])
	}
	if r.variable == nil {
		r.variable = RootPath
	}
	return r
}

func (c *checker) operand(state, field string, r *ChoiceRule, op choiceOp, v Value) {
	if op.path {
		s, ok := v.(string)
		if !ok {
			c.add(state, field, "must be a path string, got %s", describe(v))
			return
		}
		p, err := ParsePath(s)
		if err == nil {
			err = checkContextPath(p)
		}
		if err != nil {
			c.add(state, field, "%v", err)
			return
		}
		r.operandPath = p
		return
	}
	var ok bool
	switch op.kind {
	case opString:
		_, ok = v.(string)
	case opNumeric:
		var n json.Number
		if n, ok = v.(json.Number); ok {
			_, ok = new(big.Rat).SetString(string(n))
		}
	case opBoolean, opType:
		_, ok = v.(bool)
	}
	if !ok {
		want := map[opKind]string{opString: "a string", opNumeric: "a number", opBoolean: "a boolean", opType: "a boolean"}[op.kind]
		c.add(state, field, "must be %s, got %s", want, EncodeString(v))
		return
	}
	r.operand = v
}
