package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Claude runs the Claude Code shim (`stratus engine claude`): a conforming
// engine of the workflow child contract v1
// (docs/contracts.md § Conformance checklist) around the `claude` CLI. It
// reads kind, max_steps and schema from the envelope
// (docs/contracts.md § The reference engine) and runs
//
//	claude -p --output-format stream-json --verbose [--max-turns N] [--json-schema SCHEMA] SETTINGS… EXTRA…
//
// with the prompt on stdin (print mode reads the prompt from stdin when no
// prompt argument is given; argv is visible in ps). SETTINGS are the
// attempt's model, effort, permission mode and web tools (Settings). Sources: the Claude
// Code CLI reference and headless docs (code.claude.com/docs/en/cli-reference,
// …/headless): -p/--print, --output-format stream-json (needs --verbose
// with -p), --max-turns, --json-schema taking the schema inline and
// returning it as the result's structured_output.
//
// Translation of the stream-json lines (`type` system | assistant | user |
// result; the result carries subtype success | error_max_turns |
// error_during_execution, is_error, result, total_cost_usd, usage,
// structured_output — as the Agent SDK's ResultMessage documents):
//
//   - each distinct assistant message.id is one agent_step (the CLI prints
//     one line per content block of the same message, so lines are not
//     steps; the message it makes up to show an API error, model
//     "<synthetic>", is none); past max_steps the shim stops the CLI and
//     emits max_steps_exhausted;
//   - the result's usage becomes one usage event: prompt_tokens =
//     input_tokens + cache_creation_input_tokens + cache_read_input_tokens
//     (Anthropic's input_tokens excludes cached input), hit =
//     cache_read_input_tokens, completion = output_tokens, cost_usd =
//     total_cost_usd. A run stopped before its result reports the sum of
//     the per-message usage it saw, without a cost (each assistant line
//     carries the usage of the stream's message_start: its output_tokens
//     undercount what the model wrote, as 2.1.328 prints them);
//   - subtype error_max_turns is max_steps_exhausted (the CLI enforced the
//     ceiling the shim passed it); is_error or another non-success subtype
//     is turn_failed with the CLI's text;
//   - success is the report: the result text, or with a schema the
//     structured_output (else the text parsed as JSON when it is JSON).
func Claude(ctx context.Context, opts ShimOptions, stdin io.Reader, stdout io.Writer) error {
	return runShim(ctx, "claude", opts, stdin, stdout, func(env Envelope, in shimInput, set Settings) (cliRun, error) {
		args := []string{"-p", "--output-format", "stream-json", "--verbose"}
		if env.MaxSteps != nil {
			args = append(args, "--max-turns", strconv.Itoa(*env.MaxSteps))
		}
		if hasSchema(env) {
			args = append(args, "--json-schema", string(env.Schema))
		}
		args = append(args, set.claudeArgs()...)
		args = append(args, opts.ExtraArgs...)
		return cliRun{name: "claude", args: args, prompt: in.prompt(), tr: &claudeTranslator{}}, nil
	})
}

// claudeUsage is the Anthropic usage object.
type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
}

func (u claudeUsage) tokens() tokenUsage {
	return tokenUsage{
		prompt:     u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		completion: u.OutputTokens,
		cacheHit:   u.CacheReadInputTokens,
	}
}

type claudeTranslator struct {
	order []string               // assistant message ids in arrival order
	byID  map[string]claudeUsage // last usage seen per message
}

type claudeLine struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Message *struct {
		ID    string          `json:"id"`
		Model string          `json:"model"`
		Usage json.RawMessage `json:"usage"`
	} `json:"message"`
	// IsAPIErrorMessage marks the message the CLI makes up to show an API
	// error (model "<synthetic>"): not a model turn.
	IsAPIErrorMessage bool            `json:"is_api_error_message"`
	IsError           bool            `json:"is_error"`
	Result            *string         `json:"result"`
	Errors            []any           `json:"errors"`
	TotalCostUSD      *float64        `json:"total_cost_usd"`
	Usage             json.RawMessage `json:"usage"`
	StructuredOutput  json.RawMessage `json:"structured_output"`
}

func (t *claudeTranslator) line(b []byte, s *session) {
	var ev claudeLine
	if json.Unmarshal(b, &ev) != nil {
		return // not a JSON object: skipped, as the runner would (docs/contracts.md § The event stream)
	}
	switch ev.Type {
	case "assistant":
		if ev.Message == nil || ev.IsAPIErrorMessage || ev.Message.Model == "<synthetic>" {
			return
		}
		if t.byID == nil {
			t.byID = map[string]claudeUsage{}
		}
		id := ev.Message.ID
		if id == "" {
			id = fmt.Sprintf("anonymous-%d", len(t.order))
		}
		_, seen := t.byID[id]
		if !seen {
			t.order = append(t.order, id)
			t.byID[id] = claudeUsage{}
		}
		var u claudeUsage
		if len(ev.Message.Usage) > 0 && json.Unmarshal(ev.Message.Usage, &u) == nil {
			t.byID[id] = u // the last line of a message carries its usage so far
		}
		var sum tokenUsage
		for _, id := range t.order {
			sum = sum.add(t.byID[id].tokens())
		}
		s.fallback = &sum
		if !seen {
			s.step()
		}
	case "result":
		var u claudeUsage
		if len(ev.Usage) > 0 && json.Unmarshal(ev.Usage, &u) == nil {
			tu := u.tokens()
			tu.cost = ev.TotalCostUSD
			s.usage(tu)
		}
		switch {
		case ev.Subtype == "error_max_turns":
			s.cliMaxTurns = true
		case ev.IsError || ev.Subtype != "success":
			s.failure = claudeError(ev)
		default:
			s.finished = true
			if ev.Result != nil {
				s.finalText = *ev.Result
			}
			s.structured = ev.StructuredOutput
		}
	}
}

// claudeError is the CLI's own explanation of a failed result.
func claudeError(ev claudeLine) string {
	var why []string
	if ev.Result != nil && strings.TrimSpace(*ev.Result) != "" {
		why = append(why, strings.TrimSpace(*ev.Result))
	}
	for _, e := range ev.Errors {
		if s, ok := e.(string); ok {
			why = append(why, s)
		} else if b, err := json.Marshal(e); err == nil {
			why = append(why, string(b))
		}
	}
	msg := "claude"
	if ev.Subtype != "" && ev.Subtype != "success" {
		msg += " " + ev.Subtype
	}
	if len(why) > 0 {
		msg += ": " + strings.Join(why, "; ")
	}
	return msg
}
