package flow

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/config"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/outputschema"
)

// Problem is one finding of Parse or Validate, located in the flow file.
// Path is the field at fault relative to the `flow:` block, e.g.
// "nodes[3].role_file" or "edges[5].loop". Fatal problems make the flow
// unusable (docs/contracts.md § Fatal validation); the others are warnings.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Path    string `json:"path"`
	Message string `json:"message"`
	Fatal   bool   `json:"fatal"`
	// dependsOn is the path of another value the problem is about (a
	// budget an edge names): when that value failed to parse, the problem
	// is its cascade and WithoutCascades drops it.
	dependsOn string
}

// String formats p as "file:line:col: message" (without line and column
// when the position is unknown).
func (p Problem) String() string {
	loc := p.File
	if loc == "" {
		loc = "<flow>"
	}
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d:%d", loc, p.Line, p.Col)
	}
	return loc + ": " + p.Message
}

// Fatal returns the fatal problems of ps, in order.
func Fatal(ps []Problem) []Problem {
	var out []Problem
	for _, p := range ps {
		if p.Fatal {
			out = append(out, p)
		}
	}
	return out
}

// ParseError is what Parse and Load return for a malformed flow file. It
// unwraps to a *stratus.Error with code EINVALID whose message lists every
// problem as "file:line:col: message", one per line; Problems keeps them
// structured for callers that report positions themselves.
type ParseError struct {
	Problems []Problem
	// Flow is what did parse (a key that failed is left out), for callers
	// that check the other layers too (Validate, then WithoutCascades);
	// nil when the file is not a `flow:` mapping at all.
	Flow *Flow

	failed []string // paths whose value failed to parse (WithoutCascades)
}

func (e *ParseError) Error() string { return e.Unwrap().Error() }

// Unwrap returns the *stratus.Error (EINVALID) form of e.
func (e *ParseError) Unwrap() error {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return &stratus.Error{Code: stratus.EINVALID, Message: strings.Join(lines, "\n")}
}

// ValidateOptions tunes Validate. The zero value checks the flow on its
// own: the graph-integrity and security-ceiling layers.
type ValidateOptions struct {
	// RoleFileRoot is the flows directory role_file paths are relative to
	// (worc's .worc/flows/). When set, every role_file, resume_role_file and
	// supervisor prompt is looked up under it: one that resolves (through
	// symlinks) outside it is fatal, one that is absent is a warning (the
	// node fails only if it runs: MissingRoleFiles lists them for a run's
	// preflight), and each one present is scanned by the anti-drift lint.
	// When empty, only containment (no absolute path, no "..") is checked.
	RoleFileRoot string
	// Config, when set, adds the config-consistency layer
	// (docs/contracts.md § Fatal validation): providers allowed and
	// launchable, reasoning supported by the provider that runs the node, no
	// Codex workspace-write node with network, skills only without strict
	// isolation, supervisor.observe.mode only narrowing the config's; and the
	// warnings that depend on agents.max_fix_cycles.
	Config *config.Config
	// ToolsDir, when set, is the tool registry (DIR/.stratus/tools): every
	// tool node's executable must be installed there
	// (docs/contracts.md § Tools). It is checked with or without Config.
	ToolsDir string
}

// Value sets of the enumerated fields (reference.md).
var (
	permissionProfiles = []string{ReadOnly, WorkspaceWrite}
	outputPolicies     = []string{"code_change", "repository_document", "private_control_workspace_report"}
	publishingPolicies = []string{"pull_request", "documentation_pull_request", "local_artifact", "private_control_workspace_report", "none"}
	networkPolicies    = []string{"advisories", "research"}
	sessionScopes      = []string{"fresh_disposable", "editing_lineage", "resume_own_lineage"}
	outputArtifacts    = []string{"enriched_spec", "plan", "summary", "report"}
	severities         = []string{"blocking", "critical", "high", "medium", "low"}
	checkers           = []string{"command_profile", "citation", "dependency_scan"}
	signals            = []string{"question", "approval"}
	observeModes       = []string{"all", "selected", "events", "none"}
	kinds              = []string{KindAgent, KindEvaluator, KindChecks, KindTool, KindHITL, KindPublish}
	knownFacts         = []string{"derived.needs_refinement", "config.external_research"}

	// Outcomes each kind may emit besides route:<label> (allowed from any kind).
	kindOutcomes = map[string][]string{
		KindEvaluator: {"accept", "rework"},
		KindChecks:    {"pass", "fail"},
		KindTool:      {"pass", "fail"},
	}

	// reservedStems are the core prompt variables {<stem>_path}; an agent or
	// tool node exposes {<id>_path}, so its id may not shadow one.
	reservedStems = []string{"task", "plan", "diff", "change_overview", "checks", "review", "repo", "skills", "memory", "stage", "conflicts"}
	deviceNames   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(con|prn|aux|nul|com[1-9]|lpt[1-9])(\..*)?$`) })
	nodeIDRE      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })
)

// Validate checks a parsed flow against worc's validation rules
// (docs/contracts.md § Fatal validation, reference.md § Validation) and
// returns every problem, sorted by position (problems in the flow file first,
// then those located in a role file); none is dropped after the first. The
// fatal rules:
//
//   - header: name, task_type, permission_ceiling, output_policy and
//     publishing present; enumerated values known;
//   - nodes: ids unique, matching ^[a-z0-9][a-z0-9_-]{0,63}$, not a Windows
//     device name, and (agent and tool nodes, which expose {<id>_path}) not a
//     reserved variable stem; kind known; the fields each kind requires;
//     output_file one portable file name, exclusive with output_artifact;
//     skills portable names, never empty nor combined with allow_skills:
//     false; a tool name, not a path; when.fact namespaced derived.* or
//     config.*;
//   - edges: from/to resolve; outcome allowed for the source kind; every
//     fail/rework edge bounded by a declared loop or an inline budget; no two
//     edges from one node with the same outcome; nothing leaves a publish
//     node; a hitl approval node routes route:approve and route:deny only;
//   - graph: exactly one entry node, every node reachable from it, every node
//     reaches a terminal (a publish node or a node with no outgoing edge);
//     lineage_affinity one hop to an editing_lineage owner pinning no other
//     provider; decomposition references resolve and its sub_flow region is
//     connected, entered from proposed_by and left by a forward edge;
//   - security: role_file/resume_role_file/supervisor prompts contained;
//     permission_profile at most the ceiling; evaluators read-only and never
//     editing_lineage; no git_evidence on a workspace-write agent; extra_args
//     pass the forbidden-args screen (ScreenArgs);
//   - config (opt.Config): see ValidateOptions.Config; tools (opt.ToolsDir):
//     every tool installed, a regular executable file inside the registry;
//   - compiled names (what compiler.Compile would reject, names.go): two
//     loops (or a loop and an inline budget's <from>_<outcome>, or an
//     agent's <id>_hitl) counting in one $.loops member, a state name over
//     MaxStateName characters; routing (routing.go): an evaluator, checks
//     or hitl question node whose edges are all route:<label>, which it
//     never emits.
//
// The warnings (Fatal false): the anti-drift lint (a {name} in a role file
// outside the flow's variable set, docs/contracts.md § Fatal validation); a
// missing role file; a when.fact outside the two known facts (worc resolves
// it false, silently); a non-blocking evaluator whose rework loop allows
// fewer rounds than its max_rework_per_stage, and max_rework_per_stage on a
// blocking one; a budget above agents.max_fix_cycles (clamped); an unknown
// submit_format; a manifest without the citation checker; a publish policy
// differing from the flow's publishing; a terminal gate (an evaluator, checks
// or tool node without an outgoing edge: only its pass outcome ends done); a
// route:<label> edge from a kind that never emits one, beside edges that
// route; a when.equals that is not a boolean; a budget no edge uses.
func Validate(f *Flow, opt ValidateOptions) []Problem {
	v := &validator{f: f, opt: opt}
	v.header()
	v.nodes()
	v.edges()
	v.approvalRoutes()
	v.graph()
	v.supervisor()
	v.decomposition()
	v.prompts()
	v.loops()
	v.routing()
	v.compiledNames()
	v.configLayer()
	v.tools()
	SortProblems(f.File, v.ps)
	return v.ps
}

// SortProblems orders ps in place by position: the problems located in
// flowFile first, then each other file's (role files, for the anti-drift
// lint) by file name, line and column. The sort is stable.
func SortProblems(flowFile string, ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			if a.File == flowFile || b.File == flowFile {
				return a.File == flowFile
			}
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

type validator struct {
	f   *Flow
	opt ValidateOptions
	ps  []Problem

	lintExtra string // the output variables the anti-drift lint names (prompts.go)
}

func (v *validator) add(pos Pos, path string, fatal bool, format string, args ...any) {
	v.ps = append(v.ps, Problem{File: v.f.File, Line: pos.Line, Col: pos.Col, Path: path,
		Message: fmt.Sprintf(format, args...), Fatal: fatal})
}

// enum reports a fatal problem when value is set and not one of allowed.
func (v *validator) enum(pos Pos, path, field, value string, allowed []string) bool {
	if value == "" || slices.Contains(allowed, value) {
		return true
	}
	v.add(pos, path, true, "%s %q is not allowed; want one of: %s", field, value, strings.Join(allowed, ", "))
	return false
}

func (v *validator) header() {
	f := v.f
	required := []struct{ key, value string }{
		{"name", f.Name}, {"task_type", f.TaskType}, {"permission_ceiling", f.PermissionCeiling},
		{"output_policy", f.OutputPolicy}, {"publishing", f.Publishing},
	}
	for _, r := range required {
		if r.value == "" {
			v.add(f.pos(r.key), r.key, true, "flow.%s is required", r.key)
		}
	}
	v.enum(f.pos("permission_ceiling"), "permission_ceiling", "permission_ceiling", f.PermissionCeiling, permissionProfiles)
	if f.CheckPolicy != "" && f.CheckPolicy != "lenient" && f.CheckPolicy != "strict" {
		v.add(f.pos("check_policy"), "check_policy", true, "flow check_policy %q is not allowed; valid: lenient, strict", f.CheckPolicy)
	}
	if !fold.KnownFormat(f.SubmitFormat) {
		v.add(f.pos("submit_format"), "submit_format", false, "flow submit_format %q is not json or text; it folds like the default", f.SubmitFormat)
	}
	v.enum(f.pos("output_policy"), "output_policy", "output_policy", f.OutputPolicy, outputPolicies)
	v.enum(f.pos("publishing"), "publishing", "publishing", f.Publishing, publishingPolicies)
	v.enum(f.pos("network_policy"), "network_policy", "network_policy", f.NetworkPolicy, networkPolicies)
	if len(f.Nodes) == 0 {
		v.add(f.pos("nodes"), "nodes", true, "flow.nodes is required and must not be empty")
	}
	names := make([]string, 0, len(f.Budgets))
	for name := range f.Budgets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if n := f.Budgets[name]; n < 1 {
			path := "budgets." + name
			v.add(f.pos(path), path, true, "budgets.%s is %d; valid: an iteration cap of at least 1 (%s)", name, n, budgetWhy(n))
		}
	}
	if f.Defaults != nil && f.Defaults.Evaluator != nil {
		ev, p := f.Defaults.Evaluator, "defaults.evaluator."
		v.enum(f.pos(p+"session_scope"), p+"session_scope", "defaults.evaluator.session_scope", ev.SessionScope, sessionScopes)
		if ev.SessionScope == "editing_lineage" {
			v.add(f.pos(p+"session_scope"), p+"session_scope", true,
				"defaults.evaluator.session_scope is editing_lineage; an evaluator never joins an editing session (want fresh_disposable or resume_own_lineage)")
		}
		if ev.PermissionProfile != "" && ev.PermissionProfile != ReadOnly {
			v.add(f.pos(p+"permission_profile"), p+"permission_profile", true,
				"defaults.evaluator.permission_profile is %q; evaluators are forced read-only", ev.PermissionProfile)
		}
		v.enum(f.pos(p+"gate_severity"), p+"gate_severity", "defaults.evaluator.gate_severity", ev.GateSeverity, severities)
		if ev.MaxReworkPerStage != nil && *ev.MaxReworkPerStage < 0 {
			v.add(f.pos(p+"max_rework_per_stage"), p+"max_rework_per_stage", true,
				"defaults.evaluator.max_rework_per_stage is %d; want >= 0", *ev.MaxReworkPerStage)
		}
	}
}

// label names a node in messages: by id when it has one.
func label(n *Node) string {
	if n.ID != "" {
		return fmt.Sprintf("node %q", n.ID)
	}
	return fmt.Sprintf("nodes[%d]", n.Index)
}

func (v *validator) nodes() {
	f := v.f
	seen := map[string]*Node{}
	for i := range f.Nodes {
		n := &f.Nodes[i]
		path := fmt.Sprintf("nodes[%d]", i)
		at := func(key string) (Pos, string) { return n.pos(key), path + "." + key }

		// id
		switch pos, p := at("id"); {
		case n.ID == "":
			v.add(pos, p, true, "%s has no id", path)
		case !nodeIDRE().MatchString(n.ID):
			v.add(pos, p, true, "node id %q must match %s", n.ID, nodeIDRE())
		case deviceNames().MatchString(n.ID):
			v.add(pos, p, true, "node id %q is a Windows device name; it cannot name a directory", n.ID)
		}
		if n.ID != "" {
			if prev, dup := seen[n.ID]; dup {
				pos, p := at("id")
				v.add(pos, p, true, "node id %q is already used by nodes[%d] (line %d)", n.ID, prev.Index, prev.Pos.Line)
			} else {
				seen[n.ID] = n
			}
			if n.Kind == KindAgent || n.Kind == KindTool {
				if slices.Contains(reservedStems, n.ID) || strings.HasPrefix(n.ID, "subtask") {
					pos, p := at("id")
					v.add(pos, p, true, "node id %q shadows the reserved prompt variable {%s_path}; rename the node (reserved: %s, subtask*)",
						n.ID, n.ID, strings.Join(reservedStems, ", "))
				}
			}
		}

		// kind and its required fields
		if n.Kind == "" {
			pos, p := at("kind")
			v.add(pos, p, true, "%s has no kind; want one of: %s", label(n), strings.Join(kinds, ", "))
			continue
		}
		if pos, p := at("kind"); !v.enum(pos, p, label(n)+" kind", n.Kind, kinds) {
			continue
		}
		v.required(n, path)
		v.nodeFields(n, path)
	}
}

// required reports the fields a kind cannot run without.
func (v *validator) required(n *Node, path string) {
	need := map[string][]struct{ key, value string }{
		KindAgent:     {{"role_file", n.RoleFile}},
		KindEvaluator: {{"role", n.Role}, {"role_file", n.RoleFile}},
		KindChecks:    {{"checker", n.Checker}},
		KindTool:      {{"tool", n.Tool}},
		KindHITL:      {{"signal", n.Signal}},
		KindPublish:   {{"policy", n.Policy}},
	}
	for _, r := range need[n.Kind] {
		if r.value == "" {
			v.add(n.Pos, path+"."+r.key, true, "%s (%s) requires %s", label(n), n.Kind, r.key)
		}
	}
}

func (v *validator) nodeFields(n *Node, path string) {
	f := v.f
	at := func(key string) (Pos, string) { return n.pos(key), path + "." + key }
	enum := func(key, value string, allowed []string) bool {
		pos, p := at(key)
		return v.enum(pos, p, label(n)+" "+key, value, allowed)
	}
	enum("session_scope", n.SessionScope, sessionScopes)
	enum("output_artifact", n.OutputArtifact, outputArtifacts)
	enum("gate_severity", n.GateSeverity, severities)
	enum("checker", n.Checker, checkers)
	enum("signal", n.Signal, signals)
	enum("policy", n.Policy, publishingPolicies)
	profileKnown := enum("permission_profile", n.PermissionProfile, permissionProfiles)
	if !fold.KnownFormat(n.SubmitFormat) {
		// docs/contracts.md § The fold and submit_format: an unknown value
		// warns and behaves like the default.
		pos, p := at("submit_format")
		v.add(pos, p, false, "%s submit_format %q is not json or text; it folds like the default", label(n), n.SubmitFormat)
	}
	if n.OutputSchema != "" {
		pos, p := at("output_schema")
		if _, err := outputschema.Compile([]byte(n.OutputSchema)); err != nil {
			v.add(pos, p, true, "%s %v", label(n), err)
		} else if open := openObjects(n.OutputSchema); len(open) > 0 {
			// reference.md § agent node: every object must set
			// additionalProperties: false (Codex 400s otherwise); fatal
			// for a node routed to Codex (configLayer), a warning here.
			v.add(pos, p, false, "%s output_schema has objects without additionalProperties: false (at %s); Codex rejects such a schema, so the node fails on every Codex run",
				label(n), strings.Join(open, ", "))
		}
	}
	if cp := n.Context; cp != nil {
		for _, id := range cp.Steps {
			if v.f.Node(id) == nil {
				pos, p := at("context.steps")
				v.add(pos, p, true, "%s context.steps names %q, which is not a node of this flow", label(n), id)
			}
		}
	}
	if vd := n.Verdicts; vd != nil {
		if len(vd.Allowed) == 0 {
			pos, p := at("verdicts")
			v.add(pos, p, true, "%s verdicts.allowed is empty; list the verdict tokens the step may submit", label(n))
		}
		for _, tok := range vd.Allowed {
			if n.Kind == KindEvaluator && tok != "accept" && tok != "rework" {
				pos, p := at("verdicts.allowed")
				v.add(pos, p, true, "%s verdicts.allowed has %q; an evaluator's verdicts are its outcomes: accept, rework", label(n), tok)
			}
		}
		if vd.Channel != "" && vd.Channel != "body" && vd.Channel != "part" {
			pos, p := at("verdicts.channel")
			v.add(pos, p, true, "%s verdicts.channel %q is not allowed; valid: body, part", label(n), vd.Channel)
		}
	}

	// Effective session scope and permission profile.
	scope := n.SessionScope
	if scope == "" && n.Kind == KindEvaluator && f.Defaults != nil && f.Defaults.Evaluator != nil {
		scope = f.Defaults.Evaluator.SessionScope
	}
	if scope == "" {
		scope = "fresh_disposable"
	}
	if n.ResumeRoleFile != "" && scope == "fresh_disposable" {
		pos, p := at("resume_role_file")
		v.add(pos, p, true, "%s has resume_role_file but session_scope fresh_disposable never resumes a session; drop it or use editing_lineage/resume_own_lineage", label(n))
	}
	switch n.Kind {
	case KindEvaluator:
		if n.SessionScope == "editing_lineage" {
			pos, p := at("session_scope")
			v.add(pos, p, true, "%s is an evaluator with session_scope editing_lineage; an evaluator never joins an author's editing session", label(n))
		}
		if profileKnown && n.PermissionProfile != "" && n.PermissionProfile != ReadOnly {
			pos, p := at("permission_profile")
			v.add(pos, p, true, "%s is an evaluator with permission_profile %q; evaluators are forced read-only", label(n), n.PermissionProfile)
		}
	case KindAgent:
		profile := n.PermissionProfile
		if profile == "" {
			profile = f.PermissionCeiling
		}
		if profileKnown && n.PermissionProfile != "" && rank(f.PermissionCeiling) >= 0 && rank(n.PermissionProfile) > rank(f.PermissionCeiling) {
			pos, p := at("permission_profile")
			v.add(pos, p, true, "%s permission_profile %q exceeds the flow permission_ceiling %q", label(n), n.PermissionProfile, f.PermissionCeiling)
		}
		if n.GitEvidence != nil && *n.GitEvidence && profile == WorkspaceWrite {
			pos, p := at("git_evidence")
			v.add(pos, p, true, "%s asks for git_evidence but is workspace-write (it already has a shell); drop git_evidence or make the node read-only", label(n))
		}
		v.lineage(n, path)
		for _, ap := range ScreenArgs(n.ExtraArgs) {
			pos, p := at("extra_args")
			v.add(pos, fmt.Sprintf("%s[%d]", p, ap.Index), true, "%s extra_args[%d] %s", label(n), ap.Index, ap.Message)
		}
	}

	if n.OutputFile != "" {
		pos, p := at("output_file")
		if !portableSegment(n.OutputFile) {
			v.add(pos, p, true, "%s output_file %q must be one portable file name: no path separator, no \"..\", not starting with '.'", label(n), n.OutputFile)
		}
		if n.OutputArtifact != "" {
			v.add(pos, p, true, "%s sets both output_file and output_artifact; they are mutually exclusive", label(n))
		}
	}
	if n.Manifest != "" {
		pos, p := at("manifest")
		if !portableSegment(n.Manifest) {
			v.add(pos, p, true, "%s manifest %q must be one portable file name: no path separator, no \"..\", not starting with '.'", label(n), n.Manifest)
		}
		if n.Checker != "citation" {
			v.add(pos, p, false, "%s sets manifest but its checker is %q; manifest is read by the citation checker only", label(n), n.Checker)
		}
	}
	for _, t := range []struct {
		key string
		val *int
	}{{"timeout_seconds", n.TimeoutSeconds}, {"timeout_s", n.TimeoutS}} {
		if t.val != nil && *t.val <= 0 {
			pos, p := at(t.key)
			v.add(pos, p, true, "%s %s is %d; want a positive number of seconds", label(n), t.key, *t.val)
		}
	}
	if n.MaxReworkPerStage != nil && *n.MaxReworkPerStage < 0 {
		pos, p := at("max_rework_per_stage")
		v.add(pos, p, true, "%s max_rework_per_stage is %d; want >= 0", label(n), *n.MaxReworkPerStage)
	}
	if n.Skills != nil && len(n.Skills) == 0 {
		pos, p := at("skills")
		v.add(pos, p, true, "%s skills is an empty list; omit the key to turn skills off", label(n))
	}
	for i, sk := range n.Skills {
		// docs/contracts.md § Per-node overrides: skills — one portable
		// directory name each.
		if !portableSegment(sk) {
			pos, p := at("skills")
			v.add(pos, fmt.Sprintf("%s[%d]", p, i), true, "%s skills[%d] %q must be one portable directory name (letters, digits, '.', '_', '-'; no separator, no \"..\"): the name of .claude/skills/<name>/", label(n), i, sk)
		}
	}
	if len(n.Skills) > 0 && n.AllowSkills != nil && !*n.AllowSkills {
		pos, p := at("allow_skills")
		v.add(pos, p, true, "%s sets skills and allow_skills: false; a node cannot both require skills and forbid them (drop one)", label(n))
	}
	if n.Kind == KindTool && n.Tool != "" && !portableSegment(n.Tool) {
		pos, p := at("tool")
		v.add(pos, p, true, "%s tool %q must be a registered tool name (one file name in the tools directory), not a path", label(n), n.Tool)
	}
	if n.When != nil {
		pos, p := at("when.fact")
		switch {
		case n.When.Fact == "":
			pos, p = at("when")
			v.add(pos, p, true, "%s when requires a fact", label(n))
		case !strings.HasPrefix(n.When.Fact, "derived.") && !strings.HasPrefix(n.When.Fact, "config."):
			v.add(pos, p, true, "%s when.fact %q must be namespaced derived.* or config.*", label(n), n.When.Fact)
		case !slices.Contains(knownFacts, n.When.Fact):
			// reference.md § Conditional nodes: the names are a closed set
			// and worc resolves any other to false without a word.
			v.add(pos, p, false, "%s when.fact %q is not a known fact (known: %s); worc resolves an unknown fact to false silently, so a typo reads like a working gate",
				label(n), n.When.Fact, strings.Join(knownFacts, ", "))
		case n.When.Fact == "config.external_research":
			v.add(pos, p, false, "%s when.fact config.external_research is %v in this flow (it is true exactly when the flow declares network_policy), whatever the task: this predicate never changes from run to run",
				label(n), f.NetworkPolicy != "")
		}
	}
	if n.Kind == KindPublish && n.Policy != "" && f.Publishing != "" && n.Policy != f.Publishing {
		pos, p := at("policy")
		v.add(pos, p, false, "%s policy %q differs from the flow's publishing %q", label(n), n.Policy, f.Publishing)
	}
}

// rank orders permission profiles; -1 for an unknown one.
func rank(profile string) int {
	return slices.Index(permissionProfiles, profile)
}

// lineage checks lineage_affinity: one hop to an editing_lineage owner.
func (v *validator) lineage(n *Node, path string) {
	if n.LineageAffinity == "" {
		return
	}
	pos, p := n.pos("lineage_affinity"), path+".lineage_affinity"
	t := v.f.Node(n.LineageAffinity)
	switch {
	case n.LineageAffinity == n.ID:
		v.add(pos, p, true, "%s lineage_affinity names itself", label(n))
	case t == nil:
		v.add(pos, p, true, "%s lineage_affinity %q names no node", label(n), n.LineageAffinity)
	case t.Kind != KindAgent || t.SessionScope != "editing_lineage":
		v.add(pos, p, true, "%s lineage_affinity %q must name an agent with session_scope editing_lineage", label(n), n.LineageAffinity)
	case t.LineageAffinity != "":
		v.add(pos, p, true, "%s lineage_affinity %q names a node that has an affinity of its own (%q); chains are not allowed", label(n), n.LineageAffinity, t.LineageAffinity)
	case n.Provider != "" && t.Provider != "" && n.Provider != t.Provider:
		// flow-authoring.md § Session scope: a session cannot resume across providers.
		v.add(pos, p, true, "%s pins provider %q but joins the session of %q, which pins %q; a session cannot resume across providers (pin the same provider or drop one pin)",
			label(n), n.Provider, t.ID, t.Provider)
	}
}

// contained reports whether p is relative and has no ".." segment, under
// both slash conventions (a flow written on Windows must not escape either).
func contained(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) || filepath.IsAbs(p) || (len(p) > 1 && p[1] == ':') {
		return false
	}
	for _, seg := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return false
		}
	}
	return true
}

func (v *validator) edges() {
	f := v.f
	type key struct{ from, outcome string }
	seen := map[key]int{}
	for i := range f.Edges {
		e := &f.Edges[i]
		path := fmt.Sprintf("edges[%d]", i)
		at := func(k string) (Pos, string) { return e.pos(k), path + "." + k }

		var from *Node
		for _, end := range []struct{ key, id string }{{"from", e.From}, {"to", e.To}} {
			pos, p := at(end.key)
			switch n := f.Node(end.id); {
			case end.id == "":
				v.add(pos, p, true, "%s requires %s", path, end.key)
			case n == nil:
				v.add(pos, p, true, "edge %s %q: no node has that id", end.key, end.id)
			case end.key == "from":
				from = n
			}
		}

		if from != nil {
			if from.Kind == KindPublish {
				pos, p := at("from")
				v.add(pos, p, true, "edge from %q: a publish node is terminal; no edge may leave it", e.From)
			} else if e.Outcome != "" && !outcomeAllowed(from, e.Outcome) {
				pos, p := at("outcome")
				v.add(pos, p, true, "edge from %q (%s): outcome %q is not allowed; want %s", e.From, from.Kind, e.Outcome, describeOutcomes(from))
			} else if e.Outcome == "" && approval(from) {
				v.add(e.Pos, path, true, "edge from %q: a hitl approval node branches on the human's answer; give it route:approve and route:deny edges instead of an unconditional one", e.From)
			}
			k := key{e.From, e.Outcome}
			if prev, dup := seen[k]; dup {
				what := fmt.Sprintf("outcome %q", e.Outcome)
				if e.Outcome == "" {
					what = "an unconditional edge"
				}
				v.add(e.Pos, path, true, "node %q already has %s (edges[%d], to %q); each outcome routes to one place", e.From, what, prev, f.Edges[prev].To)
			} else {
				seen[k] = i
			}
		}

		if (e.Outcome == "fail" || e.Outcome == "rework") && e.Loop == "" && e.Budget == nil {
			pos, p := at("outcome")
			v.add(pos, p, true, "edge %s -> %s on %s is unbounded: name a loop declared in budgets or set an inline budget", e.From, e.To, e.Outcome)
		}
		if e.Loop != "" {
			if _, ok := f.Budgets[e.Loop]; !ok {
				pos, p := at("loop")
				v.add(pos, p, true, "edge %s -> %s: loop %q is not declared in budgets (declared: %s)", e.From, e.To, e.Loop, budgetNames(f))
				v.ps[len(v.ps)-1].dependsOn = "budgets." + e.Loop
			}
			if e.Budget != nil {
				pos, p := at("budget")
				v.add(pos, p, true, "edge %s -> %s sets both loop %q and an inline budget; use one", e.From, e.To, e.Loop)
			}
		}
		if e.Budget != nil && *e.Budget < 1 {
			pos, p := at("budget")
			v.add(pos, p, true, "edge %s -> %s: budget is %d; valid: an iteration cap of at least 1 (%s)", e.From, e.To, *e.Budget, budgetWhy(*e.Budget))
		}
	}
}

// approval reports whether n is a hitl node asking for an approval.
func approval(n *Node) bool { return n.Kind == KindHITL && n.Signal == "approval" }

// approvalRoutes requires both answers of every hitl approval node to be
// routed (reference.md § Edges: it "needs route:approve / route:deny edges").
func (v *validator) approvalRoutes() {
	type route struct{ from, outcome string }
	routed := map[route]bool{}
	for _, e := range v.f.Edges {
		routed[route{e.From, e.Outcome}] = true
	}
	for i := range v.f.Nodes {
		n := &v.f.Nodes[i]
		if !approval(n) || n.ID == "" {
			continue
		}
		for _, want := range []string{"route:approve", "route:deny"} {
			if !routed[route{n.ID, want}] {
				v.add(n.pos("signal"), fmt.Sprintf("nodes[%d].signal", i), true,
					"%s asks for an approval but has no %s edge; an approval node needs both route:approve and route:deny edges", label(n), want)
			}
		}
	}
}

// budgetWhy says why a budget below 1 is refused.
func budgetWhy(n int) string {
	if n == 0 {
		return "0 would let the loop run no round at all: its first rework or fail would park the run; to have no loop, remove the edge"
	}
	return "a budget counts rounds"
}

func budgetNames(f *Flow) string {
	if len(f.Budgets) == 0 {
		return "none"
	}
	names := make([]string, 0, len(f.Budgets))
	for n := range f.Budgets {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// outcomeAllowed reports whether n may emit outcome (reference.md § Edges).
func outcomeAllowed(n *Node, outcome string) bool {
	if label, ok := strings.CutPrefix(outcome, "route:"); ok {
		if approval(n) {
			return label == "approve" || label == "deny"
		}
		return label != ""
	}
	if approval(n) {
		return false
	}
	if n.Verdicts != nil && n.Kind == KindAgent {
		// A verdict contract makes an agent's verdict its outcome.
		return slices.Contains(n.Verdicts.Allowed, outcome)
	}
	return slices.Contains(kindOutcomes[n.Kind], outcome)
}

func describeOutcomes(n *Node) string {
	own := kindOutcomes[n.Kind]
	if n.Verdicts != nil && n.Kind == KindAgent {
		own = n.Verdicts.Allowed
	}
	switch {
	case approval(n):
		return "route:approve or route:deny (an approval emits one of them)"
	case len(own) == 0:
		return "no outcome (edges from " + n.Kind + " nodes are unconditional) or route:<label>"
	}
	return strings.Join(own, ", ") + " or route:<label>"
}

// graph checks the entry node, forward reachability and that every node
// reaches a terminal.
func (v *validator) graph() {
	f := v.f
	// The graph is only defined once every node has its own id; until then
	// the id problems say what to fix and graph problems would be noise.
	ids := map[string]bool{}
	for _, n := range f.Nodes {
		if n.ID == "" || ids[n.ID] {
			return
		}
		ids[n.ID] = true
	}
	if len(f.Nodes) == 0 {
		return
	}
	incoming := map[string]bool{}
	out := map[string][]string{}
	in := map[string][]string{}
	for _, e := range f.Edges {
		if f.Node(e.From) == nil || f.Node(e.To) == nil {
			continue
		}
		incoming[e.To] = true
		out[e.From] = append(out[e.From], e.To)
		in[e.To] = append(in[e.To], e.From)
	}
	var entries []string
	for _, n := range f.Nodes {
		if !incoming[n.ID] {
			entries = append(entries, n.ID)
		}
	}
	switch len(entries) {
	case 0:
		v.add(f.pos("nodes"), "nodes", true, "no entry node: every node has an incoming edge; exactly one node must have none")
	case 1:
		reached := walk(entries[0], out)
		for i := range f.Nodes {
			n := &f.Nodes[i]
			if !reached[n.ID] {
				v.add(n.Pos, fmt.Sprintf("nodes[%d]", i), true, "%s is not reachable from the entry node %q", label(n), entries[0])
			}
		}
	default:
		v.add(f.pos("nodes"), "nodes", true, "%d entry nodes (%s): exactly one node may have no incoming edge", len(entries), strings.Join(entries, ", "))
	}

	var terminals []string
	for _, n := range f.Nodes {
		if n.Kind == KindPublish || len(out[n.ID]) == 0 {
			terminals = append(terminals, n.ID)
		}
	}
	// One reverse walk from every terminal at once: linear in the graph
	// (a walk per terminal was quadratic on a flow of many terminals).
	reaches := walkFrom(terminals, in)
	for i := range f.Nodes {
		n := &f.Nodes[i]
		if !reaches[n.ID] {
			v.add(n.Pos, fmt.Sprintf("nodes[%d]", i), true, "%s cannot reach a terminal (a publish node or a node with no outgoing edge): every path from it loops", label(n))
		}
	}
}

// walk returns the ids reachable from start along next, start included.
func walk(start string, next map[string][]string) map[string]bool {
	return walkFrom([]string{start}, next)
}

// walkFrom returns the ids reachable along next from any of starts,
// starts included.
func walkFrom(starts []string, next map[string][]string) map[string]bool {
	seen := make(map[string]bool, len(starts))
	var stack []string
	for _, s := range starts {
		if !seen[s] {
			seen[s] = true
			stack = append(stack, s)
		}
	}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, to := range next[id] {
			if !seen[to] {
				seen[to] = true
				stack = append(stack, to)
			}
		}
	}
	return seen
}

func (v *validator) supervisor() {
	s := v.f.Supervisor
	if s == nil {
		return
	}
	if s.Observe != nil {
		v.enum(v.f.pos("supervisor.observe.mode"), "supervisor.observe.mode", "supervisor.observe.mode", s.Observe.Mode, observeModes)
	}
}

func (v *validator) decomposition() {
	f := v.f
	d := f.Decomposition
	if d == nil {
		return
	}
	switch n := f.Node(d.ProposedBy); {
	case d.ProposedBy == "":
		v.add(f.pos("decomposition"), "decomposition.proposed_by", true, "decomposition requires proposed_by (an agent node id)")
	case n == nil || n.Kind != KindAgent:
		v.add(f.pos("decomposition.proposed_by"), "decomposition.proposed_by", true, "decomposition.proposed_by %q must name an agent node", d.ProposedBy)
	}
	if len(d.SubFlow) == 0 {
		v.add(f.pos("decomposition"), "decomposition.sub_flow", true, "decomposition requires a non-empty sub_flow (node ids)")
	}
	for i, id := range d.SubFlow {
		if f.Node(id) == nil {
			v.add(f.pos("decomposition.sub_flow"), fmt.Sprintf("decomposition.sub_flow[%d]", i), true, "decomposition.sub_flow names %q, which is no node", id)
		}
	}
	if d.SharedBudget != "" {
		if _, ok := f.Budgets[d.SharedBudget]; !ok {
			v.add(f.pos("decomposition.shared_budget"), "decomposition.shared_budget", true,
				"decomposition.shared_budget %q is not declared in budgets (declared: %s)", d.SharedBudget, budgetNames(f))
			v.ps[len(v.ps)-1].dependsOn = "budgets." + d.SharedBudget
		}
	}
	v.subFlowRegion(d)
}

// subFlowRegion checks that decomposition.sub_flow is one connected region
// that the graph enters from proposed_by and leaves by a forward edge
// (reference.md § Validation 1: "its sub_flow region is connected (an edge
// from proposed_by into it, and a forward exit edge out of it)").
func (v *validator) subFlowRegion(d *Decomposition) {
	f := v.f
	region := map[string]bool{}
	for _, id := range d.SubFlow {
		if f.Node(id) == nil {
			return // reported above
		}
		region[id] = true
	}
	if len(region) == 0 {
		return
	}
	pos, path := f.pos("decomposition.sub_flow"), "decomposition.sub_flow"
	if d.ProposedBy != "" && region[d.ProposedBy] {
		v.add(pos, path, true, "decomposition.sub_flow contains proposed_by %q; the proposing node runs once, before the per-subtask region", d.ProposedBy)
		return
	}
	entered, exits := false, false
	links := map[string][]string{} // undirected, inside the region
	for _, e := range f.Edges {
		switch {
		case region[e.From] && region[e.To]:
			links[e.From] = append(links[e.From], e.To)
			links[e.To] = append(links[e.To], e.From)
		case e.From == d.ProposedBy && region[e.To]:
			entered = true
		case region[e.From] && !region[e.To] && e.Outcome != "fail" && e.Outcome != "rework":
			exits = true
		}
	}
	if reached := walk(d.SubFlow[0], links); len(reached) != len(region) {
		var apart []string
		for _, id := range d.SubFlow {
			if !reached[id] {
				apart = append(apart, id)
			}
		}
		v.add(pos, path, true, "decomposition.sub_flow is not one connected region: %s has no edge path to %q inside it", strings.Join(apart, ", "), d.SubFlow[0])
	}
	if d.ProposedBy != "" && f.Node(d.ProposedBy) != nil && !entered {
		v.add(pos, path, true, "decomposition.sub_flow is not entered from proposed_by %q: add an edge from it to the region's first node", d.ProposedBy)
	}
	if !exits {
		v.add(pos, path, true, "decomposition.sub_flow has no forward exit: no edge other than fail/rework leaves the region, so the last subtask cannot continue the flow")
	}
}
