package main

import (
	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/worker"
)

func newApproveCmd(io IO) *cobra.Command {
	o := &HITLOptions{IO: io, Decision: worker.DecisionApprove}
	cmd := &cobra.Command{
		Use:   "approve RUN NODE [--dir DIR | --target aws ...]",
		Short: "Approve what a waiting node asks a human to approve",
		Long: `approve replies "approve" to the approval NODE of the running run RUN waits
for: a hitl node with signal approval (the run takes its route:approve edge), or
an agent that asked for an approval (the run goes on past it). The run must be
running under DIR (stratus run writes DIR/.stratus/runs/RUN.json while it runs),
or on the stack --target aws names.

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
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the step's value as JSON on stdout")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}
