package flow

// Pos is a 1-based source position (line, column) in a flow file.
// The zero Pos means "unknown" (a Flow built in code rather than parsed).
type Pos struct {
	Line, Col int
}

// Node kinds (reference.md § Node kinds).
const (
	KindAgent     = "agent"
	KindEvaluator = "evaluator"
	KindChecks    = "checks"
	KindTool      = "tool"
	KindHITL      = "hitl"
	KindPublish   = "publish"
)

// Permission profiles, ordered read-only < workspace-write.
const (
	ReadOnly       = "read-only"
	WorkspaceWrite = "workspace-write"
)

// Flow is the `flow:` document of one worc flow file, read unchanged.
//
// String fields hold the YAML value as written ("" when the key is absent
// or null); optional scalars whose absence differs from their zero value are
// pointers. Fields maps every key present in the file, as a dotted path
// relative to the `flow:` block ("name", "budgets.test_fix",
// "supervisor.observe.mode"), to the position of that key, so problems can
// point at file:line:col.
type Flow struct {
	File string // the path given to Parse; used in problems

	Name              string
	TaskType          string
	PermissionCeiling string // read-only | workspace-write
	OutputPolicy      string // code_change | repository_document | private_control_workspace_report
	Publishing        string // pull_request | documentation_pull_request | local_artifact | private_control_workspace_report | none
	NetworkPolicy     string // "" (no network) | advisories | research

	Defaults      *Defaults
	Nodes         []Node
	Edges         []Edge
	Budgets       map[string]int // loop name → iteration cap
	Supervisor    *Supervisor
	Decomposition *Decomposition
	// SubmitFormat is the flow-wide fold mode of every agent and evaluator
	// (a Stratus extension: docs/contracts.md § The fold and submit_format,
	// "BP-global").
	SubmitFormat string
	// CheckPolicy is what happens when a step's ctx-dir cannot be resolved
	// (docs/contracts.md § Files are the server's job): "" or "lenient" skips
	// the files with a warning, "strict" fails the step. A Stratus extension.
	CheckPolicy string

	Pos    Pos            // the `flow:` key
	Fields map[string]Pos // key path → key position

	// byID indexes Nodes by id (the first node of each id), built by
	// Parse so that Node is O(1) on a large flow; read-only afterwards.
	byID map[string]int
}

// Defaults is `flow.defaults`; worc allows only the evaluator block.
type Defaults struct {
	Evaluator *EvaluatorDefaults
}

// EvaluatorDefaults is `flow.defaults.evaluator`: values applied to every
// evaluator node that omits them.
type EvaluatorDefaults struct {
	SessionScope      string
	PermissionProfile string
	MaxReworkPerStage *int
	GateSeverity      string
}

// Supervisor is `flow.supervisor`: flow-local wording for the supervisor
// layer above the graph (not a node). Prompt paths are flow-dir-relative.
type Supervisor struct {
	RoleFile         string
	FinalizeRoleFile string
	HandoffRoleFile  string
	EmitFollowUps    *bool
	Observe          *Observe
}

// Observe is `flow.supervisor.observe`.
type Observe struct {
	Mode string // all | selected | events | none
}

// Decomposition is `flow.decomposition`: which agent may propose a split,
// the per-subtask region, and the budget shared across subtasks.
type Decomposition struct {
	ProposedBy   string
	SubFlow      []string
	SharedBudget string
}

// ContextPolicy filters the prior-step pointers of a node's prompt payload.
type ContextPolicy struct {
	Steps []string // node ids; empty list: none
}

// Verdicts is a node's verdict contract
// (docs/contracts.md § The in-process twin: `channel: "body"` compares the
// final body, `channel: "part"` a staged `verdict` part): the submitted
// string must be one of Allowed.
type Verdicts struct {
	Allowed []string
	Channel string // body (default) | part
}

// When is a node's `when: {fact, equals?}` predicate.
type When struct {
	Fact   string
	Equals any // nil when absent; otherwise a string, int64, float64 or bool
}

// HITLGrant is an agent's `hitl: {allow_question, allow_approval}`.
type HITLGrant struct {
	AllowQuestion bool
	AllowApproval bool
}

// Node is one entry of `flow.nodes`, any kind. Which fields a kind may set
// is fixed by reference.md (Parse rejects the others); the comment on each
// group names the kinds that carry it.
type Node struct {
	ID   string
	Kind string // agent | evaluator | checks | tool | hitl | publish
	When *When  // any kind: run the node only when the fact holds

	// agent and evaluator
	RoleFile          string // flow-dir-relative prompt path
	ResumeRoleFile    string
	SessionScope      string // fresh_disposable | editing_lineage | resume_own_lineage
	PermissionProfile string // "" → resolved from the ceiling (agents) or read-only (evaluators)
	NetworkAccess     *bool
	GitEvidence       *bool
	Provider          string
	Model             string
	Reasoning         string

	// agent
	LineageAffinity string
	OutputArtifact  string // enriched_spec | plan | summary | report
	OutputFile      string
	OutputSchema    string // JSON-encoded schema
	BestEffort      bool
	HITL            *HITLGrant
	ExtraArgs       []string
	Skills          []string
	AllowSkills     *bool

	// agent and tool: wall-clock seconds per attempt
	TimeoutSeconds *int

	// evaluator
	Role              string
	Blocking          *bool // nil → true
	MaxReworkPerStage *int  // nil → 1
	GateSeverity      string

	// checks
	Checker  string // command_profile | citation | dependency_scan
	Manifest string

	// tool
	Tool string
	Args map[string]any // flat: string, int64, float64 or bool values

	// hitl
	Signal string // question | approval
	// Question is what a hitl node asks, rendered like a role file with
	// the same variables and shown in the wait line, the run viewer and the
	// reply commands. A Stratus extension of worc's format (worc rejects the
	// key); "" words the request as before.
	Question string
	TimeoutS *int

	// publish
	Policy string

	// agent and evaluator, Stratus extensions
	// (docs/contracts.md § The fold and submit_format, § Output is a tool
	// call): the fold mode of this step ("", "json", "text"), and its
	// verdict contract.
	SubmitFormat string
	Verdicts     *Verdicts
	// Context is the node's context policy: which prior steps' outputs its
	// prompt payload points at (docs/contracts.md § Input is a fetch: the
	// payload's context.steps, filtered by this policy); nil means every
	// prior step.
	Context *ContextPolicy

	Index  int            // position in Flow.Nodes
	Pos    Pos            // the node's first key
	Fields map[string]Pos // key path ("role_file", "when.fact", "args.min_chars") → key position
}

// Edge is one entry of `flow.edges`. Outcome "" is unconditional. A loop
// names a budget in Flow.Budgets; Budget is an inline cap for this edge.
type Edge struct {
	From, To, Outcome, Loop string
	Budget                  *int

	Index  int            // position in Flow.Edges
	Pos    Pos            // the edge's first key
	Fields map[string]Pos // "from", "to", "outcome", "loop", "budget" → key position
}

// Node returns the node with the given id, or nil.
func (f *Flow) Node(id string) *Node {
	// The index answers for a parsed flow; a flow built or changed in code
	// after Parse falls back to the scan.
	if i, ok := f.byID[id]; ok && i < len(f.Nodes) && f.Nodes[i].ID == id {
		return &f.Nodes[i]
	}
	for i := range f.Nodes {
		if f.Nodes[i].ID == id {
			return &f.Nodes[i]
		}
	}
	return nil
}

// Out returns the edges leaving id, in flow order.
func (f *Flow) Out(id string) []Edge {
	var out []Edge
	for _, e := range f.Edges {
		if e.From == id {
			out = append(out, e)
		}
	}
	return out
}

// Entry returns the flow's entry node, the one node with no incoming edge,
// or nil when there is not exactly one (Validate reports that).
func (f *Flow) Entry() *Node {
	incoming := make(map[string]bool, len(f.Edges))
	for _, e := range f.Edges {
		incoming[e.To] = true
	}
	var entry *Node
	for i := range f.Nodes {
		if incoming[f.Nodes[i].ID] {
			continue
		}
		if entry != nil {
			return nil
		}
		entry = &f.Nodes[i]
	}
	return entry
}

// pos returns the position of the key at path, falling back to the flow.
func (f *Flow) pos(path string) Pos {
	if p, ok := f.Fields[path]; ok {
		return p
	}
	return f.Pos
}

// pos returns the position of the key at path, falling back to the node.
func (n *Node) pos(path string) Pos {
	if p, ok := n.Fields[path]; ok {
		return p
	}
	return n.Pos
}

// pos returns the position of the key at path, falling back to the edge.
func (e *Edge) pos(path string) Pos {
	if p, ok := e.Fields[path]; ok {
		return p
	}
	return e.Pos
}
