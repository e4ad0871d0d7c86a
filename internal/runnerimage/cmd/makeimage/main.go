// Command makeimage builds the runner images (stratus-runner:latest,
// :claude, :codex, :agents) through the Docker Engine API of Docker or podman,
// checks each runs as non-root and prints its CLI's version, and prints
// their sizes. `make image` runs it from the module root:
//
//	go run ./internal/runnerimage/cmd/makeimage [-targets latest,claude,codex,agents] [-base-image REF] [-ca-bundle PEM] [-ldflags FLAGS] [-v]
//
// See docs/runner-image.md § Building the images.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"

	"github.com/stratusflow/stratus/internal/container"
	"github.com/stratusflow/stratus/internal/runnerimage"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		targets = flag.String("targets", "latest,claude,codex,agents", "the images to build, comma-separated")
		base    = flag.String("base-image", "", "the Debian bookworm base image (BASE_IMAGE); default "+runnerimage.DefaultBase+" when present or pullable, else "+runnerimage.DebianBase+" made with mmdebstrap")
		ca      = flag.String("ca-bundle", defaultCABundle(), "a PEM bundle the build's downloads trust (CA_BUNDLE); empty for none")
		ldflags = flag.String("ldflags", "", "extra go build -ldflags for stratus (make image passes the version and commit)")
		verbose = flag.Bool("v", false, "print the builder's output")
	)
	flag.Parse()
	o := runnerimage.Options{Base: *base, CABundle: *ca, LDFlags: *ldflags, Out: os.Stdout, Verbose: *verbose}
	for _, name := range strings.Split(*targets, ",") {
		t, ok := runnerimage.TargetByName(strings.TrimSpace(name))
		if !ok {
			fmt.Fprintf(os.Stderr, "makeimage: -targets: unknown image %q; valid: latest, claude, codex, agents\n", name)
			return 2
		}
		o.Targets = append(o.Targets, t)
	}
	repo, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "makeimage:", err)
		return 1
	}
	if _, err := os.Stat("Dockerfile"); err != nil {
		fmt.Fprintln(os.Stderr, "makeimage: no Dockerfile here: run it from the module root (make image)")
		return 1
	}
	o.Repo = repo

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	e, err := container.Connect(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "makeimage:", err)
		return 1
	}
	defer e.Close()
	name, _ := e.Name(ctx)
	fmt.Printf("== engine: %s at %s\n", name, e.Host())
	results, err := runnerimage.Make(ctx, e, o)
	if len(results) > 0 {
		fmt.Println()
		tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "image\tversion\tuser\tsize\tbuild")
		for _, r := range results {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Target.Tag, r.Version, r.UID, runnerimage.MB(r.Size), r.Build.Round(1e8))
		}
		tw.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "makeimage:", err)
		return 1
	}
	return 0
}

// defaultCABundle is Debian's bundle when this machine has it: on a
// machine behind a TLS-inspecting proxy it holds the proxy's CA, which the
// build's downloads need.
func defaultCABundle() string {
	if _, err := os.Stat(runnerimage.SystemCABundle); err == nil {
		return runnerimage.SystemCABundle
	}
	return ""
}
