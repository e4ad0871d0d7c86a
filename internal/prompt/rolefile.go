package prompt

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/goccy/go-yaml"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/yamlast"
)

// RoleMeta is what a role file may declare about its agent in an optional
// YAML front matter block (a Stratus extension;
// docs/contracts.md § The fold and submit_format "Agent: AgentMeta.ctx").
// Worc's role files have none.
type RoleMeta struct {
	SubmitFormat string `yaml:"submit_format"`
}

// RoleMetaKeys are the keys a role file's front matter may carry.
var RoleMetaKeys = []string{"submit_format"}

// SplitRoleFile separates a role file's front matter from its template.
// Front matter is recognised only when the file starts with a "---" line,
// a later "---" line closes it, and the block between is a YAML mapping;
// anything else (a Markdown rule, prose) is all template, returned
// verbatim. A recognised block with a key outside RoleMetaKeys is an
// *stratus.Error EINVALID naming the key and the allowed set.
func SplitRoleFile(data string) (RoleMeta, string, error) {
	var meta RoleMeta
	rest, ok := strings.CutPrefix(data, "---\n")
	if !ok {
		return meta, data, nil
	}
	end := strings.Index(rest, "\n---\n")
	var block, body string
	switch {
	case end >= 0:
		block, body = rest[:end], rest[end+len("\n---\n"):]
	case strings.HasSuffix(rest, "\n---"):
		block, body = strings.TrimSuffix(rest, "\n---"), ""
	default:
		return meta, data, nil
	}
	if err := yamlast.Check([]byte(block), yamlast.DefaultLimits); err != nil {
		return meta, data, stratus.Errorf(stratus.EINVALID, "role-file front matter: %v", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal([]byte(block), &m); err != nil || m == nil {
		return meta, data, nil
	}
	for k := range m {
		if !slices.Contains(RoleMetaKeys, k) {
			return meta, data, stratus.FieldErrorf(stratus.EINVALID, k, "unknown role-file front matter key %q; allowed: %s", k, strings.Join(RoleMetaKeys, ", "))
		}
	}
	if err := yaml.NewDecoder(bytes.NewReader([]byte(block)), yaml.Strict()).Decode(&meta); err != nil {
		return meta, data, stratus.Errorf(stratus.EINVALID, "role-file front matter: %s", fmt.Sprint(err))
	}
	return meta, body, nil
}
