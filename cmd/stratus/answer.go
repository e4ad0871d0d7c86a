package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/worker"
)

func newAnswerCmd(stdio IO) *cobra.Command {
	o := &HITLOptions{IO: stdio, Decision: worker.DecisionAnswer}
	cmd := &cobra.Command{
		Use:   "answer RUN NODE TEXT [--dir DIR | --target aws ...]",
		Short: "Answer the question a waiting node asks a human",
		Long: `answer replies TEXT to the question NODE of the running run RUN waits for:
a hitl node with signal question (the run goes on), or an agent that asked a
question (it runs again, the answer appended to its prompt as "## Human
answer"). TEXT "-" reads the answer from stdin. An empty answer is refused.

` + hitlAskHelp + hitlAWSHelp + hitlExitHelp,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			o.RunID, o.Node, o.Text = args[0], args[1], args[2]
			if o.Text == "-" {
				b, err := io.ReadAll(stdio.In)
				if err != nil {
					return fmt.Errorf("read the answer from stdin: %w", err)
				}
				o.Text = strings.TrimSpace(string(b))
			}
			return runHITL(o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the step's value as JSON on stdout")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}
