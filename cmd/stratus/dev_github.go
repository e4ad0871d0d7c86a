package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/stratusflow/stratus/internal/publish/githubtest"
)

// DevGitHubOptions are the flags of `stratus dev github`.
type DevGitHubOptions struct {
	IO IO
	// Repos are OWNER/NAME=PATH: each served repository and the bare git
	// repository holding it.
	Repos []string
	// Addr is where to listen: 127.0.0.1:PORT (0: any free port).
	Addr string
	// Token, or the first line of TokenFile, is the one token accepted.
	Token, TokenFile string
	// URLFile, when set, is written with the API URL once serving.
	URLFile string

	// ready, when set, is called with the API URL once serving (tests).
	ready func(url string)
	// stop, when set, ends the serving instead of SIGINT/SIGTERM (tests).
	stop <-chan struct{}
}

// repoName is GitHub's owner/name: letters, digits, '-', '_' and '.'.
var repoName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`) })

type devRepo struct{ owner, name, path string }

func newDevGitHubCmd(io IO) *cobra.Command {
	o := &DevGitHubOptions{IO: io}
	c := &cobra.Command{
		Use:   "github --repo OWNER/NAME=PATH/TO/BARE.git [--repo ...] (--token T | --token-file F) [--addr 127.0.0.1:PORT] [--url-file F]",
		Short: "Serve a GitHub API stand-in for local bare git repositories: publish pull requests without GitHub",
		Long: `dev github serves, on 127.0.0.1, the part of GitHub's API the publish step uses
(docs/architecture.md § Publishing): REST pull requests (list, create, update, get,
merge) and GraphQL's enablePullRequestAutoMerge, for the repositories --repo names,
each held in a bare git repository on this machine.

A branch exists when it is pushed to the bare repository (git push to its path);
merging a pull request makes the real merge, squash or rebase there with a normal
push, so the bare repository's pre-receive hook can refuse it as a protected branch
would (405). Auto-merge is never left waiting: the stand-in has no checks, so GitHub's
"nothing to wait for" answer makes the client merge at once.

It prints one line on stdout, "github API stand-in: URL (repos: ...)", the URL being
the GitHub Enterprise API root to give the publish step
(http://127.0.0.1:PORT/api/v3/), writes that URL to --url-file when given, and serves
until Ctrl-C. Clients authenticate with the one token --token or --token-file gives.

Exit status: 0 stopped by Ctrl-C, 1 it could not listen, 2 bad flags (a --repo that
is not OWNER/NAME=PATH to a bare git repository, an --addr not on 127.0.0.1).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runDevGitHub(o) },
	}
	c.Flags().StringArrayVar(&o.Repos, "repo", nil, "OWNER/NAME=PATH: serve OWNER/NAME from the bare git repository at PATH (repeatable)")
	c.Flags().StringVar(&o.Addr, "addr", "127.0.0.1:0", "where to listen: 127.0.0.1:PORT (port 0: any free one)")
	c.Flags().StringVar(&o.Token, "token", "", "the token clients must send (Authorization: Bearer or token)")
	c.Flags().StringVar(&o.TokenFile, "token-file", "", "read the token from this file's first line instead of --token")
	c.Flags().StringVar(&o.URLFile, "url-file", "", "write the API URL to this file once serving")
	return c
}

// checkDevGitHub validates o's flags: usage errors naming the flag, the
// value and what is valid. It returns the repositories and the token.
func checkDevGitHub(o *DevGitHubOptions) ([]devRepo, string, error) {
	if len(o.Repos) == 0 {
		return nil, "", usageError{fmt.Errorf("--repo: none given; want at least one OWNER/NAME=PATH/TO/BARE.git")}
	}
	var repos []devRepo
	seen := map[string]bool{}
	for _, v := range o.Repos {
		full, path, ok := strings.Cut(v, "=")
		if !ok || path == "" || !repoName().MatchString(full) {
			return nil, "", usageError{fmt.Errorf("--repo %q: want OWNER/NAME=PATH/TO/BARE.git (e.g. acme/widgets=./widgets.git)", v)}
		}
		if seen[full] {
			return nil, "", usageError{fmt.Errorf("--repo %q: %s is given twice", v, full)}
		}
		seen[full] = true
		if err := githubtest.CheckBare(path); err != nil {
			return nil, "", usageError{fmt.Errorf("--repo %q: %w", v, err)}
		}
		owner, name, _ := strings.Cut(full, "/")
		repos = append(repos, devRepo{owner: owner, name: name, path: path})
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if p, perr := strconv.Atoi(port); err != nil || perr != nil || p < 0 || p > 65535 || host != "127.0.0.1" {
		return nil, "", usageError{fmt.Errorf("--addr %q: want 127.0.0.1:PORT, PORT 0-65535 (0: any free port); the stand-in serves this machine only", o.Addr)}
	}
	token := o.Token
	switch {
	case o.Token != "" && o.TokenFile != "":
		return nil, "", usageError{fmt.Errorf("--token and --token-file: give one")}
	case o.TokenFile != "":
		b, err := os.ReadFile(o.TokenFile)
		if err != nil {
			return nil, "", usageError{fmt.Errorf("--token-file %q: %w", o.TokenFile, err)}
		}
		token, _, _ = strings.Cut(string(b), "\n")
		if token = strings.TrimSpace(token); token == "" {
			return nil, "", usageError{fmt.Errorf("--token-file %q: its first line is empty; want the token", o.TokenFile)}
		}
	case o.Token == "":
		return nil, "", usageError{fmt.Errorf("--token: none given; want --token T or --token-file F, the token clients will send")}
	}
	return repos, token, nil
}

func runDevGitHub(o *DevGitHubOptions) error {
	repos, token, err := checkDevGitHub(o)
	if err != nil {
		return err
	}
	srv, err := githubtest.Start(o.Addr, token)
	if err != nil {
		return err
	}
	defer srv.Close()
	var names []string
	for _, r := range repos {
		if err := srv.AddGitRepo(r.owner, r.name, r.path); err != nil {
			return usageError{fmt.Errorf("--repo %s/%s=%s: %w", r.owner, r.name, r.path, err)}
		}
		names = append(names, r.owner+"/"+r.name)
	}
	if o.URLFile != "" {
		if err := os.WriteFile(o.URLFile, []byte(srv.URL+"\n"), 0o644); err != nil {
			return usageError{fmt.Errorf("--url-file %s: %w", o.URLFile, err)}
		}
	}
	fmt.Fprintf(o.IO.Out, "github API stand-in: %s (repos: %s)\n", srv.URL, strings.Join(names, ", "))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.ready != nil {
		o.ready(srv.URL)
	}
	select {
	case <-ctx.Done():
	case <-o.stop:
	}
	return nil
}
