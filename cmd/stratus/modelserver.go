package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/httpapi"
	"github.com/stratusflow/stratus/internal/modelserver"
)

// newEngineModelServerCmd is `stratus engine modelserver`: the scripted
// model server the real CLIs run against with no key and no network
// (internal/modelserver).
func newEngineModelServerCmd(io IO) *cobra.Command {
	var script, addr string
	cmd := &cobra.Command{
		Use:   "modelserver --script FILE [--addr 127.0.0.1:0]",
		Short: "Serve a scripted model (Anthropic Messages and OpenAI Responses APIs) on loopback",
		Long: `modelserver answers POST /v1/messages (Anthropic Messages, as Claude Code calls it)
and POST /v1/responses (OpenAI Responses, as Codex calls it) from a script instead
of a model, streaming with usage, so the real CLIs run with no key and no network.
A script lists rules: a rule matches a conversation by a substring of its system
prompt and first message; each conversation it matches is one visit (the last
visit repeats); a visit's turns answer in order with text, a shell tool call, or
an API error (see examples/modelserver.yaml). It prints its base URL on stdout,
logs one JSON line per request on stderr, and serves until Ctrl-C.

Point Claude Code at it with ANTHROPIC_BASE_URL=URL (any ANTHROPIC_API_KEY), and
Codex with a model provider whose base_url is URL/v1 and wire_api "responses".`,
		Args: cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			s, err := modelserver.Load(script)
			if err != nil {
				return usageError{fmt.Errorf("--script %s: %w", script, err)}
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return usageError{fmt.Errorf("--addr %s: %w", addr, err)}
			}
			fmt.Fprintf(io.Out, "http://%s\n", ln.Addr())
			srv := httpapi.NewServer(&modelserver.Server{Script: s, Log: io.Err})
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); srv.Close() }()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&script, "script", "", "the script (YAML)")
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:0", "the address to listen on")
	cmd.MarkFlagRequired("script")
	return cmd
}
