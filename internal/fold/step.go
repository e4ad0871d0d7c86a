package fold

import (
	"bytes"
	"encoding/json"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/projection"
)

// Fold returns the step value of one attempt from its output tail (in
// append order), under submit_format format, as JSON:
//
//   - no staged part: the fold of the Final's body (Value, RoleBody);
//   - at least one OutputArtifact: {"out": <final>, "parts": {<name>: <value>}},
//     each part folded with Value(RolePart); re-staging a name replaces its
//     value (last write wins) but keeps the position of its first staging.
//     A part whose name breaks the part-name rule (projection.CheckPartName,
//     e.g. one NFKC changes: docs/security.md § Part names) is left out, as
//     if never staged: the artifact route refuses such names, so only a
//     tail written before the rule holds one (Parts reports them).
//
// OutputSidecar events (another producer's audit appendix) and unknown
// kinds are invisible. The store refuses a second Final, so the tail has at
// most one; should it hold more, the first wins (as the first emit does in
// process). The Final's OK flag is the caller's business: Fold folds the
// body either way. Errors: *stratus.Error EUNPROCESSABLE "no Final in
// output_tail" when the tail has no Final; Value's EUNPROCESSABLE when
// format is "json" and the final body is not JSON.
func Fold(agent string, tail []stratus.OutputEvent, format string) (json.RawMessage, error) {
	return foldTail(agent, tail, format, false)
}

// Object is Fold when the step value is a JSON object, and nil when it is
// anything else, with Fold's errors: what the readers of a typed result
// need (they read objects only: core.ContractObject), without writing a
// text body out as a JSON string, which for a 64 KiB body was a tenth of a
// submit's CPU (README.md § Performance).
func Object(agent string, tail []stratus.OutputEvent, format string) (json.RawMessage, error) {
	return foldTail(agent, tail, format, true)
}

// foldTail is Fold, or with object Object.
func foldTail(agent string, tail []stratus.OutputEvent, format string, object bool) (json.RawMessage, error) {
	var final *stratus.OutputEvent
	var names []string // first-staging order
	parts := map[string][]byte{}
	for i := range tail {
		e := &tail[i]
		switch e.Kind {
		case stratus.OutputFinal:
			if final == nil {
				final = e
			}
		case stratus.OutputArtifact:
			if projection.CheckPartName(e.Name) != nil {
				continue
			}
			if _, seen := parts[e.Name]; !seen {
				names = append(names, e.Name)
			}
			parts[e.Name] = e.Body
		}
	}
	if final == nil {
		// The bare text is the contract's reverse-lookup symptom
		// (docs/contracts.md § The in-process twin); keep it exact.
		return nil, &stratus.Error{Code: stratus.EUNPROCESSABLE, Message: "no Final in output_tail"}
	}
	if object && len(names) == 0 {
		out, err := value(agent, final.Body, format, RoleBody, false)
		if err != nil || len(out) == 0 || out[0] != '{' {
			return nil, err // parse compacts: an object starts with '{'
		}
		return out, nil
	}
	out, err := Value(agent, final.Body, format, RoleBody)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return out, nil
	}
	var b bytes.Buffer
	b.WriteString(`{"out":`)
	b.Write(out)
	b.WriteString(`,"parts":{`)
	for i, name := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := Value(agent, parts[name], format, RolePart)
		if err != nil { // parts never fail to fold; keep the guard honest
			return nil, err
		}
		b.Write(jsonString([]byte(name)))
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}}")
	return b.Bytes(), nil
}

// Parts returns the names of the parts tail stages that Fold folds, in
// first-staging order, and one error per name it leaves out (its
// projection.CheckPartName error, once per name), for the caller to warn
// about.
func Parts(tail []stratus.OutputEvent) (names []string, refused []error) {
	seen := map[string]bool{}
	for _, e := range tail {
		if e.Kind != stratus.OutputArtifact || seen[e.Name] {
			continue
		}
		seen[e.Name] = true
		if err := projection.CheckPartName(e.Name); err != nil {
			refused = append(refused, err)
			continue
		}
		names = append(names, e.Name)
	}
	return names, refused
}
