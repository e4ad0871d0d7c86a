package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Codex runs the Codex shim (`stratus engine codex`): a conforming engine of
// the workflow child contract v1 (docs/contracts.md § Conformance checklist)
// around the `codex` CLI. It reads kind, max_steps and schema from the
// envelope (docs/contracts.md § The reference engine) and runs
//
//	codex exec --json --skip-git-repo-check [--output-schema FILE] SETTINGS… EXTRA… -
//
// with the prompt on stdin (the "-" prompt argument; argv is visible in
// ps). SETTINGS are the attempt's model, reasoning effort, sandbox and
// sandbox network (Settings). The schema is written to a temporary FILE for --output-schema and
// removed afterwards. `codex exec` has no turn-limit flag, so max_steps is
// enforced by the shim alone. Sources: openai/codex docs/exec.md ("JSON
// output mode", "Structured output") and codex-rs/exec/src/exec_events.rs
// (the ThreadEvent / ThreadItem / Usage types behind --json).
//
// Translation of the JSONL events (`type` thread.started | turn.started |
// turn.completed {usage} | turn.failed {error.message} | item.started |
// item.updated | item.completed {item: {id, type, …}} | error {message}):
//
//   - each distinct item id of an action or answer (agent_message,
//     command_execution, file_change, mcp_tool_call, collab_tool_call,
//     web_search) is one agent_step, counted when first seen so a command
//     past the ceiling is stopped while it runs; reasoning, plan, todo_list
//     and error items are not steps. Past max_steps the shim stops the CLI
//     and emits max_steps_exhausted;
//   - turn.completed's usage becomes one usage event: prompt_tokens =
//     input_tokens (OpenAI counts cached input inside it), hit =
//     cached_input_tokens, completion = output_tokens. Codex reports no
//     cost, so cost_usd is never sent (absent means unknown,
//     docs/contracts.md § The event stream);
//   - turn.failed is turn_failed with its error.message (an API error body
//     in it read as "message (type)"); a top-level error
//     event is the failure when no turn completes after it; one that says
//     codex retries ("Reconnecting... 1/5 (...)", "Reconnecting... waiting
//     for network") is written to stderr as "codex: MESSAGE": it says why
//     a run stalled (internal/failclass);
//   - a completed turn is the report: the last agent_message text, parsed
//     as JSON when the call carried a schema and the text is JSON.
func Codex(ctx context.Context, opts ShimOptions, stdin io.Reader, stdout io.Writer) error {
	return runShim(ctx, "codex", opts, stdin, stdout, func(env Envelope, in shimInput, set Settings) (cliRun, error) {
		run := cliRun{name: "codex", prompt: in.prompt(), tr: &codexTranslator{}}
		// --skip-git-repo-check: Stratus chose the dir the engine works in
		// (the work dir, or a checkout of the run's workspace); codex 0.169
		// otherwise refuses any dir it has not been told to trust, and a
		// non-git work dir outright ("Not inside a trusted directory").
		run.args = []string{"exec", "--json", "--skip-git-repo-check"}
		if hasSchema(env) {
			f, err := os.CreateTemp("", "stratus-codex-schema-*.json")
			if err != nil {
				return cliRun{}, fmt.Errorf("codex: write the output schema file: %v", err)
			}
			run.cleanup = func() { os.Remove(f.Name()) }
			_, err = f.Write(env.Schema)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				run.cleanup()
				return cliRun{}, fmt.Errorf("codex: write the output schema file: %v", err)
			}
			run.args = append(run.args, "--output-schema", f.Name())
		}
		run.args = append(run.args, set.codexArgs()...)
		run.args = append(run.args, opts.ExtraArgs...)
		run.args = append(run.args, "-")
		return run, nil
	})
}

// codexStepItems are the item types that count as agent steps.
var codexStepItems = map[string]bool{
	"agent_message": true, "command_execution": true, "file_change": true,
	"mcp_tool_call": true, "collab_tool_call": true, "web_search": true,
}

type codexTranslator struct {
	seen       map[string]bool
	answered   bool // an agent_message completed
	errPending bool // s.failure came from a top-level error event, which a later completed turn overrides
}

type codexLine struct {
	Type string `json:"type"`
	Item *struct {
		ID   string `json:"id"`
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"item"`
	Usage *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
}

func (t *codexTranslator) line(b []byte, s *session) {
	var ev codexLine
	if json.Unmarshal(b, &ev) != nil {
		return // not a JSON object of the known shape: skipped
	}
	switch ev.Type {
	case "item.started", "item.updated", "item.completed":
		if ev.Item == nil {
			return
		}
		if codexStepItems[ev.Item.Type] {
			if t.seen == nil {
				t.seen = map[string]bool{}
			}
			id := ev.Item.ID
			if id == "" {
				id = fmt.Sprintf("anonymous-%d", len(t.seen))
			}
			if !t.seen[id] {
				t.seen[id] = true
				s.step()
			}
		}
		if ev.Type == "item.completed" && ev.Item.Type == "agent_message" {
			s.finalText, t.answered = ev.Item.Text, true
		}
	case "turn.completed":
		if ev.Usage != nil {
			s.usage(tokenUsage{prompt: ev.Usage.InputTokens, completion: ev.Usage.OutputTokens, cacheHit: ev.Usage.CachedInputTokens})
		}
		if t.errPending {
			s.failure, t.errPending = "", false
		}
		switch {
		case s.failure != "":
		case t.answered:
			s.finished = true
		default:
			s.failure = "codex completed its turn without an agent_message"
		}
	case "turn.failed":
		s.finished, t.errPending = false, false
		s.failure = "codex turn failed"
		if ev.Error != nil && ev.Error.Message != "" {
			s.failure = "codex turn failed: " + apiErrorText(ev.Error.Message)
		}
	case "error":
		if strings.HasPrefix(ev.Message, "Reconnecting") && s.say != nil {
			// On stderr too: codex 0.169 reports its retries only as these,
			// a provider it cannot reach among them ("Reconnecting...
			// waiting for network"), which it waits for past any deadline;
			// the runner's stderr tail is then the evidence of why the
			// attempt timed out. (Its final error is turn_failed's.)
			s.say("codex: " + ev.Message)
		}
		if s.failure == "" && !s.finished && ev.Message != "" {
			s.failure, t.errPending = "codex error: "+apiErrorText(ev.Message), true
		}
	}
}

// apiErrorText makes the error body codex 0.169 passes on verbatim
// ({"error":{"message":M,"type":T,…}}) read as "M (T)"; any other
// message is returned as it is.
func apiErrorText(msg string) string {
	var body struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &body) != nil || body.Error == nil || body.Error.Message == "" {
		return msg
	}
	if body.Error.Type == "" {
		return body.Error.Message
	}
	return body.Error.Message + " (" + body.Error.Type + ")"
}
