package lambdas

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stratusflow/stratus/internal/executor"
)

// ExecutionRule is a function's EventBridgeRule event on Step Functions'
// execution status changes: the statuses and state machine ARN prefix
// its pattern lets through.
type ExecutionRule struct {
	Event    string
	Statuses []string // detail.status; empty = any
	// StateMachineARNPrefix is detail.stateMachineArn's prefix as written,
	// ${AWS::Partition}, ${AWS::Region}, ${AWS::AccountId} and
	// ${AWS::StackName} unresolved; "" = any.
	StateMachineARNPrefix string
}

// ExecutionRuleFromTemplate returns the function's EventBridgeRule event
// whose pattern is source aws.states, detail-type "Step Functions
// Execution Status Change". Errors: no such function or no such event.
func ExecutionRuleFromTemplate(templateYAML []byte, function string) (ExecutionRule, error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return ExecutionRule{}, err
	}
	p, err := t.function(function)
	if err != nil {
		return ExecutionRule{}, err
	}
	for name, ev := range asMap(p["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "EventBridgeRule" && ev["Type"] != "CloudWatchEvent" {
			continue
		}
		pat := asMap(asMap(ev["Properties"])["Pattern"])
		if !slices.Contains(asList(pat["source"]), any(ExecutionStatusChangeSource)) || !slices.Contains(asList(pat["detail-type"]), any(ExecutionStatusChangeDetailType)) {
			continue
		}
		r := ExecutionRule{Event: name}
		detail := asMap(pat["detail"])
		for _, s := range asList(detail["status"]) {
			if s, ok := s.(string); ok {
				r.Statuses = append(r.Statuses, s)
			}
		}
		for _, m := range asList(detail["stateMachineArn"]) {
			prefix := asMap(m)["prefix"]
			switch v := prefix.(type) {
			case string:
				r.StateMachineARNPrefix = v
			case map[string]any:
				s, ok := v["Fn::Sub"].(string)
				if !ok {
					return ExecutionRule{}, fmt.Errorf("lambdas: %s event %s: a stateMachineArn prefix of %v; want a string or !Sub of one", function, name, v)
				}
				r.StateMachineARNPrefix = s
			}
		}
		return r, nil
	}
	return ExecutionRule{}, fmt.Errorf("lambdas: %s has no EventBridgeRule event on %q", function, ExecutionStatusChangeDetailType)
}

// Matches reports whether the status change of x reaches the function, in
// the stack named stack: its status is one of r.Statuses and its state
// machine's ARN starts with r.StateMachineARNPrefix, the pseudo parameters
// taken from that ARN and stack.
func (r ExecutionRule) Matches(x executor.Execution, stack string) bool {
	if len(r.Statuses) > 0 && !slices.Contains(r.Statuses, x.Status) {
		return false
	}
	if r.StateMachineARNPrefix == "" {
		return true
	}
	p := strings.Split(x.StateMachine, ":")
	if len(p) < 5 {
		return false
	}
	prefix := strings.NewReplacer("${AWS::Partition}", p[1], "${AWS::Region}", p[3], "${AWS::AccountId}", p[4], "${AWS::StackName}", stack).Replace(r.StateMachineARNPrefix)
	return strings.HasPrefix(x.StateMachine, prefix)
}

// ObjectCreatedRule is a function's EventBridgeRule event on S3's "Object
// Created" events: the bucket and the key prefix its pattern lets
// through.
type ObjectCreatedRule struct {
	Event string
	// Bucket is the logical id detail.bucket.name refers to (!Ref); "" =
	// any bucket.
	Bucket string
	// KeyPrefix is detail.object.key's prefix match; "" = any key.
	KeyPrefix string
}

// ObjectCreatedRuleFromTemplate returns the function's EventBridgeRule
// event whose pattern is source aws.s3, detail-type "Object Created".
// Errors: no such function or event; a bucket name other than one !Ref, a
// key match other than one prefix (not emulated).
func ObjectCreatedRuleFromTemplate(templateYAML []byte, function string) (ObjectCreatedRule, error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return ObjectCreatedRule{}, err
	}
	p, err := t.function(function)
	if err != nil {
		return ObjectCreatedRule{}, err
	}
	for name, ev := range asMap(p["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "EventBridgeRule" && ev["Type"] != "CloudWatchEvent" {
			continue
		}
		pat := asMap(asMap(ev["Properties"])["Pattern"])
		if !slices.Contains(asList(pat["source"]), any(ObjectCreatedSource)) || !slices.Contains(asList(pat["detail-type"]), any(ObjectCreatedDetailType)) {
			continue
		}
		r := ObjectCreatedRule{Event: name}
		detail := asMap(pat["detail"])
		if names := asList(asMap(detail["bucket"])["name"]); len(names) > 0 {
			if r.Bucket = refTarget(names[0]); len(names) != 1 || r.Bucket == "" {
				return ObjectCreatedRule{}, fmt.Errorf("lambdas: %s event %s: detail.bucket.name %v; want one !Ref of a bucket of the template", function, name, names)
			}
		}
		if keys := asList(asMap(detail["object"])["key"]); len(keys) > 0 {
			prefix, ok := asMap(keys[0])["prefix"].(string)
			if len(keys) != 1 || !ok || prefix == "" {
				return ObjectCreatedRule{}, fmt.Errorf("lambdas: %s event %s: detail.object.key %v; want one prefix match", function, name, keys)
			}
			r.KeyPrefix = prefix
		}
		return r, nil
	}
	return ObjectCreatedRule{}, fmt.Errorf("lambdas: %s has no EventBridgeRule event on %s %q", function, ObjectCreatedSource, ObjectCreatedDetailType)
}

// ScheduleFromTemplate returns the name and the expression ("rate(5
// minutes)", "cron(...)") of the function's Schedule event. Errors: no
// such function, none or more than one Schedule event.
func ScheduleFromTemplate(templateYAML []byte, function string) (event, expression string, err error) {
	t, err := parseTemplate(templateYAML)
	if err != nil {
		return "", "", err
	}
	p, err := t.function(function)
	if err != nil {
		return "", "", err
	}
	n := 0
	for name, ev := range asMap(p["Events"]) {
		ev := asMap(ev)
		if ev["Type"] != "Schedule" {
			continue
		}
		n++
		event = name
		expression, _ = asMap(ev["Properties"])["Schedule"].(string)
	}
	if n != 1 {
		return "", "", fmt.Errorf("lambdas: %s has %d Schedule events; want one", function, n)
	}
	return event, expression, nil
}
