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
