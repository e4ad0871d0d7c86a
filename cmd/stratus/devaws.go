//go:build !slim

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/english"
)

func runDevAWS(o *DevAWSOptions) error {
	co := devstack.CreateOptions{HeartbeatSeconds: o.HeartbeatSeconds, Pool: o.Pool > 0}
	if o.Template != "" {
		b, err := os.ReadFile(o.Template)
		if err != nil {
			return fmt.Errorf("--template: %w", err)
		}
		co.Template = b
		// sam deploy reads samconfig.toml from the template's directory.
		if sc, err := os.ReadFile(filepath.Join(filepath.Dir(o.Template), "samconfig.toml")); err == nil {
			co.SAMConfig = sc
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "stratus-dev-aws-")
	if err != nil {
		return err
	}
	// Its moto data, logs and workers' directories go with the stand-in,
	// however it ends (Ctrl-C and SIGTERM end ctx): deferred first, so it
	// runs after moto, the functions and the runners have stopped.
	defer os.RemoveAll(dir)
	endpoint := o.EndpointURL
	if endpoint == "" {
		m, err := moto.Start(o.Port, dir)
		if err != nil {
			return err
		}
		defer m.Stop()
		endpoint = m.URL
		fmt.Fprintf(o.IO.Err, "stratus dev aws: moto serves on %s (its log: %s)\n", endpoint, m.Log)
	}
	cfg := moto.Config(endpoint)
	name, st, ln, err := devStack(ctx, o, cfg, co)
	if err != nil {
		return fmt.Errorf("%w (on %s)", err, endpoint)
	}
	logPath := filepath.Join(dir, "functions.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	f, err := devstack.Serve(ctx, cfg, st, ln, devstack.ServeOptions{Self: o.Self, WorkRoot: filepath.Join(dir, "workers"), Log: logf,
		PoolRunners: o.Pool, PoolPickup: o.PoolPickup})
	if err != nil {
		return err
	}
	defer f.Stop()
	flags := fmt.Sprintf("--target aws --endpoint-url %s --region %s --stack %s", endpoint, moto.Region, name)
	fmt.Fprintln(o.IO.Out, flags)
	fmt.Fprintf(o.IO.Err, "stratus dev aws: stack %s, worker API %s, functions' log %s, workers in %s\n", name, st.APIURL, logPath, filepath.Join(dir, "workers"))
	if o.Pool > 0 {
		fmt.Fprintf(o.IO.Err, "stratus dev aws: runner pool: %s per network profile on %s and %s (their logs: %s)\n",
			english.Plural(o.Pool, "pooled runner"), st.PoolQueueURL, st.PoolNetworkQueueURL, filepath.Join(dir, "workers", "pool-*", "pool.log"))
	}
	fmt.Fprintf(o.IO.Err, "stratus dev aws: try: stratus run TASK.md --dir DIR %s   (Ctrl-C stops the stand-in)\n", flags)
	if o.ready != nil {
		o.ready(flags)
	}
	select {
	case <-ctx.Done():
	case <-o.stop:
	}
	fmt.Fprintf(o.IO.Err, "stratus dev aws: stopping; removing %s\n", dir)
	return nil
}

// devStack deploys the stack dev aws serves (Create) with its worker API's
// listener, or, with --stack, reads an existing one (Load) and listens
// where its ApiUrl output says the worker API is: a loopback http URL, as
// a stack an earlier dev aws deployed has.
func devStack(ctx context.Context, o *DevAWSOptions, cfg aws.Config, co devstack.CreateOptions) (string, *devstack.Stack, net.Listener, error) {
	if o.Stack != "" {
		st, err := devstack.Load(ctx, cfg, o.Stack)
		if err != nil {
			return "", nil, nil, err
		}
		u, err := url.Parse(st.APIURL)
		if err != nil || u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") {
			return "", nil, nil, fmt.Errorf("the stack %s's ApiUrl output is %q: dev aws --stack serves a stack whose worker API is on this machine (http://127.0.0.1:PORT, the ApiUrlOverride dev aws gives)", o.Stack, st.APIURL)
		}
		ln, err := net.Listen("tcp", u.Host)
		if err != nil {
			return "", nil, nil, fmt.Errorf("listen for the stack %s's worker API at its ApiUrl %s: %w", o.Stack, st.APIURL, err)
		}
		if o.Pool > 0 && st.PoolQueueURL == "" {
			ln.Close()
			return "", nil, nil, fmt.Errorf("--pool %d: the stack %s has no runner pool (RunnerPool off)", o.Pool, o.Stack)
		}
		return o.Stack, st, ln, nil
	}
	name := o.Name
	if name == "" {
		b := make([]byte, 3)
		rand.Read(b)
		name = "stratus-dev-" + hex.EncodeToString(b)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, fmt.Errorf("listen for the worker API: %w", err)
	}
	st, err := devstack.Create(ctx, cfg, name, "http://"+ln.Addr().String(), co)
	if err != nil {
		ln.Close()
		return "", nil, nil, fmt.Errorf("create the stack: %w", err)
	}
	return name, st, ln, nil
}
