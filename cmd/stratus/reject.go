package main

import (
	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/worker"
)

func newRejectCmd(io IO) *cobra.Command {
	o := &HITLOptions{IO: io, Decision: worker.DecisionReject}
	cmd := &cobra.Command{
		Use:   "reject RUN NODE --reason TEXT [--dir DIR | --target aws ...]",
		Short: "Reject what a waiting node asks a human to approve",
		Long: `reject replies "reject" to the approval NODE of the running run RUN waits
for: a hitl node with signal approval (the run takes its route:deny edge), or an
agent that asked for an approval (it runs again, the reason appended to its
prompt as "## Approval denied: REASON"). The reason is required.

` + hitlAskHelp + hitlAWSHelp + hitlExitHelp,
		Args: positional(),
		RunE: func(c *cobra.Command, args []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			o.RunID, o.Node = args[0], args[1]
			return runHITL(o)
		},
	}
	cmd.Flags().StringVar(&o.Text, "reason", "", "why the approval is denied (required; the agent reads it)")
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the step's value as JSON on stdout")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}
