package devstack

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// checkParameters checks each value of params against the constraints the
// template declares for it (AllowedValues, AllowedPattern, MinLength,
// MaxLength, and for a Number MinValue and MaxValue), as CloudFormation
// does before it creates a stack (moto does not), and that each of
// required names a declared parameter. Errors: the first value refused,
// naming the parameter, the value and what is valid (the template's
// ConstraintDescription when it has one).
func checkParameters(declared map[string]map[string]any, params map[string]string, required map[string]bool) error {
	for _, k := range sortedKeys(required) {
		if _, ok := declared[k]; !ok {
			return fmt.Errorf("parameter %s: the template declares no such parameter (its parameters: %s)", k, strings.Join(sortedKeys(declared), ", "))
		}
	}
	for _, k := range sortedKeys(params) {
		d, ok := declared[k]
		if !ok {
			continue
		}
		v := params[k]
		refuse := func(what string) error {
			if cd, _ := d["ConstraintDescription"].(string); cd != "" {
				what += " (" + cd + ")"
			}
			return fmt.Errorf("parameter %s=%q: %s", k, v, what)
		}
		if av, ok := d["AllowedValues"].([]any); ok && len(av) > 0 {
			var allowed []string
			for _, a := range av {
				allowed = append(allowed, fmt.Sprint(a))
			}
			if !slices.Contains(allowed, v) {
				return refuse("not one of its AllowedValues " + strings.Join(allowed, ", "))
			}
		}
		if p, _ := d["AllowedPattern"].(string); p != "" {
			if re, err := regexp.Compile("^(?:" + p + ")$"); err == nil && !re.MatchString(v) {
				return refuse("does not match its AllowedPattern " + p)
			}
		}
		if n, ok := number(d["MinLength"]); ok && float64(len(v)) < n {
			return refuse(fmt.Sprintf("shorter than its MinLength %v", n))
		}
		if n, ok := number(d["MaxLength"]); ok && float64(len(v)) > n {
			return refuse(fmt.Sprintf("longer than its MaxLength %v", n))
		}
		if t, _ := d["Type"].(string); t == "Number" {
			x, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return refuse("not a number")
			}
			if n, ok := number(d["MinValue"]); ok && x < n {
				return refuse(fmt.Sprintf("under its MinValue %v", n))
			}
			if n, ok := number(d["MaxValue"]); ok && x > n {
				return refuse(fmt.Sprintf("over its MaxValue %v", n))
			}
		}
	}
	return nil
}

// number reads a JSON number, or a numeric string as templates may hold.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
