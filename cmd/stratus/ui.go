package main

import (
	"github.com/spf13/cobra"
)

// UIOptions are the flags of `stratus ui`.
type UIOptions struct {
	IO     IO
	Dir    string
	Addr   string
	Target string
	AWS    AWSOptions
	// Remote allows a non-loopback Addr; the viewer is then read-only.
	Remote bool
	// TokenFile, when set, holds the viewer's secret (a file only the
	// user could have read or written: private.ReadFile; at least
	// webui.MinSecretLen characters); otherwise one is drawn at start.
	TokenFile string
	// ready, when set (tests), gets the address the viewer listens on.
	ready func(addr string)
}

// DefaultUIAddr is where `stratus ui` listens unless told otherwise:
// loopback only.
const DefaultUIAddr = "127.0.0.1:7777"

func newUICmd(io IO) *cobra.Command {
	o := &UIOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "ui [--dir DIR | --target aws ...] [--addr 127.0.0.1:7777] [--token-file FILE]",
		Short: "Serve the run viewer: runs, each run's graph and timeline, steps, gates",
		Long: `ui serves a web viewer of the runs made in DIR (or on a deployed stack with
--target aws) at http://ADDR: the runs, newest first and filtered by status;
each run's flow drawn as a graph coloured by its steps and updated live while
it runs, a timeline of its visits, its cost and summary; each step's rendered
prompt beside its outputs, its findings, attempts, degradations and runner log.
A node waiting for a human shows its upstream output and approve / reject /
answer forms; on AWS a form replies as stratus approve --target aws does,
signed with your AWS credentials (the stack's operator policy grants the
route). The pages work without JavaScript.

It opens to its user only. At start it draws a secret and prints the URL to
open, http://127.0.0.1:7777/?token=SECRET; that visit sets a cookie (and
drops the token from the address bar), and every page, event stream, file and
form needs it. Anything else gets 401: loopback is not a user boundary, and
another user of the machine must not read runs or answer gates. A script
sends Authorization: Bearer SECRET. --token-file FILE takes the secret from
a file no other user could have read or written instead of drawing one, as
ssh takes a key file: a regular file of yours (not a symbolic link), mode
0600, in a directory of yours or root's that no one else may write, holding
at least 32 characters.

It listens on loopback only. A non-loopback --addr (0.0.0.0:7777) needs
--remote, and the viewer is then read-only: whoever has the URL reads every
run's prompts and outputs, and nobody answers a gate through it (the secret
crosses the network in clear: prefer a tunnel). To answer gates from another
machine, tunnel instead: ssh -L 7777:127.0.0.1:7777 HOST.

Exit status: 0 stopped (Ctrl-C), 1 the address is taken, 2 bad flags, a
--token-file that breaks that rule or is too short, a --dir that is not a
directory, or DIR has no .stratus/ (stratus install first; an installed DIR with no run yet starts
empty).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(c *cobra.Command, _ []string) error {
			if err := checkTarget(c, o.Target); err != nil {
				return err
			}
			ctx, stop := signalContext()
			defer stop()
			return runUI(ctx, o)
		},
	}
	cmd.Flags().StringVar(&o.Dir, "dir", ".", "work directory holding .stratus/ (embedded runs)")
	cmd.Flags().StringVar(&o.Addr, "addr", DefaultUIAddr, "host:port to listen on (loopback, unless --remote)")
	cmd.Flags().BoolVar(&o.Remote, "remote", false, "allow a non-loopback --addr; the viewer is then read-only (no gate forms)")
	cmd.Flags().StringVar(&o.TokenFile, "token-file", "", "read the viewer's secret from FILE (yours, mode 0600, in a directory only you may write; >= 32 characters) instead of drawing one")
	addTargetFlags(cmd, &o.Target, &o.AWS)
	return cmd
}
