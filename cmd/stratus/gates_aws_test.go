package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/worker"
)

// awsWaitLine is the wait line of a run followed on a stack: its reply
// commands carry the --target aws flags that reach it.
var awsWaitLine = regexp.MustCompile(`^stratus: wait\s+(\S+)\s+node=(\S+) .*reply with: stratus \w+ (\S+) \S+ --target aws --endpoint-url `)

// gatesEngine answers "ok", except the asking flow's draft: its first
// visit asks a human a question, its second reports; each request line is
// left in $SPY.
const gatesEngine = `read line
echo "$line" > "$SPY/req-$STRATUS_TASK_ID.txt"
if [ -f "$SPY/asking" ] && echo "$line" | grep -q '"node":"draft"'; then
  if [ -f "$SPY/asked" ]; then printf '{"subrun_report":"Painted it teal."}\n'; exit 0; fi
  touch "$SPY/asked"
  printf '{"subrun_report":{"content":"need a color","human_input":{"kind":"question","text":"Which color should the button be?"}}}\n'
  exit 0
fi
printf '{"subrun_report":"ok"}\n'
`

// standInOperator is who the stand-in's API front says signed with its
// credentials (devstack.OperatorPrincipal: moto's name for them).
const standInOperator = "arn:aws:sts::123456789012:user/moto"

// docs/security.md § Operator replies on AWS: a run's gates on
// a stack are answered with the operator's AWS identity. On the stand-in,
// a hitl approval node is approved with `stratus approve --target aws`,
// its question node answered from `stratus ui --target aws`'s form, and
// an agent's question with `stratus answer --target aws`: each run goes
// on and ends done, each reply records the operator's ARN. API
// Gateway's authorizer is what lets a reply through: an unsigned request
// to the route gets its 403 "Forbidden", and a reply signed with
// credentials the stack does not know — an unknown key, a wrong secret —
// is refused (exit 1, saying why) and the gate still waits. The exit
// statuses are the embedded commands' (hitlExitHelp): a reply the node
// does not take, an unknown run, exit 2; a run that ended, exit 1.
func TestDevAWS_GatesAnsweredWithTheOperatorsAWSIdentity(t *testing.T) {
	flags, devLog, _ := devAWSLog(t, nil, "AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=")
	// It names the worker API on stderr once it has printed the flags.
	var api []string
	for deadline := time.Now().Add(30 * time.Second); api == nil; time.Sleep(50 * time.Millisecond) {
		if api = regexp.MustCompile(`worker API (https://\S+) `).FindStringSubmatch(devLog.String()); api == nil && time.Now().After(deadline) {
			t.Fatalf("dev aws names no worker API:\n%s", devLog)
		}
	}
	dir := t.TempDir()
	if r := runCLI(t, "install", "--dir", dir); r.code != 0 {
		t.Fatal(r.stderr)
	}
	spy := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "engine.sh"), gatesEngine)
	usePrimaryShellEngineEnv(t, dir, "shx", "{SPY: "+spy+"}")
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/gated.yaml"), strings.Replace(approvalFlow, " GATE_TIMEOUT", "", 1))
	for _, f := range []string{"gated/draft.md", "gated/revise.md", "asking/draft.md"} {
		writeTestFile(t, filepath.Join(dir, ".stratus/flows", f), "Work on {task_id} as "+f+".\n")
	}
	writeTestFile(t, filepath.Join(dir, ".stratus/flows/asking.yaml"), askingFlow)
	for _, id := range []string{"gated", "asking"} {
		writeTestFile(t, filepath.Join(dir, id+".md"), "---\nid: t-"+id+"\ntitle: Gates on AWS\ntask_type: "+id+"\n---\nDo it.\n")
	}
	reply := func(env []string, args ...string) result {
		t.Helper()
		return runCLIEnv(t, env, append(args, flags...)...)
	}

	run := startCLI(t, append([]string{"run", filepath.Join(dir, "gated.md"), "--dir", dir}, flags...)...)
	runID, ref := run.waitingOn(t, awsWaitLine)
	if ref != "gate#1" {
		t.Fatalf("waiting step %s, want gate#1", ref)
	}

	// API Gateway's authorizer, before anything reaches the function.
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(readFile(t, flagValue(t, flags, "--ca-bundle"))))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Post(api[1]+"/v1/operator/runs/"+runID+"/nodes/gate/hitl", "application/json", strings.NewReader(`{"decision":"approve"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || string(body) != `{"message":"Forbidden"}` {
		t.Errorf("an unsigned reply: %d %s; want API Gateway's 403 {\"message\":\"Forbidden\"}", resp.StatusCode, body)
	}
	for name, c := range map[string]struct{ env []string }{
		"an unknown key": {[]string{"AWS_ACCESS_KEY_ID=AKIAUNKNOWN", "AWS_SECRET_ACCESS_KEY=test"}},
		"a wrong secret": {[]string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=not-the-secret"}},
	} {
		want := map[string]string{"an unknown key": "The security token included in the request is invalid.",
			"a wrong secret": "The request signature we calculated does not match"}[name]
		if r := reply(c.env, "approve", runID, "gate"); r.code != ExitFailed || !strings.Contains(r.stderr, "API Gateway refused the request (403 Forbidden): "+want) ||
			!strings.Contains(r.stderr, "OperatorPolicyArn") {
			t.Errorf("approve signed with %s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	// Without the stand-in's CA the API answers with a certificate this
	// machine does not trust: said so, with the flag that fixes it.
	var noCA []string
	for i := 0; i < len(flags); i++ {
		if flags[i] == "--ca-bundle" {
			i++
			continue
		}
		noCA = append(noCA, flags[i])
	}
	if r := runCLIEnv(t, []string{"AWS_CA_BUNDLE="}, append([]string{"approve", runID, "gate"}, noCA...)...); r.code != ExitFailed ||
		!strings.Contains(r.stderr, "does not trust") || !strings.Contains(r.stderr, "--ca-bundle FILE") {
		t.Errorf("approve without --ca-bundle: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A reply the node does not take, and an unknown run: exit 2, as embedded.
	if r := reply(nil, "answer", runID, "gate", "yes"); r.code != ExitUsage || !strings.Contains(r.stderr, "approve or reject") {
		t.Errorf("answer to an approval: exit %d %s", r.code, r.stderr)
	}
	if r := reply(nil, "approve", "r-20260101T000000-abcdef", "gate"); r.code != ExitUsage || !strings.Contains(r.stderr, `run "r-20260101T000000-abcdef" not found`) {
		t.Errorf("approve an unknown run: exit %d %s", r.code, r.stderr)
	}
	r := reply(nil, "approve", runID, "gate", "--json")
	var v worker.HITLValue
	if r.code != ExitOK || json.Unmarshal([]byte(r.stdout), &v) != nil || v.Outcome != "route:approve" || v.RepliedBy != standInOperator {
		t.Fatalf("approve --target aws: exit %d %+v\n%s%s", r.code, v, r.stdout, r.stderr)
	}

	// The question, from the run viewer's form on the stack.
	if _, ref := run.waitingOn(t, awsWaitLine); ref != "ask#1" {
		t.Fatalf("second wait %s, want ask#1", ref)
	}
	o := &UIOptions{Target: TargetAWS, Addr: "127.0.0.1:0"}
	o.AWS = AWSOptions{EndpointURL: flagValue(t, flags, "--endpoint-url"), Region: flagValue(t, flags, "--region"), Stack: flagValue(t, flags, "--stack"),
		CABundle: flagValue(t, flags, "--ca-bundle")}
	ui := startUI(t, o)
	_, page, _ := ui.get(t, "/runs/"+runID)
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if csrf == nil || !strings.Contains(page, `value="answer"`) {
		t.Fatalf("the stack's run page of a waiting question has no answer form:\n%s", page)
	}
	form := url.Values{"decision": {"answer"}, "text": {"the blue one"}, "csrf": {csrf[1]}}
	req, _ := http.NewRequest("POST", ui.base+"/runs/"+runID+"/nodes/ask/hitl", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", ui.base)
	resp, err = (&http.Client{Jar: ui.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("answer from the stack's run viewer: %d\n%s", resp.StatusCode, body)
	}
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("the gated run on the stack: exit %d\n%s", code, run.log())
	}
	if got, want := join(steps(run.log())), "draft#1:done gate#1:route:approve ask#1:done publish#1:done"; got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	// The run is over: nothing to reply to (exit 1, as embedded).
	if r := reply(nil, "approve", runID, "gate"); r.code != ExitFailed || !strings.Contains(r.stderr, "is not running") {
		t.Errorf("approve after the end: exit %d %s", r.code, r.stderr)
	}

	// An agent's question, answered with `stratus answer --target aws`:
	// the agent runs again with the answer in its prompt.
	writeTestFile(t, filepath.Join(spy, "asking"), "")
	run = startCLI(t, append([]string{"run", filepath.Join(dir, "asking.md"), "--dir", dir}, flags...)...)
	runID, ref = run.waitingOn(t, awsWaitLine)
	if ref != "draft.hitl#1" || !strings.Contains(run.log(), "Which color should the button be?") {
		t.Fatalf("waiting step %s, want draft.hitl#1 asking the question:\n%s", ref, run.log())
	}
	if r := reply(nil, "answer", runID, "draft", "teal, please"); r.code != ExitOK || !strings.Contains(r.stdout, "draft.hitl#1 → answered") {
		t.Fatalf("answer --target aws: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("the asking run on the stack: exit %d\n%s", code, run.log())
	}
	if got, want := join(steps(run.log())), "draft#1:human_input draft.hitl#1:answered draft#2:done publish#1:done"; got != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
	reqs, _ := filepath.Glob(filepath.Join(spy, "req-*draft.2*"))
	if len(reqs) != 1 || !strings.Contains(readFile(t, reqs[0]), "## Human answer") || !strings.Contains(readFile(t, reqs[0]), "teal, please") {
		t.Errorf("the agent's second visit (%v) does not read the answer", reqs)
	}
}

// flagValue is the value after name in a flags line.
func flagValue(t *testing.T, flags []string, name string) string {
	t.Helper()
	for i, f := range flags {
		if f == name && i+1 < len(flags) {
			return flags[i+1]
		}
	}
	t.Fatalf("no %s in %v", name, flags)
	return ""
}
