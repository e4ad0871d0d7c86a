package supervisor

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/findings"
	"github.com/stratusflow/stratus/internal/flow"
	"github.com/stratusflow/stratus/internal/report"
)

// Packet budgets, in characters
// (docs/contracts.md § What the supervisor layer does).
const (
	DigestBudget          = 8000  // the whole digest of the steps' own outputs
	OutputHeadBudget      = 1000  // one agent step's share of the digest
	FinalFindingText      = 1200  // each free-text field of a finding on a node's final verdict
	SupersededFindingText = 300   // … on a verdict a later pass superseded
	FinalStepBudget       = 40000 // the findings of one final verdict
	SupersededStepBudget  = 8000  // the findings of one superseded verdict
	SupersededTotalBudget = 24000 // every superseded verdict's findings together
	ToolDataBudget        = 1000  // a tool step's data object, as JSON text
	StdoutHeadBudget      = 800   // a tool step's stdout head
	ChangedPathsBudget    = 200   // changed paths listed; the rest counted
)

// Packet is packet.json, the deterministic facts the finalize turn reads
// (docs/contracts.md § What the supervisor layer does): built from the
// recorded node runs and each node's own output, never from the observations,
// so it is a few kilobytes however long the run was.
type Packet struct {
	Task      PacketTask        `json:"task"`
	Flow      string            `json:"flow"`
	RunID     string            `json:"run_id"`
	Changes   PacketChanges     `json:"changes"`
	Steps     []PacketStep      `json:"steps"`
	Accepted  []report.FollowUp `json:"accepted_findings"` // merged into the report's follow-ups for you: do not restate
	Skipped   []string          `json:"skipped,omitempty"`
	Fallbacks []string          `json:"fallbacks,omitempty"`
	// Digest is the head of each agent step's own output, in step order,
	// bounded to DigestBudget characters in all.
	Digest string `json:"digest"`
}

// PacketTask names the task.
type PacketTask struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Path  string `json:"path,omitempty"`
}

// PacketChanges is the work dir's changed paths (never the diff).
type PacketChanges struct {
	Git        bool     `json:"git"`
	Paths      []string `json:"paths,omitempty"`
	PathsTotal int      `json:"paths_total"`
	Note       string   `json:"note,omitempty"`
}

// PacketStep is one executed step, in order.
type PacketStep struct {
	StepRef  string `json:"step_ref"`
	Node     string `json:"node"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Verdict  string `json:"verdict,omitempty"` // the outcome it routed on, repeated on the step that produced it
	Reason   string `json:"reason,omitempty"`
	Attempts int    `json:"attempts"`
	Terminal string `json:"terminal,omitempty"`
	Provider string `json:"provider,omitempty"`
	// OutputPath is the node's projection in the ctx dir.
	OutputPath string `json:"output_path,omitempty"`
	Note       string `json:"note,omitempty"`
	// Evaluator passes.
	Superseded      bool               `json:"superseded,omitempty"` // a later pass of the same node exists
	Gate            string             `json:"gate_severity,omitempty"`
	Findings        []findings.Finding `json:"findings,omitempty"`
	FindingsTotal   int                `json:"findings_total,omitempty"`
	FindingsOmitted int                `json:"findings_omitted,omitempty"`
	AcceptedOpen    bool               `json:"accepted_with_open_findings,omitempty"`
	// Tool steps.
	Data       any    `json:"data,omitempty"`
	StdoutHead string `json:"stdout_head,omitempty"`
	// Checks steps.
	Checks []PacketCheck `json:"checks,omitempty"`
}

// PacketCheck is one command a checks step ran.
type PacketCheck struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	ExitCode int    `json:"exit_code"`
}

// BuildPacket builds the packet of f. It is a pure function of f: the
// publish step, whose finalize hook builds the packet, is shown pending
// with a note saying that is expected.
func BuildPacket(f *report.Facts) Packet {
	p := Packet{
		Task:     PacketTask{ID: f.Run.TaskID, Title: f.Run.TaskTitle, Path: f.Run.TaskPath},
		Flow:     f.Run.Flow,
		RunID:    f.Run.ID,
		Changes:  PacketChanges{Git: f.Changes.Git, PathsTotal: len(f.Changes.Paths), Note: f.Changes.Note},
		Steps:    []PacketStep{},
		Accepted: report.FollowUps(f.Steps),
	}
	if p.Accepted == nil {
		p.Accepted = []report.FollowUp{}
	}
	p.Changes.Paths = f.Changes.Paths
	if len(p.Changes.Paths) > ChangedPathsBudget {
		p.Changes.Paths = p.Changes.Paths[:ChangedPathsBudget]
	}
	latest := map[string]int{}
	for i, l := range f.Steps {
		latest[l.Step.Node] = i
	}
	supersededLeft := SupersededTotalBudget
	var digest strings.Builder
	for i, l := range f.Steps {
		s := PacketStep{StepRef: l.Step.StepRef, Node: l.Step.Node, Kind: l.Step.Kind, Status: l.Step.Status,
			Verdict: l.Step.Verdict, Reason: l.Reason, Attempts: len(l.Attempts)}
		if n := len(l.Attempts); n > 0 {
			s.Terminal = l.Attempts[n-1].Terminal
			s.Provider = l.Provider(l.Attempts[n-1])
		}
		if l.Step.Verdict == "skipped" {
			p.Skipped = append(p.Skipped, fmt.Sprintf("%s: %s", l.Step.StepRef, orText(l.Reason, "skipped")))
		}
		switch l.Step.Kind {
		case flow.KindPublish:
			if l.Step.Status == stratus.StepRunning {
				s.Status = "pending"
				s.Note = "pending: this publish step's finalize hook built this packet, so it has not ended yet; that is expected"
			}
		case flow.KindEvaluator:
			s.Superseded = latest[l.Step.Node] != i
			s.Gate = l.Gate
			s.AcceptedOpen = l.AcceptedOpen()
			text, budget := FinalFindingText, FinalStepBudget
			if s.Superseded {
				text, budget = SupersededFindingText, min(SupersededStepBudget, supersededLeft)
			}
			s.FindingsTotal = len(l.Findings)
			used := 0
			for _, fd := range l.Findings {
				fd.What, fd.Fix, fd.Path = cut(fd.What, text), cut(fd.Fix, text), cut(fd.Path, text)
				b, _ := json.Marshal(fd)
				if used+len(b) > budget {
					s.FindingsOmitted = s.FindingsTotal - len(s.Findings)
					break
				}
				used += len(b)
				s.Findings = append(s.Findings, fd)
			}
			if s.Superseded {
				supersededLeft -= used
			}
			if l.FindingsErr != "" {
				s.Note = "the report broke the findings contract: " + l.FindingsErr
			}
		case flow.KindTool:
			s.Data, s.StdoutHead = toolFacts(l.Final)
			s.OutputPath = f.CtxFile(l.Step.Node)
		case flow.KindChecks:
			s.Checks = checkFacts(l.Final)
			s.OutputPath = f.CtxFile(l.Step.Node)
		default:
			if l.Final != nil {
				s.OutputPath = f.CtxFile(l.Step.Node)
				head := fmt.Sprintf("### %s (%s, %s)\n%s\n\n", l.Step.StepRef, l.Step.Node, orText(l.Step.Verdict, l.Step.Status), cut(strings.TrimSpace(string(l.Final)), OutputHeadBudget))
				digest.WriteString(head)
			}
		}
		p.Steps = append(p.Steps, s)
	}
	for _, d := range f.Degradations {
		p.Fallbacks = append(p.Fallbacks, fmt.Sprintf("%s (attempt %d): %s failed (%s); fell back to %s", d.StepRef, d.Attempt, d.Tool, d.Error, d.Fallback))
	}
	p.Digest = cut(digest.String(), DigestBudget)
	return p
}

// Marshal renders the packet as indented JSON.
func (p Packet) Marshal() []byte {
	b, _ := json.MarshalIndent(p, "", "  ")
	return append(b, '\n')
}

func orText(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// toolFacts reads a tool step's final body (internal/nodeexec.Result): the
// data object its program reported in a rich-style stdout, bounded to
// ToolDataBudget characters of JSON (a longer one is cut as text), and the
// head of its stdout.
func toolFacts(final []byte) (data any, stdoutHead string) {
	var r struct {
		Tool *struct {
			Stdout string `json:"stdout"`
		} `json:"tool"`
	}
	if json.Unmarshal(final, &r) != nil || r.Tool == nil {
		return nil, ""
	}
	var rich struct {
		Data json.RawMessage `json:"data"`
	}
	if json.Unmarshal([]byte(strings.TrimSpace(r.Tool.Stdout)), &rich) == nil && len(rich.Data) > 0 && string(rich.Data) != "null" {
		if len(rich.Data) <= ToolDataBudget {
			data = rich.Data
		} else {
			data = cut(string(rich.Data), ToolDataBudget)
		}
	}
	return data, cut(r.Tool.Stdout, StdoutHeadBudget)
}

func checkFacts(final []byte) []PacketCheck {
	var r struct {
		Checks *struct {
			Runs []struct {
				Set      string `json:"set"`
				Name     string `json:"name"`
				Status   string `json:"status"`
				ExitCode int    `json:"exit_code"`
			} `json:"runs"`
		} `json:"checks"`
	}
	if json.Unmarshal(final, &r) != nil || r.Checks == nil {
		return nil
	}
	var out []PacketCheck
	for _, run := range r.Checks.Runs {
		name := run.Name
		if run.Set != "" {
			name = run.Set + "/" + name
		}
		out = append(out, PacketCheck{Name: name, Status: run.Status, ExitCode: run.ExitCode})
	}
	return out
}
