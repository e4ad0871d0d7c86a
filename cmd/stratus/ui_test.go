package main

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/testenv"
)

// uiViewer is a `stratus ui` a test started: its loopback base URL, the
// URL it printed (with its secret), the secret, and a client logged in
// through that URL as a browser is (its cookie jar holds the cookie).
type uiViewer struct {
	base, printed, secret string
	stderr                *syncBuffer
	client                *http.Client
}

// printedURL is the URL `stratus ui` prints: the viewer's, with its secret.
var printedURL = regexp.MustCompile(`run viewer at (http://\S+/\?token=(\S+)) \(`)

// startUI runs `stratus ui` with o in process until the test ends; its
// base URL is http://127.0.0.1:PORT whatever host it listens on. The
// client is logged in by visiting base/?token=SECRET.
func startUI(t *testing.T, o *UIOptions) *uiViewer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done := make(chan string, 1), make(chan error, 1)
	v := &uiViewer{stderr: &syncBuffer{}}
	o.IO = IO{In: strings.NewReader(""), Out: io.Discard, Err: v.stderr}
	o.ready = func(a string) { addr <- a }
	go func() { done <- runUI(ctx, o) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case a := <-addr:
		v.base = "http://127.0.0.1" + a[strings.LastIndex(a, ":"):]
	case err := <-done:
		t.Fatalf("stratus ui: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("stratus ui did not listen within 10 s")
	}
	m := printedURL.FindStringSubmatch(v.stderr.String())
	if m == nil {
		t.Fatalf("stratus ui printed no URL with its secret:\n%s", v.stderr)
	}
	v.printed, v.secret = m[1], m[2]
	jar, _ := cookiejar.New(nil)
	v.client = &http.Client{Jar: jar}
	resp, err := v.client.Get(v.base + "/?token=" + v.secret)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Request.URL.RawQuery != "" {
		t.Fatalf("logging in at %s/?token=…: %d at %s", v.base, resp.StatusCode, resp.Request.URL)
	}
	return v
}

// serveUI runs `stratus ui --dir dir` on a free loopback port.
func serveUI(t *testing.T, dir string) *uiViewer {
	t.Helper()
	return startUI(t, &UIOptions{Dir: dir, Addr: "127.0.0.1:0"})
}

// get is a GET of path through the logged-in client.
func (v *uiViewer) get(t *testing.T, path string) (int, string, http.Header) {
	t.Helper()
	return do(t, v.client, "GET", v.base+path, nil)
}

// get is a GET of u with no credential: another user's.
func get(t *testing.T, u string) (int, string, http.Header) {
	t.Helper()
	return do(t, http.DefaultClient, "GET", u, nil)
}

func do(t *testing.T, c *http.Client, method, u string, hdr http.Header) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	maps.Copy(req.Header, hdr)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// demoRun makes the demo's run (the example task through the built-in
// flow with the script engine: review reworks once) in a fresh work dir.
func demoRun(t *testing.T) (dir, runID string) {
	t.Helper()
	dir = installExample(t, testenv.ModuleRoot(t))
	r := runCLI(t, "run", filepath.Join(dir, "task.md"), "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	return dir, decodeRun(t, r.stdout).RunID
}

// The viewer's pages, without JavaScript. The list shows the
// demo run and filters by status; the run page draws the flow with every
// node coloured by its latest visit, the loop with its spend, the
// timeline and the summary; a step page shows the prompt beside the
// outputs and an evaluator's findings; unknown runs and steps are 404,
// a bad visit 400; the pages keep to their own origin.
func TestUI_DemoRunWithoutJavaScript(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t)
	v := serveUI(t, dir)
	base := v.base

	code, body, hdr := v.get(t, "/")
	if code != 200 || !strings.Contains(body, `data-run="`+runID+`" data-status="done"`) || !strings.Contains(body, "demo-greeting") {
		t.Fatalf("runs page: %d\n%s", code, body)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}
	if _, body, _ := v.get(t, "/?status=failed"); strings.Contains(body, `data-run="`+runID+`"`) {
		t.Errorf("?status=failed lists the done run")
	}

	code, body, _ = v.get(t, "/runs/"+runID)
	if code != 200 {
		t.Fatalf("run page: %d\n%s", code, body)
	}
	for _, n := range []string{"planning", "implementation", "review", "fixing", "publish"} {
		if !strings.Contains(body, `id="node-`+n+`" data-node="`+n+`" data-status="done"`) {
			t.Errorf("the graph has no done node %s", n)
		}
	}
	for _, want := range []string{"review ×2", "rework · review_fix ≤3 · spent 1/3", "kind-evaluator", "class=\"edge back\"",
		"supervisor#1 observe", `href="/runs/` + runID + `/steps/review/2"`, "<h1>Add a --name flag to the greeting command</h1>", "12310 tokens", "<th>duration</th>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the run page lacks %q", want)
		}
	}
	// review#1 asked for rework: its bar takes the failure colour.
	if n := len(regexp.MustCompile(`<rect class="bar st-done" x="[0-9.]+" y="0" width="[0-9.]+" height="10">`).FindAllString(body, -1)); n != 7 {
		t.Errorf("%d done timeline bars; want 7 (6 steps and 2 supervisor turns, but review#1's rework)", n)
	}
	if !regexp.MustCompile(`<span class="ref">review#1</span><svg[^>]*><rect class="bar st-failed"`).MatchString(body) {
		t.Errorf("review#1 (rework) is not drawn in the failure colour")
	}

	code, body, _ = v.get(t, "/runs/"+runID+"/steps/review/1")
	if code != 200 || !strings.Contains(body, `class="sev-high gating"`) || !strings.Contains(body, "gate severity: high") ||
		!strings.Contains(body, "<h2>Prompt</h2>") || !strings.Contains(body, "<h3>review.md (final)</h3>") || !strings.Contains(body, "&#34;severity&#34;: &#34;high&#34;") {
		t.Errorf("review#1's page: %d\n%s", code, body)
	}
	if code, body, _ := v.get(t, "/runs/"+runID+"/steps/planning/1"); code != 200 || !strings.Contains(body, "<h3>plan.md</h3>") || !strings.Contains(body, "runner: the engine ended ") ||
		!strings.Contains(body, "<h3>planning.md (final)</h3>") {
		t.Errorf("planning#1's page: %d\n%s", code, body)
	}
	if _, body, _ := v.get(t, "/runs/"+runID+"/steps/review/2"); !strings.Contains(body, `← review#1</a>`) {
		t.Errorf("review#2's page does not link to review#1")
	}
	for path, want := range map[string]int{"/runs/" + runID + "/steps/review/01": 400, "/runs/" + runID + "/steps/review/+1": 400, "/runs/nope": 404, "/runs/" + runID + "/steps/review/9": 404, "/runs/" + runID + "/steps/review/x": 400, "/static/style.css": 200, "/nowhere": 404, "/?status=bogus": 400} {
		if code, _, _ := v.get(t, path); code != want {
			t.Errorf("GET %s = %d; want %d", path, code, want)
		}
	}
	// A wrong path or filter gets the viewer's page
	// saying what is valid, not a bare "404 page not found".
	if _, body, _ := v.get(t, "/runs/"+runID+"/steps/planning"); !strings.Contains(body, "/runs/RUN/steps/NODE/VISIT") {
		t.Errorf("a step path without its visit: %.300s", body)
	}
	if _, body, _ := v.get(t, "/?status=bogus"); !strings.Contains(body, "valid: running, waiting, done, failed, manual_action_required, interrupted") {
		t.Errorf("an unknown status filter: %.300s", body)
	}
	// DNS rebinding: another site's name resolving to this loopback
	// address gets nothing.
	req, _ := http.NewRequest("GET", base+"/runs/"+runID, nil)
	req.Host = "evil.example" + base[strings.LastIndex(base, ":"):]
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("a request for Host %s: %v %v; want 421", req.Host, resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}
	if code, _, _ := do(t, http.DefaultClient, "GET", strings.Replace(base, "127.0.0.1", "localhost", 1)+"/", http.Header{"Authorization": {"Bearer " + v.secret}}); code != 200 {
		t.Errorf("localhost at the viewer's port, with the secret: %d; want 200", code)
	}
	// The event stream of an ended run: one snapshot, then it closes.
	code, body, hdr = v.get(t, "/runs/"+runID+"/events")
	if code != 200 || hdr.Get("Content-Type") != "text/event-stream" || !strings.Contains(body, `"review":"done"`) || !strings.Contains(body, `"ended":true`) {
		t.Errorf("events: %d %s\n%s", code, hdr.Get("Content-Type"), body)
	}
}

// A waiting hitl node shows its question's context and the reply forms; a
// reply is taken only from the viewer's own form (same origin, its CSRF
// token), then the run goes on as with `stratus approve`.
func TestUI_GateAnsweredFromTheForm(t *testing.T) {
	t.Parallel()
	// The gate says what it asks, rendered with the run's variables, in the
	// wait line and on the page.
	gated := strings.Replace(approvalFlow, " GATE_TIMEOUT}", `, question: "Ship {task_id} as drafted?"}`, 1)
	dir, task := setupHITLRun(t, "gated", gated, "default:\n  report: ok\n")
	run := startRun(t, dir, task)
	runID, ref := run.waiting(t)
	if ref != "gate#1" {
		t.Fatalf("waiting %s; want gate#1", ref)
	}
	if !strings.Contains(run.log(), "approval: task t-gated (Human in the loop): Ship t-gated as drafted?") {
		t.Errorf("the wait line does not ask the node's question:\n%s", run.log())
	}
	v := serveUI(t, dir)
	base := v.base
	code, body, _ := v.get(t, "/runs/"+runID)
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(body)
	if code != 200 || csrf == nil || !strings.Contains(body, "gate#1 waits for you (approval)") || !strings.Contains(body, `data-node="gate" data-status="waiting"`) ||
		!strings.Contains(body, "draft#1: draft.md") || !strings.Contains(body, "Ship t-gated as drafted?") || strings.Contains(body, `value="answer"`) {
		t.Fatalf("the run page of a waiting gate: %d\n%s", code, body)
	}
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", base+"/runs/"+runID+"/nodes/gate/hitl", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := (&http.Client{Jar: v.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, c := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":     {url.Values{"decision": {"approve"}}, base},
		"wrong token":  {url.Values{"decision": {"approve"}, "csrf": {strings.Repeat("0", 64)}}, base},
		"cross origin": {url.Values{"decision": {"approve"}, "csrf": {csrf[1]}}, "http://evil.example"},
		"no origin":    {url.Values{"decision": {"approve"}, "csrf": {csrf[1]}}, ""},
	} {
		if got := post(c.form, c.origin); got != 403 {
			t.Errorf("%s: %d; want 403", name, got)
		}
	}
	// A read-only viewer shows the command that replies, for this gate's
	// kind and with the work dir, and no form.
	remote := serveRemoteUI(t, dir)
	if _, page, _ := remote.get(t, "/runs/"+runID); !strings.Contains(page, "stratus approve "+runID+" gate --dir "+dir) || strings.Contains(page, "stratus answer") || strings.Contains(page, `name="csrf"`) {
		t.Errorf("the read-only page of a waiting gate:\n%s", page)
	}
	if got := post(url.Values{"decision": {"answer"}, "text": {"yes"}, "csrf": {csrf[1]}}, base); got != 400 {
		t.Errorf("an answer to an approval: %d; want 400 (the page says why)", got)
	}
	if got := post(url.Values{"decision": {"reject"}, "text": {"not yet"}, "csrf": {csrf[1]}}, base); got != 303 {
		t.Fatalf("reject from the form: %d; want 303 back to the run", got)
	}
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("run exit %d\n%s", code, run.log())
	}
	if got := join(steps(run.log())); got != "draft#1:done gate#1:route:deny revise#1:done publish#1:done" {
		t.Errorf("steps %s", got)
	}
}

// The hardening finding, as the attacker did it (docs/security.md § The
// run viewer's secret): another local user fetches the run page of a
// waiting gate, copies its CSRF token and posts approve; the run went on
// to done. Now that user, without the URL `stratus ui` printed, gets a 401
// page with no form and no token, the approve POST — even with the real
// form token and the viewer's own Origin — is 401, and the gate still
// waits: its owner's reject through the viewer is what decides it.
func TestUI_AnotherUserCannotApproveAGate(t *testing.T) {
	t.Parallel()
	dir, task := setupHITLRun(t, "gated", strings.Replace(approvalFlow, " GATE_TIMEOUT}", "}", 1), "default:\n  report: ok\n")
	run := startRun(t, dir, task)
	runID, ref := run.waiting(t)
	if ref != "gate#1" {
		t.Fatalf("waiting %s; want gate#1", ref)
	}
	v := serveUI(t, dir)

	code, body, _ := get(t, v.base+"/runs/"+runID)
	if code != http.StatusUnauthorized || strings.Contains(body, `name="csrf"`) || strings.Contains(body, runID) || strings.Contains(body, "gate#1") {
		t.Errorf("another user's GET of the run page: %d\n%s\nwant 401 with no form, no token, nothing of the run", code, body)
	}
	_, page, _ := v.get(t, "/runs/"+runID) // the owner's page: the real token
	csrf := regexp.MustCompile(`name="csrf" value="([0-9a-f]{64})"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("the owner's page has no reply form:\n%s", page)
	}
	for name, tok := range map[string]string{"a made-up token": strings.Repeat("0", 64), "the form's own token": csrf[1]} {
		form := url.Values{"decision": {"approve"}, "csrf": {tok}}
		req, _ := http.NewRequest("POST", v.base+"/runs/"+runID+"/nodes/gate/hitl", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", v.base)
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("another user's approve with %s: %d; want 401", name, resp.StatusCode)
		}
	}
	if _, page, _ := v.get(t, "/runs/"+runID); !strings.Contains(page, "gate#1 waits for you (approval)") {
		t.Fatalf("after another user's approve the gate no longer waits:\n%s", page)
	}
	form := url.Values{"decision": {"reject"}, "text": {"not yet"}, "csrf": {csrf[1]}}
	req, _ := http.NewRequest("POST", v.base+"/runs/"+runID+"/nodes/gate/hitl", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", v.base)
	resp, err := (&http.Client{Jar: v.client.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the owner's reject: %v %v; want 303", resp, err)
	}
	resp.Body.Close()
	if code := run.wait(t); code != ExitOK {
		t.Fatalf("run exit %d\n%s", code, run.log())
	}
	if got := join(steps(run.log())); got != "draft#1:done gate#1:route:deny revise#1:done publish#1:done" {
		t.Errorf("steps %s; want the owner's reject to decide the gate", got)
	}
}

// `stratus ui --token-file FILE` takes its secret from a file only its
// owner could have written or read, as ssh takes a key file
// (docs/security.md § The run viewer's secret): a file others may read, a
// short secret, a file of another uid (as root it took one with mode
// 0600), a symbolic link, a file in a directory another user owns or
// others may write (its owner could swap the file) is a usage error naming
// the file and the rule, before anything listens; a good one is the
// secret of the URL it prints and of a script's Bearer. The cases of
// another uid need root, to play that user.
func TestUI_TokenFileMustBePrivateAndLong(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t)
	long := strings.Repeat("5e", 20)
	// private is a directory of the user's that no one else may write.
	private := func(t *testing.T) string {
		d := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		return d
	}
	write := func(t *testing.T, f, body string, mode os.FileMode) {
		if err := os.WriteFile(f, []byte(body+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(f, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	asNobody := func(t *testing.T, path string) {
		if os.Geteuid() != 0 {
			t.Skip("playing another user needs root")
		}
		if err := os.Lchown(path, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	for name, c := range map[string]struct {
		make func(t *testing.T) string // the --token-file
		want string
	}{
		"readable by others": {func(t *testing.T) string {
			f := filepath.Join(private(t), "token")
			write(t, f, long, 0o644)
			return f
		}, "chmod 600"},
		"short": {func(t *testing.T) string {
			f := filepath.Join(private(t), "token")
			write(t, f, "hunter2", 0o600)
			return f
		}, "at least 32 characters"},
		"missing": {func(t *testing.T) string { return filepath.Join(private(t), "token") }, "does not exist"},
		"another user's file, 0600": {func(t *testing.T) string {
			f := filepath.Join(private(t), "token")
			write(t, f, long, 0o600)
			asNobody(t, f)
			return f
		}, "belongs to uid 65534, not to you"},
		"a symbolic link, even the user's own, to a good file": {func(t *testing.T) string {
			d := private(t)
			write(t, filepath.Join(d, "real"), long, 0o600)
			f := filepath.Join(d, "token")
			if err := os.Symlink(filepath.Join(d, "real"), f); err != nil {
				t.Fatal(err)
			}
			return f
		}, "is a symbolic link"},
		"in a directory another user owns": {func(t *testing.T) string {
			d := private(t)
			f := filepath.Join(d, "token")
			write(t, f, long, 0o600)
			asNobody(t, d)
			return f
		}, "which belongs to uid 65534"},
		"in a directory others may write": {func(t *testing.T) string {
			d := private(t)
			f := filepath.Join(d, "token")
			write(t, f, long, 0o600)
			if err := os.Chmod(d, 0o1777); err != nil {
				t.Fatal(err)
			}
			return f
		}, "other users may write it"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := c.make(t)
			// Refused at once: a viewer that starts is killed, and fails.
			if r := runCLIWithin(t, 30*time.Second, "ui", "--dir", dir, "--addr", "127.0.0.1:0", "--token-file", f); r.code != ExitUsage || !strings.Contains(r.stderr, c.want) || !strings.Contains(r.stderr, f) || strings.Contains(r.stderr, long) {
				t.Errorf("exit %d %q; want %d naming %s and %q, never the secret", r.code, r.stderr, ExitUsage, f, c.want)
			}
		})
	}
	f := filepath.Join(private(t), "token")
	write(t, f, long, 0o600)
	v := startUI(t, &UIOptions{Dir: dir, Addr: "127.0.0.1:0", TokenFile: f})
	if v.secret != long {
		t.Errorf("the printed URL %s; want the file's secret", v.printed)
	}
	if code, _, _ := do(t, http.DefaultClient, "GET", v.base+"/runs/"+runID, http.Header{"Authorization": {"Bearer " + long}}); code != 200 {
		t.Errorf("a script with the file's secret: %d; want 200", code)
	}
}

// Headless Chromium opens the demo run's page as a user does, through the URL
// with the viewer's secret (docs/security.md § The run viewer's secret): the
// visit sets the cookie and lands on the page, whose stylesheet, script and
// event stream the cookie opens; the DOM holds every node done and the
// timeline's bars. The screenshot is the test's artifact
// ($STRATUS_UI_SCREENSHOT, or the test's temp dir; the README's
// docs/ui-run.png is one).
func TestUI_ChromiumRendersTheDemoRun(t *testing.T) {
	t.Parallel()
	chromium := testenv.MustHaveCommand(t, "chromium", "the run viewer's browser test")
	dir, runID := demoRun(t)
	v := serveUI(t, dir)
	page := v.base + "/runs/" + runID + "?token=" + v.secret
	profile := t.TempDir()
	args := func(extra ...string) []string {
		return append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--user-data-dir=" + profile, "--virtual-time-budget=3000"}, extra...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dom, err := exec.CommandContext(ctx, chromium, args("--dump-dom", page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	for _, n := range []string{"planning", "implementation", "review", "fixing", "publish"} {
		if !strings.Contains(string(dom), `id="node-`+n+`" data-node="`+n+`" data-status="done"`) {
			t.Errorf("the DOM has no done node %s", n)
		}
	}
	// Eight bars: the review's rework is drawn in the failure colour, the
	// seven others in done's.
	bars := func(status string) int {
		return len(regexp.MustCompile(`<rect class="bar st-`+status+`" x="[0-9.]+" y="0" width="[0-9.]+"`).FindAll(dom, -1))
	}
	if done, failed := bars("done"), bars("failed"); done != 7 || failed != 1 {
		t.Errorf("the rendered DOM has %d done and %d failed timeline bars; want 7 and 1:\n%.2000s", done, failed, dom)
	}
	shot := os.Getenv("STRATUS_UI_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "ui-run.png")
	}
	if out, err := exec.CommandContext(ctx, chromium, args("--window-size=1000,680", "--screenshot="+shot, page)...).CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Errorf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot: %s", shot)
}

// serveRemoteUI serves `stratus ui --remote --addr 0.0.0.0:0` over dir
// until the test ends.
func serveRemoteUI(t *testing.T, dir string) *uiViewer {
	t.Helper()
	return startUI(t, &UIOptions{Dir: dir, Addr: "0.0.0.0:0", Remote: true})
}

// A non-loopback --addr needs --remote, and the viewer is then read-only:
// whoever reaches it with its secret reads runs but answers no gate; without
// the secret, nothing.
func TestUI_RemoteIsExplicitAndReadOnly(t *testing.T) {
	t.Parallel()
	dir, runID := demoRun(t)
	if r := runCLI(t, "ui", "--dir", dir, "--addr", "0.0.0.0:0"); r.code != ExitUsage || !strings.Contains(r.stderr, "--remote") {
		t.Errorf("ui --addr 0.0.0.0:0: exit %d %q; want %d naming --remote", r.code, r.stderr, ExitUsage)
	}
	v := serveRemoteUI(t, dir)
	if !strings.HasPrefix(v.printed, "http://localhost:") || !strings.Contains(v.stderr.String(), "warning: listening on") {
		t.Errorf("stderr %q: want a URL one can open and a warning", v.stderr)
	}
	req, _ := http.NewRequest("GET", v.base+"/runs/"+runID, nil)
	req.Host = "stratus.example:7777" // any name: it was asked to be reachable
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("GET the run page without the secret: %v %v; want 401", resp, err)
	} else {
		resp.Body.Close()
	}
	req, _ = http.NewRequest("GET", v.base+"/runs/"+runID, nil)
	req.Host = "stratus.example:7777"
	for _, c := range v.client.Jar.Cookies(req.URL) { // the cookie a login at that name would set
		req.AddCookie(c)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the run page with the cookie: %v %v", resp, err)
	}
	resp.Body.Close()
	post, _ := http.NewRequest("POST", v.base+"/runs/"+runID+"/nodes/review/hitl", strings.NewReader("action=approve"))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	post.Header.Set("Origin", v.base)
	if resp, err := v.client.Do(post); err != nil || resp.StatusCode < 400 || resp.StatusCode >= 500 {
		t.Errorf("a gate reply through a remote viewer: %v %v; want a 4xx refusal", resp, err)
	} else {
		resp.Body.Close()
	}
}

// README.md § Task pool: `stratus ui` on a work dir shows its pool's
// queued tasks above the runs, in the order `stratus tasks` lists them,
// with what each waits on; without pending/ it shows none.
func TestUI_RunsPageShowsThePoolsQueuedTasks(t *testing.T) {
	t.Parallel()
	dir := poolWorkDir(t, slowEngine)
	poolTask(t, dir, "pending", "t1", "priority: low\n")
	poolTask(t, dir, "pending", "t2", "priority: high\ndepends_on: [t10]\n")
	poolTask(t, dir, "pending", "t3", "priority: high\nqueue: gpu\n")
	poolTask(t, dir, "pending", "t10", "")
	poolTask(t, dir, "preparing", "t4", "")
	v := serveUI(t, dir)
	code, body, _ := v.get(t, "/")
	queued, _, _ := strings.Cut(body, "<h1>Runs</h1>")
	if code != 200 || !strings.Contains(queued, "<h1>Queued tasks</h1>") {
		t.Fatalf("runs page: %d\n%s", code, body)
	}
	var got []string
	for _, m := range regexp.MustCompile(`(?s)<tr data-task="([^"]*)" data-state="pending">.*?<td>(next|waits: [^<]*)</td>`).FindAllStringSubmatch(queued, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	if want := []string{"t2 waits: depends_on t10", "t3 waits: queue other", "t10 next", "t1 waits: queue full"}; !slices.Equal(got, want) {
		t.Errorf("queued tasks %q; want %q\n%s", got, want, queued)
	}
	if tasks := poolTasks(t, dir); tasks["t1"].Title != "t1" || tasks["t4"].State != "preparing" {
		t.Errorf("stratus tasks --json: %+v", tasks)
	}
	if err := os.RemoveAll(filepath.Join(dir, "tasks", "pending")); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := v.get(t, "/"); code != 200 || strings.Contains(body, "Queued tasks") {
		t.Errorf("without tasks/pending: %d, and the page shows a pool:\n%s", code, body)
	}
}
