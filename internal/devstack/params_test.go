package devstack

import (
	"encoding/json"
	"strings"
	"testing"
)

// A parameter value the template's constraints refuse, and a parameter
// the operator set that it does not declare, are refused before the stack
// is created, as CloudFormation refuses them, naming the parameter, the
// value and what is valid.
func TestCheckParameters_TheTemplatesConstraints(t *testing.T) {
	var declared map[string]map[string]any
	json.Unmarshal([]byte(`{
		"WorkerCpu": {"Type": "Number", "AllowedValues": [256, 512, 1024]},
		"HeartbeatSeconds": {"Type": "Number", "MinValue": 120, "MaxValue": 3600},
		"Name": {"Type": "String", "AllowedPattern": "[a-z]+", "MaxLength": 5, "ConstraintDescription": "lower-case letters"}
	}`), &declared)
	for _, tc := range []struct {
		params   map[string]string
		required map[string]bool
		want     string // "" = accepted
	}{
		{map[string]string{"WorkerCpu": "512", "HeartbeatSeconds": "300", "Name": "abc", "Undeclared": "x"}, nil, ""},
		{map[string]string{"WorkerCpu": "3"}, nil, `parameter WorkerCpu="3": not one of its AllowedValues 256, 512, 1024`},
		{map[string]string{"HeartbeatSeconds": "30"}, nil, `parameter HeartbeatSeconds="30": under its MinValue 120`},
		{map[string]string{"HeartbeatSeconds": "lots"}, nil, `parameter HeartbeatSeconds="lots": not a number`},
		{map[string]string{"Name": "ABC"}, nil, `parameter Name="ABC": does not match its AllowedPattern [a-z]+ (lower-case letters)`},
		{map[string]string{"Name": "abcdefg"}, nil, `longer than its MaxLength 5`},
		{map[string]string{"NoSuchParam": "1"}, map[string]bool{"NoSuchParam": true}, `parameter NoSuchParam: the template declares no such parameter`},
	} {
		err := checkParameters(declared, tc.params, tc.required)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v; want accepted", tc.params, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v; want %q", tc.params, err, tc.want)
		}
	}
}
