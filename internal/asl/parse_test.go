package asl

import (
	"strings"
	"testing"
)

// reviewLoop is shaped like what the compiler emits for an evaluator node
// with a bounded rework loop.
const reviewLoop = `{"StartAt":"init","States":{
 "init":{"Type":"Pass","Result":{"review_fix":0},"ResultPath":"$.loops","Next":"review"},
 "review":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage.waitForTaskToken","Parameters":{"QueueUrl":"${DispatchQueueUrl}","MessageBody":{"run_id.$":"$.run_id","node":"review","kind":"evaluator","task_token.$":"$$.Task.Token"}},"ResultPath":"$.last","TimeoutSeconds":900,"HeartbeatSeconds":300,"Catch":[{"ErrorEquals":["States.ALL"],"ResultPath":"$.error","Next":"failed"}],"Next":"review.route"},
 "review.route":{"Type":"Choice","Choices":[{"Variable":"$.last.outcome","StringEquals":"accept","Next":"done"},{"Variable":"$.last.outcome","StringEquals":"rework","Next":"review_fix.budget"}],"Default":"manual_action_required"},
 "review_fix.budget":{"Type":"Choice","Choices":[{"Variable":"$.loops.review_fix","NumericGreaterThanEquals":2,"Next":"manual_action_required"}],"Default":"review_fix.count"},
 "review_fix.count":{"Type":"Pass","Parameters":{"review_fix.$":"States.MathAdd($.loops.review_fix, 1)"},"ResultPath":"$.loops","Next":"review"},
 "done":{"Type":"Succeed"},
 "failed":{"Type":"Fail","Error":"stratus.Failed","Cause":"a step failed"},
 "manual_action_required":{"Type":"Fail","Error":"stratus.ManualActionRequired","Cause":"a budget ran out or a gate could not decide"}}}`

// The state machine the compiler emits parses into the model the
// executor runs (ASL spec § States; § Task State; § Choice State).
func TestParse_CompilerShape(t *testing.T) {
	t.Parallel()
	sm, err := Parse([]byte(reviewLoop))
	if err != nil {
		t.Fatal(err)
	}
	if sm.StartAt != "init" || len(sm.States) != 8 || sm.Names[2] != "review.route" {
		t.Fatalf("StartAt %q, %d states, names %v", sm.StartAt, len(sm.States), sm.Names)
	}
	r := sm.States["review"]
	if r.Type != TypeTask || r.Pattern != WaitForTaskToken || r.ResourceBase != "arn:aws:states:::sqs:sendMessage" ||
		r.TimeoutSeconds != 900 || r.HeartbeatSeconds != 300 || r.Next != "review.route" || len(r.Catch) != 1 ||
		r.Catch[0].Next != "failed" || r.Catch[0].ResultPath.String() != "$.error" || r.ResultPath.String() != "$.last" {
		t.Errorf("review parsed as %+v", r)
	}
	if f := sm.States["failed"]; f.Error != "stratus.Failed" || f.Cause != "a step failed" {
		t.Errorf("failed parsed as %+v", f)
	}
	if c := sm.States["review.route"]; len(c.Choices) != 2 || c.Default != "manual_action_required" {
		t.Errorf("review.route parsed as %+v", c)
	}
}

// ASL spec § Retrying after error: IntervalSeconds 1, MaxAttempts 3,
// BackoffRate 2.0 by default; JitterStrategy NONE (AWS).
func TestParse_RetryDefaults(t *testing.T) {
	t.Parallel()
	st := parseState(t, `{"Type":"Task","Resource":"arn:x","Next":"n","Retry":[
		{"ErrorEquals":["A"]},
		{"ErrorEquals":["B"],"IntervalSeconds":5,"MaxAttempts":0,"BackoffRate":1.5,"MaxDelaySeconds":30,"JitterStrategy":"FULL"}]}`)
	want := []Retrier{
		{ErrorEquals: []string{"A"}, IntervalSeconds: 1, MaxAttempts: 3, BackoffRate: 2.0, JitterStrategy: "NONE"},
		{ErrorEquals: []string{"B"}, IntervalSeconds: 5, MaxAttempts: 0, BackoffRate: 1.5, MaxDelaySeconds: 30, JitterStrategy: "FULL"},
	}
	for i, w := range want {
		g := st.Retry[i]
		if strings.Join(g.ErrorEquals, ",") != strings.Join(w.ErrorEquals, ",") || g.IntervalSeconds != w.IntervalSeconds ||
			g.MaxAttempts != w.MaxAttempts || g.BackoffRate != w.BackoffRate || g.MaxDelaySeconds != w.MaxDelaySeconds || g.JitterStrategy != w.JitterStrategy {
			t.Errorf("Retry[%d] = %+v, want %+v", i, g, w)
		}
	}
	if st.MatchRetrier("B") != 1 || st.MatchRetrier("C") != -1 {
		t.Error("MatchRetrier picked the wrong retrier")
	}
}

// Everything outside the subset is rejected at load, each problem naming
// the state and the field.
func TestParse_Rejects(t *testing.T) {
	t.Parallel()
	const ok = `"ok":{"Type":"Succeed"}`
	cases := []struct {
		name, def, want string
	}{
		{"not json", `{`, `state machine: the definition is not JSON`},
		{"not an object", `[]`, `state machine: the definition must be a JSON object`},
		{"missing StartAt", `{"States":{` + ok + `}}`, `state machine: field "StartAt": required`},
		{"StartAt target missing", `{"StartAt":"nope","States":{` + ok + `}}`, `state machine: field "StartAt": no state named "nope" in States`},
		{"empty States", `{"StartAt":"a","States":{}}`, `state machine: field "States": must be a non-empty JSON object`},
		{"unknown top-level field", `{"StartAt":"ok","Foo":1,"States":{` + ok + `}}`, `state machine: field "Foo": not supported in the top level; supported fields: Comment, StartAt, States, TimeoutSeconds, Version, QueryLanguage`},
		{"JSONata top level", `{"QueryLanguage":"JSONata","StartAt":"ok","States":{` + ok + `}}`, `state machine: field "QueryLanguage": "JSONata" is not supported; only "JSONPath"`},
		{"JSONata state", `{"StartAt":"ok","States":{"ok":{"Type":"Succeed","QueryLanguage":"JSONata"}}}`, `state "ok": field "QueryLanguage": "JSONata" is not supported; only "JSONPath"`},
		{"bad top TimeoutSeconds", `{"StartAt":"ok","TimeoutSeconds":0,"States":{` + ok + `}}`, `state machine: field "TimeoutSeconds": must be an integer from 1 to 99999999, got 0`},
		{"Map", `{"StartAt":"m","States":{"m":{"Type":"Map","End":true}}}`, `state "m": field "Type": "Map" is not supported by the embedded executor; supported: Pass, Task, Choice, Wait, Succeed, Fail`},
		{"Parallel", `{"StartAt":"m","States":{"m":{"Type":"Parallel","End":true}}}`, `state "m": field "Type": "Parallel" is not supported`},
		{"Wait with no time", `{"StartAt":"w","States":{"w":{"Type":"Wait","End":true}}}`, `state "w": field "Seconds": a Wait state needs exactly one of Seconds, Timestamp, SecondsPath or TimestampPath; it has 0`},
		{"Wait with two times", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":1,"SecondsPath":"$.s","End":true}}}`, `state "w": field "SecondsPath": a Wait state needs exactly one of Seconds, Timestamp, SecondsPath or TimestampPath; it has 2 (Seconds, SecondsPath)`},
		{"Wait negative Seconds", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":-1,"End":true}}}`, `state "w": field "Seconds": must be an integer from 0 to 99999999, got -1`},
		{"Wait fractional Seconds", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":1.5,"End":true}}}`, `state "w": field "Seconds": must be an integer from 0 to 99999999, got 1.5`},
		{"Wait Seconds too large", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":100000000,"End":true}}}`, `state "w": field "Seconds": must be an integer from 0 to 99999999, got 100000000`},
		{"Wait lowercase timestamp", `{"StartAt":"w","States":{"w":{"Type":"Wait","Timestamp":"2024-08-18t17:33:00z","End":true}}}`, `state "w": field "Timestamp": "2024-08-18t17:33:00z" is not a timestamp; valid: RFC 3339 with an uppercase T and Z`},
		{"Wait date only", `{"StartAt":"w","States":{"w":{"Type":"Wait","Timestamp":"2024-08-18","End":true}}}`, `state "w": field "Timestamp": "2024-08-18" is not a timestamp`},
		{"Wait SecondsPath not a path", `{"StartAt":"w","States":{"w":{"Type":"Wait","SecondsPath":"s","End":true}}}`, `state "w": field "SecondsPath": path "s"`},
		{"Wait SecondsPath null", `{"StartAt":"w","States":{"w":{"Type":"Wait","SecondsPath":null,"End":true}}}`, `state "w": field "SecondsPath": must be a path string, got null`},
		{"Wait with ResultPath", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":1,"ResultPath":"$.x","End":true}}}`, `state "w": field "ResultPath": not supported in a Wait state; supported fields: Type, Comment, QueryLanguage, InputPath, OutputPath, Seconds, Timestamp, SecondsPath, TimestampPath, Next, End`},
		{"Wait without Next", `{"StartAt":"w","States":{"w":{"Type":"Wait","Seconds":1}}}`, `state "w": field "Next": a Wait state needs exactly one of "Next" (a state name) or "End": true`},
		{"missing Type", `{"StartAt":"m","States":{"m":{"End":true}}}`, `state "m": field "Type": required; supported: Pass, Task, Choice, Wait, Succeed, Fail`},
		{"unknown field", `{"StartAt":"p","States":{"p":{"Type":"Pass","Foo":1,"End":true}}}`, `state "p": field "Foo": not supported in a Pass state; supported fields: Type, Comment, QueryLanguage, InputPath, OutputPath, ResultPath, Parameters, Result, Next, End`},
		{"TimeoutSecondsPath", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","TimeoutSecondsPath":"$.t","End":true}}}`, `state "t": field "TimeoutSecondsPath": not supported; use TimeoutSeconds`},
		{"HeartbeatSecondsPath", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","HeartbeatSecondsPath":"$.t","End":true}}}`, `state "t": field "HeartbeatSecondsPath": not supported; use HeartbeatSeconds`},
		{"Arguments", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","Arguments":{},"End":true}}}`, `state "t": field "Arguments": is JSONata`},
		{"Assign", `{"StartAt":"p","States":{"p":{"Type":"Pass","Assign":{},"End":true}}}`, `state "p": field "Assign": variables are not supported`},
		{"dangling Next", `{"StartAt":"p","States":{"p":{"Type":"Pass","Next":"q"}}}`, `state "p": field "Next": no state named "q" in States`},
		{"Task without Next or End", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x"}}}`, `state "t": field "Next": a Task state needs exactly one of "Next" (a state name) or "End": true`},
		{"Pass with Next and End", `{"StartAt":"p","States":{"p":{"Type":"Pass","Next":"ok","End":true},` + ok + `}}`, `state "p": field "Next": a Pass state needs exactly one of`},
		{"End false", `{"StartAt":"p","States":{"p":{"Type":"Pass","End":false}}}`, `state "p": field "End": must be true when present`},
		{"Task without Resource", `{"StartAt":"t","States":{"t":{"Type":"Task","End":true}}}`, `state "t": field "Resource": required`},
		{"Resource not an ARN", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"lambda","End":true}}}`, `state "t": field "Resource": must be an ARN`},
		{"heartbeat not below timeout", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","TimeoutSeconds":10,"HeartbeatSeconds":10,"End":true}}}`, `state "t": field "HeartbeatSeconds": must be smaller than TimeoutSeconds (10), got 10`},
		{"non-integer TimeoutSeconds", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","TimeoutSeconds":1.5,"End":true}}}`, `state "t": field "TimeoutSeconds": must be an integer from 1 to 99999999, got 1.5`},
		{"bad InputPath", `{"StartAt":"p","States":{"p":{"Type":"Pass","InputPath":"$.a[*]","End":true}}}`, `state "p": field "InputPath": path "$.a[*]"`},
		{"context ResultPath", `{"StartAt":"p","States":{"p":{"Type":"Pass","ResultPath":"$$.State","End":true}}}`, `state "p": field "ResultPath": path "$$.State": the context object ($$) is not supported here`},
		{"Parameters not an object", `{"StartAt":"p","States":{"p":{"Type":"Pass","Parameters":[1],"End":true}}}`, `state "p": field "Parameters": must be a JSON object (a payload template), got an array`},
		{"bad intrinsic", `{"StartAt":"p","States":{"p":{"Type":"Pass","Parameters":{"a.$":"States.Hash($.x, 'MD5')"},"End":true}}}`, `state "p": field "Parameters.a.$": intrinsic "States.Hash($.x, 'MD5')": function "States.Hash" is not supported`},
		{"Retry States.ALL not alone", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["States.ALL","X"]}]}}}`, `state "t": field "Retry[0].ErrorEquals": States.ALL must appear alone in ErrorEquals`},
		{"Retry States.ALL not last", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["States.ALL"]},{"ErrorEquals":["X"]}]}}}`, `state "t": field "Retry[0].ErrorEquals": States.ALL must appear in the last element of the array`},
		{"Catch States.ALL not last", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Catch":[{"ErrorEquals":["States.ALL"],"Next":"t"},{"ErrorEquals":["X"],"Next":"t"}]}}}`, `state "t": field "Catch[0].ErrorEquals": States.ALL must appear in the last element of the array`},
		{"unknown States error", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["States.Nope"]}]}}}`, `state "t": field "Retry[0].ErrorEquals[0]": "States.Nope" is not a predefined error name`},
		{"BackoffRate below 1", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["X"],"BackoffRate":0.5}]}}}`, `state "t": field "Retry[0].BackoffRate": must be a number greater than or equal to 1.0, got 0.5`},
		{"IntervalSeconds zero", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["X"],"IntervalSeconds":0}]}}}`, `state "t": field "Retry[0].IntervalSeconds": must be an integer from 1 to 99999999, got 0`},
		{"MaxAttempts negative", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["X"],"MaxAttempts":-1}]}}}`, `state "t": field "Retry[0].MaxAttempts": must be an integer from 0 to 99999999, got -1`},
		{"JitterStrategy", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["X"],"JitterStrategy":"HALF"}]}}}`, `state "t": field "Retry[0].JitterStrategy": must be "FULL" or "NONE", got "HALF"`},
		{"Retrier unknown field", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Retry":[{"ErrorEquals":["X"],"Foo":1}]}}}`, `state "t": field "Retry[0].Foo": not supported in a Retrier`},
		{"Catch dangling Next", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Catch":[{"ErrorEquals":["X"],"Next":"zz"}]}}}`, `state "t": field "Catch[0].Next": no state named "zz" in States`},
		{"Catch without Next", `{"StartAt":"t","States":{"t":{"Type":"Task","Resource":"arn:x","End":true,"Catch":[{"ErrorEquals":["X"]}]}}}`, `state "t": field "Catch[0].Next": required`},
		{"Choice with Next", `{"StartAt":"c","States":{"c":{"Type":"Choice","Next":"ok","Choices":[{"Variable":"$.a","IsPresent":true,"Next":"ok"}]},` + ok + `}}`, `state "c": field "Next": not supported in a Choice state`},
		{"Choice rule without Next", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.a","IsPresent":true}],"Default":"ok"},` + ok + `}}`, `state "c": field "Choices[0].Next": required in a top-level Choice Rule`},
		{"nested rule with Next", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Not":{"Variable":"$.a","IsPresent":true,"Next":"ok"},"Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0].Not.Next": only a top-level Choice Rule has Next`},
		{"timestamp operator", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.a","TimestampEquals":"2020-01-01T00:00:00Z","Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0].TimestampEquals": timestamp comparisons are not supported`},
		{"two operators", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.a","StringEquals":"x","IsPresent":true,"Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0]": has 2 operators (IsPresent, StringEquals); a Choice Rule has exactly one`},
		{"operand type", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.a","NumericEquals":"1","Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0].NumericEquals": must be a number, got "1"`},
		{"missing Variable", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"StringEquals":"x","Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0].Variable": required with StringEquals`},
		{"empty And", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"And":[],"Next":"ok"}]},` + ok + `}}`, `state "c": field "Choices[0].And": must be a non-empty array of Choice Rules`},
		{"Default dangling", `{"StartAt":"c","States":{"c":{"Type":"Choice","Choices":[{"Variable":"$.a","IsPresent":true,"Next":"ok"}],"Default":"zz"},` + ok + `}}`, `state "c": field "Default": no state named "zz" in States`},
		{"Fail ErrorPath", `{"StartAt":"f","States":{"f":{"Type":"Fail","ErrorPath":"$.e"}}}`, `state "f": field "ErrorPath": not supported; use Error`},
		{"Succeed with End", `{"StartAt":"s","States":{"s":{"Type":"Succeed","End":true}}}`, `state "s": field "End": not supported in a Succeed state`},
		{"unreachable", `{"StartAt":"ok","States":{` + ok + `,"lost":{"Type":"Succeed"}}}`, `state "lost": not reachable from StartAt "ok"`},
		{"no terminal state", `{"StartAt":"a","States":{"a":{"Type":"Pass","Next":"b"},"b":{"Type":"Pass","Next":"a"}}}`, `state machine: field "States": no reachable state ends the execution`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.def))
			if err == nil {
				t.Fatal("accepted")
			}
			found := false
			for _, line := range strings.Split(err.Error(), "\n") {
				if strings.HasPrefix(line, tc.want) {
					found = true
				}
			}
			if !found {
				t.Errorf("error:\n%v\nwant a line starting with:\n%s", err, tc.want)
			}
		})
	}
}

// Parse reports every problem, not only the first, in definition order.
func TestParse_CollectsAllProblems(t *testing.T) {
	t.Parallel()
	_, err := Parse([]byte(`{"StartAt":"m","States":{"m":{"Type":"Map","Next":"t"},"t":{"Type":"Succeed"}}}`))
	if err == nil || strings.Contains(err.Error(), "not reachable") {
		t.Errorf("err = %v; a state whose transitions are unknown must not make others unreachable", err)
	}
	def := `{"StartAt":"a","States":{
		"a":{"Type":"Task","Resource":"arn:x","TimeoutSecondsPath":"$.t","Next":"b"},
		"b":{"Type":"Pass","Result":1,"Foo":true,"End":true},
		"c":{"Type":"Pass","Next":"nowhere"}}}`
	_, err = Parse([]byte(def))
	de, ok := err.(*DefinitionError)
	if !ok {
		t.Fatalf("err = %v", err)
	}
	want := []string{
		`state "a": field "TimeoutSecondsPath": not supported; use TimeoutSeconds`,
		`state "b": field "Foo": not supported in a Pass state; supported fields: Type, Comment, QueryLanguage, InputPath, OutputPath, ResultPath, Parameters, Result, Next, End`,
		`state "c": field "Next": no state named "nowhere" in States`,
		`state "c": not reachable from StartAt "a"; remove the state or add a transition to it`,
	}
	if len(de.Problems) != len(want) {
		t.Fatalf("problems:\n%v\nwant %d", err, len(want))
	}
	for i, w := range want {
		if got := de.Problems[i].String(); got != w {
			t.Errorf("problem %d = %s\nwant %s", i, got, w)
		}
	}
}
