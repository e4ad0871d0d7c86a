package lambdas

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MaxPayloadBytes is Lambda's limit on a synchronous invocation's request
// and response payloads: 6 MB.
const MaxPayloadBytes = 6 << 20

// Lambda's defaults when the template gives no MemorySize or Timeout.
const (
	DefaultMemoryMB = 128
	DefaultTimeout  = 3 * time.Second
)

var (
	// ErrTimeout is an invocation that ran past the function's timeout (the
	// emulator's "Task timed out after N.00 seconds"). The emulator kills
	// the runtime; the next invocation starts a new one (a cold start).
	ErrTimeout = errors.New("lambdas: the function timed out")
	// ErrPayloadTooLarge is a request or response payload over
	// MaxPayloadBytes.
	ErrPayloadTooLarge = errors.New("lambdas: payload over Lambda's 6 MB limit")
	// ErrStopped is an Invoke after Stop.
	ErrStopped = errors.New("lambdas: the function was stopped")
)

// FunctionError is an invocation the function answered with an error (its
// handler returned one, or the runtime exited: errorType
// "Runtime.ExitError"; or its response was over the limit), as Lambda's Invoke API reports it with
// X-Amz-Function-Error: the error object's errorType and errorMessage.
type FunctionError struct {
	Type    string // errorType: "errorString", "Runtime.ExitError", …
	Message string // errorMessage
	Payload []byte // the error object as the runtime sent it
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("lambda function error: %s: %s", e.Type, e.Message)
}

// Unwrap makes a response over the limit (the emulator's, as Lambda's,
// errorType "Function.ResponseSizeTooLarge") ErrPayloadTooLarge too.
func (e *FunctionError) Unwrap() error {
	if e.Type == "Function.ResponseSizeTooLarge" {
		return ErrPayloadTooLarge
	}
	return nil
}

// Invoker is what the event sources call: a Function, or a stand-in in tests.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// Config is one function as the deployed stack gives it.
type Config struct {
	Name      string            // AWS_LAMBDA_FUNCTION_NAME: the deployed function's name (or its logical id)
	Bootstrap string            // the function's bootstrap executable (make lambdas)
	Env       map[string]string // its Environment.Variables, resolved
	MemoryMB  int               // MemorySize in MB; 0 = DefaultMemoryMB
	Timeout   time.Duration     // Timeout (whole seconds); 0 = DefaultTimeout

	Region          string // AWS_REGION and AWS_DEFAULT_REGION
	AccessKeyID     string // the execution role's credentials, as Lambda hands them to the runtime
	SecretAccessKey string
	SessionToken    string
	Endpoint        string // AWS_ENDPOINT_URL: where the function's SDK calls go (moto); "" = AWS

	RIE         string    // the emulator's executable (make rie: bin/aws-lambda-rie)
	Concurrency int       // instances, each its own emulator and runtime; 0 = 1
	LogWriter   io.Writer // the emulators' and runtimes' output, each line prefixed "Name[i] "; nil = discarded
}

// Function is a started function: Concurrency instances, each serving one
// invocation at a time, as a Lambda execution environment does.
type Function struct {
	cfg  Config
	idle chan *instance
	all  []*instance
	logs *lockedWriter

	mu      sync.Mutex
	reports []Report
	stopped bool
	done    chan struct{}
}

// Report is one invocation's REPORT line, with the figures the emulator
// leaves out filled in.
type Report struct {
	Function        string
	Instance        int
	RequestID       string
	Init            time.Duration // the cold start before this invocation (INIT REPORT); 0 for a warm one
	Duration        time.Duration
	Billed          time.Duration
	MemorySizeMB    int
	MaxMemoryUsedMB int // the runtime's peak RSS (VmHWM) so far, rounded up; 0 when it was not readable (a runtime killed at its timeout)
	TimedOut        bool
}

// String renders r as Lambda's REPORT line.
func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "REPORT %s[%d] RequestId: %s\tDuration: %.2f ms\tBilled Duration: %d ms\tMemory Size: %d MB\tMax Memory Used: %d MB",
		r.Function, r.Instance, r.RequestID, ms(r.Duration), r.Billed.Milliseconds(), r.MemorySizeMB, r.MaxMemoryUsedMB)
	if r.Init > 0 {
		fmt.Fprintf(&b, "\tInit Duration: %.2f ms", ms(r.Init))
	}
	if r.TimedOut {
		b.WriteString("\tStatus: timeout")
	}
	return b.String()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Start starts cfg.Concurrency emulators of the function, each listening
// on a loopback port of its own (the invoke and runtime API ports), and
// returns once every one accepts connections. The runtime itself starts
// on an instance's first invocation, as a cold start on Lambda does.
// Errors: a missing bootstrap or emulator (naming `make lambdas` or `make
// rie`), an emulator that exited or did not listen within 10 s (its
// output).
func Start(ctx context.Context, cfg Config) (*Function, error) {
	if cfg.Name == "" {
		return nil, errors.New("lambdas: Config.Name is empty")
	}
	for _, p := range []struct{ path, what, make string }{{cfg.Bootstrap, "bootstrap", "make lambdas"}, {cfg.RIE, "Runtime Interface Emulator", "make rie"}} {
		if p.path == "" {
			return nil, fmt.Errorf("lambdas: %s: no %s path given (%s builds it)", cfg.Name, p.what, p.make)
		}
		if st, err := os.Stat(p.path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("lambdas: %s: the %s %s is not an executable file (%s builds it)", cfg.Name, p.what, p.path, p.make)
		}
	}
	if err := checkArch(cfg.Bootstrap); err != nil {
		return nil, fmt.Errorf("lambdas: %s: %w", cfg.Name, err)
	}
	if cfg.MemoryMB <= 0 {
		cfg.MemoryMB = DefaultMemoryMB
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Timeout%time.Second != 0 {
		return nil, fmt.Errorf("lambdas: %s: timeout %v is not whole seconds (Lambda's Timeout is in seconds)", cfg.Name, cfg.Timeout)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	f := &Function{cfg: cfg, idle: make(chan *instance, cfg.Concurrency), logs: &lockedWriter{w: cfg.LogWriter}, done: make(chan struct{})}
	for i := range cfg.Concurrency {
		in, err := f.startInstance(ctx, i)
		if err != nil {
			f.Stop()
			return nil, err
		}
		f.all = append(f.all, in)
		f.idle <- in
	}
	return f, nil
}

// Name is the function's name (Config.Name).
func (f *Function) Name() string { return f.cfg.Name }

// Config is the configuration the function runs with, defaults filled in.
func (f *Function) Config() Config { return f.cfg }

// env is the environment Lambda gives a provided.al2023 runtime (the
// emulator passes its own environment on to the runtime): the reserved
// variables, the credentials, then the function's own variables, and
// nothing of the calling process's.
func (f *Function) env() []string {
	c := f.cfg
	m := map[string]string{
		"PATH":                            "/usr/local/bin:/usr/bin/:/bin:/opt/bin",
		"LD_LIBRARY_PATH":                 "/lib64:/usr/lib64:/var/runtime:/var/runtime/lib:/var/task:/var/task/lib:/opt/lib",
		"LANG":                            "en_US.UTF-8",
		"TZ":                              ":UTC",
		"_HANDLER":                        "bootstrap",
		"LAMBDA_TASK_ROOT":                filepath.Dir(c.Bootstrap),
		"LAMBDA_RUNTIME_DIR":              "/var/runtime",
		"AWS_LAMBDA_FUNCTION_NAME":        c.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(c.MemoryMB),
		"AWS_LAMBDA_FUNCTION_TIMEOUT":     strconv.Itoa(int(c.Timeout / time.Second)),
		"AWS_LAMBDA_LOG_GROUP_NAME":       "/aws/lambda/" + c.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME":      time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + randomHex(16),
		"AWS_LAMBDA_INITIALIZATION_TYPE":  "on-demand",
		"AWS_REGION":                      c.Region,
		"AWS_DEFAULT_REGION":              c.Region,
		"AWS_ACCESS_KEY_ID":               c.AccessKeyID,
		"AWS_SECRET_ACCESS_KEY":           c.SecretAccessKey,
		"AWS_SESSION_TOKEN":               c.SessionToken,
		"AWS_ENDPOINT_URL":                c.Endpoint,
	}
	for k, v := range c.Env {
		m[k] = v
	}
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v != "" {
			out = append(out, k+"="+v)
		}
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// instance is one emulator and the runtime it starts.
type instance struct {
	f      *Function
	n      int
	cmd    *exec.Cmd
	url    string // the emulator's invocations URL
	exited chan struct{}
	client *http.Client

	mu       sync.Mutex
	lastInit time.Duration       // an INIT REPORT not yet claimed by an invocation
	pending  map[string]*pending // request id -> what the emulator said of it
	output   []string            // the last lines of output, for errors
}

// pending is an invocation's traces in the emulator's output: its INVOKE
// START (stderr, after any INIT REPORT of its cold start) and its REPORT
// line (stdout).
type pending struct {
	started chan struct{}
	init    time.Duration
	report  chan Report
}

// startInstance starts emulator i. The two ports are picked free and
// handed over, which can race with another process: an emulator that
// exits before it listens is retried on other ports.
func (f *Function) startInstance(ctx context.Context, i int) (*instance, error) {
	var last error
	for range 3 {
		in, err := f.tryInstance(ctx, i)
		if err == nil {
			return in, nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

func (f *Function) tryInstance(ctx context.Context, i int) (*instance, error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	invokeAddr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(f.cfg.RIE,
		// INIT REPORT is logged at info (a flag: the emulator hands its
		// environment on to the runtime).
		"--log-level", "info",
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		f.cfg.Bootstrap)
	cmd.Dir = filepath.Dir(f.cfg.Bootstrap)
	cmd.Env = f.env()
	// Its own process group, so Stop ends it and what it started; and it
	// dies with this process (Pdeathsig, from a thread locked for the
	// process's life: the signal follows the thread that started it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	in := &instance{f: f, n: i, cmd: cmd, exited: make(chan struct{}), pending: map[string]*pending{},
		url: "http://" + invokeAddr + "/2015-03-31/functions/function/invocations",
		// A connection per invocation: a refused one then means the
		// request never reached the emulator (safe to send again), never
		// a pooled connection gone stale.
		client: &http.Client{Transport: &http.Transport{DisableCompression: true, DisableKeepAlives: true}}}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		started <- cmd.Start()
		<-in.exited
	}()
	if err := <-started; err != nil {
		close(in.exited)
		return nil, fmt.Errorf("lambdas: %s: start %s: %w", f.cfg.Name, f.cfg.RIE, err)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); in.read(stdout, in.stdoutLine) }()
	go func() { defer readers.Done(); in.read(stderr, in.stderrLine) }()
	go func() {
		readers.Wait()
		cmd.Wait()
		close(in.exited)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", invokeAddr, time.Second)
		if err == nil {
			c.Close()
			return in, nil
		}
		select {
		case <-in.exited:
			return nil, fmt.Errorf("lambdas: %s: the emulator exited before it listened on %s; its output:\n%s", f.cfg.Name, invokeAddr, in.tail())
		case <-ctx.Done():
			in.kill()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			in.kill()
			return nil, fmt.Errorf("lambdas: %s: the emulator did not listen on %s within 10 s; its output:\n%s", f.cfg.Name, invokeAddr, in.tail())
		}
	}
}

// freePorts returns n loopback ports free at the time of asking.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// read hands each line of r to line and to the log. It never stops
// reading before EOF: a full pipe would block the emulator.
func (in *instance) read(r io.Reader, line func(string)) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		s, err := br.ReadString('\n')
		if s != "" {
			s = strings.TrimRight(s, "\r\n")
			in.mu.Lock()
			in.output = append(in.output, s)
			if len(in.output) > 40 {
				in.output = in.output[len(in.output)-40:]
			}
			in.mu.Unlock()
			in.f.logs.line(fmt.Sprintf("%s[%d] ", in.f.cfg.Name, in.n), s)
			line(s)
		}
		if err != nil {
			return
		}
	}
}

func (in *instance) tail() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return strings.Join(in.output, "\n")
}

var (
	initReportRE  = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)
	invokeStartRE = regexp.MustCompile(`INVOKE START\(requestId: ([^)\s]+)\)`)
	reportRE      = regexp.MustCompile(`^REPORT RequestId: (\S+)\t`)
	reportFieldRE = regexp.MustCompile(`([A-Za-z ]+): ([0-9.]+) (ms|MB)`)
)

// stderrLine follows the emulator's log: a cold start's INIT REPORT comes
// before the INVOKE START of the invocation it serves.
func (in *instance) stderrLine(s string) {
	if m := initReportRE.FindStringSubmatch(s); m != nil {
		v, _ := strconv.ParseFloat(m[1], 64)
		in.mu.Lock()
		in.lastInit = time.Duration(v * float64(time.Millisecond))
		in.mu.Unlock()
		return
	}
	if m := invokeStartRE.FindStringSubmatch(s); m != nil {
		in.mu.Lock()
		if p := in.pending[m[1]]; p != nil {
			p.init, in.lastInit = in.lastInit, 0
			close(p.started)
		}
		in.mu.Unlock()
	}
}

// stdoutLine picks the REPORT lines out of the emulator's standard output
// (the runtime's output goes there too).
func (in *instance) stdoutLine(s string) {
	m := reportRE.FindStringSubmatch(s)
	if m == nil {
		return
	}
	r := Report{Function: in.f.cfg.Name, Instance: in.n, RequestID: m[1]}
	for _, fm := range reportFieldRE.FindAllStringSubmatch(s, -1) {
		v, _ := strconv.ParseFloat(fm[2], 64)
		d := time.Duration(v * float64(time.Millisecond))
		switch strings.TrimSpace(fm[1]) {
		case "Duration":
			r.Duration = d
		case "Billed Duration":
			r.Billed = d
		case "Memory Size":
			r.MemorySizeMB = int(v)
		case "Max Memory Used":
			r.MaxMemoryUsedMB = int(v)
		}
	}
	// The emulator's Max Memory Used is its Memory Size, not a measure.
	if r.MaxMemoryUsedMB == r.MemorySizeMB {
		r.MaxMemoryUsedMB = 0
	}
	in.mu.Lock()
	p := in.pending[m[1]]
	in.mu.Unlock()
	if p != nil {
		select {
		case p.report <- r:
		default:
		}
	}
}

// kill ends the emulator, its runtime and whatever the runtime started:
// every process descended from the emulator, each in its own group (the
// emulator starts the runtime in a new process group).
func (in *instance) kill() {
	if in.cmd.Process == nil {
		return
	}
	pid := in.cmd.Process.Pid
	pids := append(descendants(pid), pid)
	for _, p := range pids {
		if pg, err := syscall.Getpgid(p); err == nil && pg == p {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
		}
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	// Its output ends when every holder of its pipes has gone; one that
	// escaped (a daemon of its own) must not hold Stop for ever.
	select {
	case <-in.exited:
	case <-time.After(5 * time.Second):
	}
}

// Stop ends every instance of the function (each emulator, its runtime
// and what they started) and waits for them. In-flight invocations fail.
func (f *Function) Stop() {
	f.mu.Lock()
	if f.stopped {
		f.mu.Unlock()
		return
	}
	f.stopped = true
	close(f.done)
	all := append([]*instance(nil), f.all...)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range all {
		wg.Add(1)
		go func() { defer wg.Done(); in.kill() }()
	}
	wg.Wait()
}

// maxReports bounds what a long-lived function keeps: the most recent.
const maxReports = 10000

// Reports returns the REPORT of every invocation so far (the last
// 10,000), in the order they ended.
func (f *Function) Reports() []Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Report(nil), f.reports...)
}

// Invoke invokes the function synchronously (RequestResponse) on an idle
// instance, waiting for one while all are busy, and returns its response
// payload. Errors: ErrPayloadTooLarge (the request, or the response,
// over MaxPayloadBytes), ErrTimeout, *FunctionError, ErrStopped, ctx's
// error while waiting for an instance, or the emulator's failure.
func (f *Function) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if len(payload) > MaxPayloadBytes {
		return nil, fmt.Errorf("%w: the request is %d bytes", ErrPayloadTooLarge, len(payload))
	}
	var in *instance
	select {
	case in = <-f.idle:
	case <-f.done:
		return nil, ErrStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { f.idle <- in }()
	for try := 0; ; try++ {
		select {
		case <-in.exited:
			// The emulator died (killed from outside, out of memory): a
			// new one takes its place, as Lambda replaces a broken
			// execution environment.
			fresh, err := f.replace(ctx, in)
			if err != nil {
				return nil, err
			}
			in = fresh
		default:
		}
		out, err := in.invoke(ctx, payload)
		// A request the emulator never took (it is gone) is safe to send
		// again, once, to its replacement.
		if errors.Is(err, errEmulatorGone) && try == 0 {
			continue
		}
		return out, err
	}
}

// errEmulatorGone is an invocation that did not reach the emulator
// because it has exited.
var errEmulatorGone = errors.New("the emulator has exited")

// replace starts a new instance in dead's place.
func (f *Function) replace(ctx context.Context, dead *instance) (*instance, error) {
	fresh, err := f.startInstance(ctx, dead.n)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	stopped := f.stopped
	if !stopped {
		f.all[dead.n] = fresh
	}
	f.mu.Unlock()
	if stopped {
		fresh.kill()
		return nil, ErrStopped
	}
	return fresh, nil
}

var timedOutRE = regexp.MustCompile(`^Task timed out after [0-9.]+ seconds$`)

func (in *instance) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	id := newRequestID()
	p := &pending{started: make(chan struct{}), report: make(chan Report, 1)}
	in.mu.Lock()
	in.pending[id] = p
	in.mu.Unlock()
	defer func() {
		in.mu.Lock()
		delete(in.pending, id)
		in.mu.Unlock()
	}()
	// The emulator enforces the timeout; this bound only keeps a wedged
	// emulator from holding the caller for ever.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), in.f.cfg.Timeout+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodPost, in.url, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Amzn-RequestId", id)
	resp, err := in.client.Do(req)
	if err != nil {
		select {
		case <-in.f.done:
			return nil, ErrStopped
		default:
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			select {
			case <-in.exited:
				return nil, fmt.Errorf("lambdas: %s: %w: %v", in.f.cfg.Name, errEmulatorGone, err)
			case <-time.After(2 * time.Second):
			}
		}
		return nil, fmt.Errorf("lambdas: %s: invoke: %w; the emulator's output:\n%s", in.f.cfg.Name, err, in.tail())
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxPayloadBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("lambdas: %s: reading the response: %w", in.f.cfg.Name, err)
	}
	timedOut := resp.StatusCode == http.StatusOK && timedOutRE.Match(body)
	if resp.StatusCode == http.StatusOK {
		in.record(p, timedOut)
	}
	switch {
	case timedOut:
		return nil, fmt.Errorf("%w after %v (%s)", ErrTimeout, in.f.cfg.Timeout, in.f.cfg.Name)
	case len(body) > MaxPayloadBytes:
		return nil, fmt.Errorf("%w: the response of %s is over %d bytes", ErrPayloadTooLarge, in.f.cfg.Name, MaxPayloadBytes)
	case resp.StatusCode == http.StatusOK:
		if fe := asFunctionError(body); fe != nil {
			return nil, fe
		}
		return body, nil
	case resp.StatusCode == http.StatusBadGateway:
		if fe := asFunctionError(body); fe != nil {
			return nil, fe
		}
	}
	return nil, fmt.Errorf("lambdas: %s: the emulator answered %s: %s", in.f.cfg.Name, resp.Status, bytes.TrimSpace(body))
}

// record waits briefly for the emulator's REPORT of the invocation (it is
// printed before the response is written, but read by another goroutine)
// and keeps it with the runtime's peak memory.
func (in *instance) record(p *pending, timedOut bool) {
	var r Report
	select {
	case r = <-p.report:
	case <-time.After(2 * time.Second):
		return
	}
	select {
	case <-p.started:
		r.Init = p.init
	case <-time.After(time.Second):
	}
	r.TimedOut = timedOut
	if r.MemorySizeMB == 0 {
		r.MemorySizeMB = in.f.cfg.MemoryMB
	}
	if kb := in.runtimePeakKB(); kb > 0 {
		r.MaxMemoryUsedMB = int((kb + 1023) / 1024)
	}
	in.f.mu.Lock()
	in.f.reports = append(in.f.reports, r)
	if len(in.f.reports) > maxReports {
		in.f.reports = append(in.f.reports[:0], in.f.reports[len(in.f.reports)-maxReports:]...)
	}
	in.f.mu.Unlock()
}

// runtimePeakKB is the peak resident set (VmHWM) of the runtime the
// emulator started: its largest child's, in kB; 0 when there is none.
func (in *instance) runtimePeakKB() int64 {
	var best int64
	for _, p := range descendants(in.cmd.Process.Pid) {
		if kb := vmHWM(p); kb > best {
			best = kb
		}
	}
	return best
}

// asFunctionError reads a runtime's error object ({"errorMessage": …,
// "errorType": …[, "stackTrace": …]}); nil for any other payload. The
// emulator answers a handler's error with status 200 and no
// X-Amz-Function-Error header, so the shape is all there is to go by.
func asFunctionError(body []byte) *FunctionError {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	var fe FunctionError
	if json.Unmarshal(m["errorType"], &fe.Type) != nil || json.Unmarshal(m["errorMessage"], &fe.Message) != nil || fe.Type == "" {
		return nil
	}
	for k := range m {
		switch k {
		case "errorType", "errorMessage", "stackTrace", "cause":
		default:
			return nil
		}
	}
	fe.Payload = body
	return &fe
}

func newRequestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// lockedWriter writes whole prefixed lines from many goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) line(prefix, s string) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	io.WriteString(l.w, prefix+s+"\n")
}

// checkArch refuses a bootstrap built for another machine (the emulator
// would start it only at the first invocation, failing there): an ELF
// file whose machine is not this one's. A file that is not ELF is left to
// the emulator.
func checkArch(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if want != 0 && f.Machine != want {
		return fmt.Errorf("the bootstrap %s is for %v, this machine is %s: build it with `make lambdas` (this machine's architecture unless LAMBDA_ARCH says otherwise)", path, f.Machine, runtime.GOARCH)
	}
	return nil
}
