package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsecs "github.com/aws/aws-sdk-go-v2/service/ecs"
	awslambda "github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/stratusflow/stratus/internal/devstack"
	"github.com/stratusflow/stratus/internal/devstack/moto"
	"github.com/stratusflow/stratus/internal/launch"
	"github.com/stratusflow/stratus/internal/launch/ecs"
)

// docs/architecture.md § Publishing, on the stand-in: `dev aws
// --git-token-file F` stores the token in the stand-in's Secrets Manager
// and deploys the stack with GitTokenSecretArn naming it; no function's
// environment holds it; a publisher launched by the ECS launcher
// (launch.Spec.Publisher: the publisher task definition) starts with
// STRATUS_GIT_TOKEN in its environment, read through its own execution
// role, and an agent runner launched the same way does not, while its own
// engine key secret (DEEPSEEK) is read through its execution role (with
// --runners process the operator's engine keys reach every process as
// well: ServeOptions). Each task's environment is read from /proc while
// its runner waits on its first call to the worker API, which a server of
// this test holds until then.
//
// This drives the launcher and the Fargate stand-in, not a whole run: a
// run's publish step has nothing to push yet on this branch.
func TestDevAWS_TheGitTokenReachesThePublisherAlone(t *testing.T) {
	const token = "ghp_devawsPublisherOnly0123456789"
	tokenFile := filepath.Join(t.TempDir(), "git-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags, log, _ := devAWSLog(t, []string{"--git-token-file", tokenFile}, "DEEPSEEK=sk-engine-key")
	endpoint, stack := flagValue(t, flags, "--endpoint-url"), flagValue(t, flags, "--stack")
	if !strings.Contains(log.String(), "GitTokenSecretArn: the secret ") {
		t.Errorf("dev aws did not say where the git token is:\n%s", log.String())
	}
	ctx := context.Background()
	cfg := moto.Config(endpoint)
	st, err := devstack.Load(ctx, cfg, stack)
	if err != nil {
		t.Fatal(err)
	}
	if st.PublisherTaskDef == "" {
		t.Fatalf("the stack %s has no PublisherTaskDefinitionArn output: %v", stack, st.Outputs)
	}
	// No function of the stack holds the token or names its secret.
	lc := awslambda.NewFromConfig(cfg)
	if len(st.Functions) < 3 {
		t.Fatalf("the stack's functions are %v; want its three", st.Functions)
	}
	for id, fn := range st.Functions {
		out, err := lc.GetFunctionConfiguration(ctx, &awslambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Environment == nil {
			continue
		}
		for k, v := range out.Environment.Variables {
			if strings.Contains(v, token) || strings.Contains(v, "git-token") || k == launch.GitTokenEnv {
				t.Errorf("the function %s's %s=%q is the git token or names its secret", id, k, v)
			}
		}
	}
	ecsCfg := cfg.Copy()
	ecsCfg.HTTPClient = &moto.ECSClient{}
	l, err := ecs.New(awsecs.NewFromConfig(ecsCfg), ecs.Config{Cluster: st.Cluster, TaskDefinition: st.TaskDef,
		Offline:                 ecs.NetworkProfile{Subnets: st.Subnets, SecurityGroups: st.SecurityGroups},
		Online:                  ecs.NetworkProfile{Subnets: st.NetworkSubnets, SecurityGroups: st.NetworkSecurityGroups, TaskDefinition: st.NetworkTaskDef},
		PublisherTaskDefinition: st.PublisherTaskDef})
	if err != nil {
		t.Fatal(err)
	}

	// The worker API of these tasks: it holds each runner's first call
	// until the test has read its environment.
	release := make(chan struct{})
	var mu sync.Mutex
	called := map[string]bool{} // Authorization values seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		called[r.Header.Get("Authorization")] = true
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, `{"error":{"code":"unauthorized","message":"test over"}}`, http.StatusUnauthorized)
	}))
	defer srv.Close()
	defer close(release)

	env := map[string]map[string]string{}
	for _, s := range []launch.Spec{
		{APIURL: srv.URL, Handle: "wh-publisher", TaskID: "r1.publish.1", Attempt: 1, Publisher: true},
		{APIURL: srv.URL, Handle: "wh-runner", TaskID: "r1.implement.1", Attempt: 1},
	} {
		if _, err := l.Launch(ctx, s); err != nil {
			t.Fatalf("Launch(%s): %v", s.TaskID, err)
		}
		var pid string
		started := regexp.MustCompile(`task \S+ of step ` + regexp.QuoteMeta(s.TaskID) + ` runs in process ([0-9]+) `)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			mu.Lock()
			waiting := called["Bearer "+s.Handle]
			mu.Unlock()
			if m := started.FindStringSubmatch(log.String()); m != nil && waiting {
				pid = m[1]
				break
			}
			if time.Now().After(deadline) {
				var fns []byte
				if m := regexp.MustCompile(`functions' log (\S+),`).FindStringSubmatch(log.String()); m != nil {
					fns, _ = os.ReadFile(m[1])
				}
				t.Fatalf("the task of %s did not start and call the worker API within 60 s:\n%s\nthe stand-in's log:\n%s", s.TaskID, log.String(), fns)
			}
		}
		b, err := os.ReadFile("/proc/" + pid + "/environ")
		if err != nil {
			t.Fatalf("the environment of %s's runner (pid %s): %v", s.TaskID, pid, err)
		}
		env[s.TaskID] = map[string]string{}
		for _, kv := range strings.Split(string(b), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[s.TaskID][k] = v
			}
		}
	}
	pub, run := env["r1.publish.1"], env["r1.implement.1"]
	if pub[launch.GitTokenEnv] != token {
		t.Errorf("the publisher's %s is %q; want the token file's content", launch.GitTokenEnv, pub[launch.GitTokenEnv])
	}
	if v, ok := run[launch.GitTokenEnv]; ok {
		t.Errorf("the agent runner has %s=%q; want it unset", launch.GitTokenEnv, v)
	}
	// The runner's task definition names the engine key's secret: it
	// started, so its own execution role may read that one.
	if run["DEEPSEEK"] != "sk-engine-key" {
		t.Errorf("the agent runner's DEEPSEEK is %q; want the engine key", run["DEEPSEEK"])
	}
	for id, e := range env {
		for k, v := range e {
			if strings.Contains(v, token) && k != launch.GitTokenEnv {
				t.Errorf("%s's %s carries the token", id, k)
			}
		}
		if got := e[launch.EnvHandle]; !slices.Contains([]string{"wh-publisher", "wh-runner"}, got) {
			t.Errorf("%s's %s is %q", id, launch.EnvHandle, got)
		}
	}
}

// Bad input: a --git-token-file that cannot be read or holds no token, or
// one given with --stack (whose stack has its parameters), ends dev aws
// with exit 2 naming the flag, before anything starts.
func TestDevAWS_GitTokenFileBadInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--git-token-file", filepath.Join(t.TempDir(), "nosuch")}, "no such file"},
		{[]string{"--git-token-file", empty}, "empty"},
		{[]string{"--endpoint-url", "http://127.0.0.1:1", "--stack", "kept", "--git-token-file", empty}, "--stack kept"},
	} {
		r := runCLI(t, append([]string{"dev", "aws", "--runners", "process"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "--git-token-file") || !strings.Contains(r.stderr, tc.says) {
			t.Errorf("dev aws %v: exit %d; want 2 naming --git-token-file and saying %q\n%s", tc.args, r.code, tc.says, r.stderr)
		}
	}
}
