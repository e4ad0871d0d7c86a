// Package webui is the run viewer `stratus ui` serves: the runs, each run's
// flow drawn as a graph coloured by its steps, a timeline of its visits, its
// summary, each step's prompt, outputs, findings, attempts and log, and forms
// that answer a waiting human gate. Pages are HTML rendered on the server
// (html/template); the script (static/ui.js) only updates a run's page live
// from its event stream (server-sent events), so every page works, and is
// tested, without it. Everything is read through the store and sink ports, so
// the same pages show an embedded run and one on AWS. Nothing is served to a
// request without the viewer's secret (auth.go;
// docs/security.md § The run viewer's secret).
package webui

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/english"
	"github.com/stratusflow/stratus/internal/report"
	"github.com/stratusflow/stratus/internal/runview"
	"github.com/stratusflow/stratus/internal/safetext"
	"github.com/stratusflow/stratus/internal/sink"
	"github.com/stratusflow/stratus/internal/store"
	"github.com/stratusflow/stratus/internal/taskpool"
	"github.com/stratusflow/stratus/internal/worker"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Source is where the viewer reads runs from, and how it answers a gate.
type Source struct {
	// Target names where the runs live, for the page header ("embedded
	// DIR", "aws STACK").
	Target string
	Store  store.Store
	// Sink holds the runs' files: ctx dirs, rendered prompts, runner logs,
	// summaries (the work dir's fs sink, or the stack's bucket).
	Sink sink.Sink
	// Env returns a run's frozen environment (flow, config, task).
	Env func(ctx context.Context, runID string) (*worker.RunEnv, error)
	// Reply answers a waiting hitl node with an operator's capability;
	// nil makes the viewer read-only.
	Reply func(ctx context.Context, runID, node string, r worker.Reply) (*worker.HITLValue, error)
	// Poll is how often a run's event stream reads the store (default 1 s).
	Poll time.Duration
	// ShellReplies says `stratus approve|reject|answer` reach these runs
	// (embedded runs); ReplyFlags are what those commands need to ("--dir
	// DIR"). A read-only viewer shows them.
	ShellReplies bool
	ReplyFlags   string
	// Secret is what every request must present (docs/security.md § The
	// run viewer's secret): at least MinSecretLen characters. Empty: New
	// draws one (NewSecret); Server.Secret and Server.LoginURL give it.
	Secret string
	// Tasks lists the task pool's queued tasks (taskpool.Pool.Queued) the
	// runs page shows above the runs; nil, or a nil list, shows none (no
	// pool: a stack, or a work dir without tasks/pending).
	Tasks func(ctx context.Context) ([]taskpool.Listed, error)
}

// replyCommand is the command that answers gate node of run runID: the
// answer to a question, an approval or a rejection otherwise; "" when no
// command reaches the runs.
func (s *Server) replyCommand(runID, node, signal string) string {
	if !s.src.ShellReplies {
		return ""
	}
	flags := ""
	if s.src.ReplyFlags != "" {
		flags = " " + s.src.ReplyFlags
	}
	if signal == worker.SignalQuestion {
		return fmt.Sprintf("stratus answer %s %s%s TEXT", runID, node, flags)
	}
	return fmt.Sprintf("stratus approve %s %s%s  or  stratus reject %s %s%s --reason TEXT", runID, node, flags, runID, node, flags)
}

// Server serves the viewer.
type Server struct {
	hosts  []string // Host headers a request may carry (AllowHosts); none = any
	src    Source
	tmpl   *template.Template
	md     goldmark.Markdown
	csrf   []byte // per process: a form is good while this server runs
	secret string // what a request presents to get anything (auth.go)
	mux    *http.ServeMux
}

// New returns the viewer over src. Errors: EINVALID for a src.Secret
// shorter than MinSecretLen or holding white space; a template that does
// not parse (a build defect).
func New(src Source) (*Server, error) {
	if src.Poll <= 0 {
		src.Poll = time.Second
	}
	if src.Secret == "" {
		src.Secret = NewSecret()
	}
	if err := checkSecret(src.Secret); err != nil {
		return nil, err
	}
	s := &Server{src: src, secret: src.Secret, md: goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(rawHTMLAsText())), mux: http.NewServeMux()}
	s.csrf = randomBytes(32)
	t, err := template.New("").Funcs(template.FuncMap{
		"plural":  english.Plural,
		"dur":     fmtDuration,
		"took":    func(sv runview.StepView) string { return fmtDuration(sv.Took(time.Now())) },
		"when":    func(t time.Time) string { return t.Local().Format("2006-01-02 15:04:05") },
		"cost":    func(c float64) string { return fmt.Sprintf("$%.4f", c) },
		"stepURL": stepURL,
		"pct":     func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
		"px":      func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
		"add":     func(a, b float64) float64 { return a + b },
		"half":    func(a float64) float64 { return a / 2 },
		"nodeID":  func(id string) string { return "node-" + id },
		"urlq":    url.QueryEscape,
		// shown is what an engine wrote (a reason, a verdict, a finding),
		// its control, bidi and invisible format characters written as
		// escapes: HTML escaping alone leaves U+202E free to reverse the
		// text around it (docs/security.md § Text an engine wrote).
		"shown": safetext.Block,
	}).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	s.tmpl = t
	static, _ := fs.Sub(assets, "static")
	files := http.StripPrefix("/static/", http.FileServerFS(static))
	s.mux.HandleFunc("GET /static/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // files only, never a listing
			return
		}
		files.ServeHTTP(w, r)
	})
	s.mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusMovedPermanently) })
	s.mux.HandleFunc("GET /runs/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusMovedPermanently) })
	s.mux.HandleFunc("GET /{$}", s.runs)
	s.mux.HandleFunc("GET /runs/{run}", s.run)
	s.mux.HandleFunc("GET /runs/{run}/events", s.events)
	s.mux.HandleFunc("GET /runs/{run}/steps/{node}/{visit}", s.step)
	s.mux.HandleFunc("POST /runs/{run}/nodes/{node}/hitl", s.hitl)
	// Any other path: the viewer's own page saying where the pages are.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, stratus.Errorf(stratus.ENOTFOUND, "no page at %s: the viewer has / (runs), /runs/RUN and /runs/RUN/steps/NODE/VISIT", r.URL.Path))
	})
	return s, nil
}

// Loopback reports whether addr (host:port) names a loopback address
// (localhost, 127.0.0.0/8, ::1): one only this machine reaches.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// AllowHosts limits the Host a request may name to the viewer's own
// listen address: for a loopback one, localhost, 127.0.0.1 and [::1] at
// its port. A viewer bound elsewhere (`stratus ui --remote`, read-only)
// takes any Host.
func (s *Server) AllowHosts(listen string) {
	_, port, err := net.SplitHostPort(listen)
	if err != nil {
		return
	}
	if !Loopback(listen) {
		s.hosts = nil
		return
	}
	s.hosts = []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	if !slices.Contains(s.hosts, listen) {
		s.hosts = append(s.hosts, listen)
	}
}

func (s *Server) hostAllowed(host string) bool {
	return len(s.hosts) == 0 || slices.Contains(s.hosts, strings.ToLower(host))
}

// ServeHTTP serves the viewer, with headers that keep its pages in their
// own origin (no framing, no inline script, no third-party fetch), to a
// request that carries the viewer's secret (auth.go): anything else, a
// static file included, is 401 with a page saying how to get in.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r.Host) {
		// DNS rebinding: a page of another site whose name resolves to
		// this loopback address must not read runs or post replies.
		http.Error(w, "misdirected request: this viewer answers to its own address only ("+strings.Join(s.hosts, ", ")+")", http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if r.Method == http.MethodGet && r.URL.Query().Has("token") {
		s.login(w, r)
		return
	}
	if !s.authenticated(r) {
		s.unauthorized(w, "This request carries neither the viewer's cookie nor its secret.")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// page renders template name with data, or the error page.
func (s *Server) page(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		http.Error(w, "render "+name+": "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail renders the error page: 404 for an unknown run or step, 400 for
// bad input, 500 otherwise.
func (s *Server) fail(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch stratus.ErrorCode(err) {
	case stratus.ENOTFOUND:
		status = http.StatusNotFound
	case stratus.EINVALID, stratus.EUNPROCESSABLE:
		status = http.StatusBadRequest
	case stratus.ECONFLICT:
		status = http.StatusConflict
	}
	s.page(w, status, "error.html", map[string]any{"Target": s.src.Target, "Status": status, "Message": stratus.ErrorMessage(err)})
}

// markdown renders text as HTML (GFM; raw HTML in the text is escaped,
// never passed through).
func (s *Server) markdown(text string) template.HTML {
	var buf bytes.Buffer
	if err := s.md.Convert([]byte(text), &buf); err != nil {
		return template.HTML(template.HTMLEscapeString(text))
	}
	return template.HTML(buf.String()) // goldmark escapes raw HTML unless WithUnsafe
}

// Doc is a file shown on a page: Markdown rendered, JSON pretty-printed,
// anything else as text.
type Doc struct {
	Name  string
	Front string        // a projection's YAML front matter, as text
	HTML  template.HTML // rendered Markdown, or nil
	Text  string        // JSON or plain text
	Note  string        // why it is missing
}

func (s *Server) doc(name string, body []byte) Doc {
	d := s.docOf(name, body)
	// Shown, not run: what an engine wrote keeps no raw control, bidi or
	// invisible format character (docs/security.md § Text an engine
	// wrote); the Markdown source is escaped before it is rendered.
	d.Front, d.Text = safetext.Block(d.Front), safetext.Block(d.Text)
	return d
}

func (s *Server) docOf(name string, body []byte) Doc {
	d := Doc{Name: name}
	trimmed := bytes.TrimSpace(body)
	if json.Valid(trimmed) && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		var out bytes.Buffer
		json.Indent(&out, trimmed, "", "  ")
		d.Text = out.String()
		return d
	}
	if strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".markdown") {
		text := string(body)
		// A projection's front matter
		// (docs/contracts.md § Files are the server's job) is data, not
		// prose: shown as is above the body.
		if rest, ok := strings.CutPrefix(text, "---\n"); ok {
			if fm, md, ok := strings.Cut(rest, "\n---\n"); ok {
				d.Front, text = fm, md
			}
		}
		if t := bytes.TrimSpace([]byte(text)); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(t) {
			var out bytes.Buffer
			json.Indent(&out, t, "", "  ")
			d.Text = out.String() // a JSON report is data, pretty-printed
			return d
		}
		d.HTML = s.markdown(safetext.Block(text))
		return d
	}
	d.Text = string(body)
	return d
}

// readDoc reads key from the sink as a Doc; a missing file says so.
func (s *Server) readDoc(ctx context.Context, name, key string, limit int64) Doc {
	b, err := s.src.Sink.GetMax(ctx, key, limit)
	switch {
	case stratus.ErrorCode(err) == stratus.ENOTFOUND:
		return Doc{Name: name, Note: "not written"}
	case stratus.ErrorCode(err) == stratus.ETOOLARGE:
		return Doc{Name: name, Note: fmt.Sprintf("over %d bytes: read it at %s", limit, key)}
	case err != nil:
		return Doc{Name: name, Note: err.Error()}
	}
	return s.doc(name, b)
}

// runDoc is readDoc of the file at rel in run's own logs dir
// (report.RunDir: an earlier run of a task reads its attempt-N/ copy, not
// the latest run's).
func (s *Server) runDoc(ctx context.Context, run stratus.Run, name, rel string, limit int64) Doc {
	dir, err := report.RunDir(ctx, s.src.Sink, run.TaskID, run.ID)
	if err != nil {
		return Doc{Name: name, Note: stratus.ErrorMessage(err)}
	}
	return s.readDoc(ctx, name, keyOf(dir, rel), limit)
}

// csrfToken is the hidden field of a form that replies to node of run.
func (s *Server) csrfToken(run, node string) string {
	m := hmac.New(sha256.New, s.csrf)
	m.Write([]byte(run + "\x00" + node))
	return hex.EncodeToString(m.Sum(nil))
}

// sameOrigin reports whether a form post came from this viewer: its
// Origin (or, without one, its Referer) is the request's own host.
func sameOrigin(r *http.Request) bool {
	src := r.Header.Get("Origin")
	if src == "" {
		src = r.Header.Get("Referer")
	}
	u, err := url.Parse(src)
	return err == nil && src != "" && u.Host == r.Host
}

func stepURL(runID, stepRef string) string {
	node, visit, _ := strings.Cut(stepRef, "#")
	return "/runs/" + url.PathEscape(runID) + "/steps/" + url.PathEscape(node) + "/" + url.PathEscape(visit)
}

// fmtDuration is english.Duration, the one format of a duration, with
// "–" for none.
func fmtDuration(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	return english.Duration(d)
}

// hitl serves POST /runs/{run}/nodes/{node}/hitl: a form's reply to a
// waiting gate, same-origin and with its CSRF token, answered with the
// operator's capability (Source.Reply); back to the run's page.
func (s *Server) hitl(w http.ResponseWriter, r *http.Request) {
	runID, node := r.PathValue("run"), r.PathValue("node")
	if s.src.Reply == nil {
		s.fail(w, stratus.Errorf(stratus.EINVALID, "this viewer is read-only: reply from a shell with `stratus approve|reject|answer %s %s%s`", runID, node, prefixed(s.src.ReplyFlags)))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.fail(w, stratus.Errorf(stratus.EINVALID, "the form: %v", err))
		return
	}
	tok := r.PostForm.Get("csrf")
	if !sameOrigin(r) || !hmac.Equal([]byte(tok), []byte(s.csrfToken(runID, node))) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintln(w, "forbidden: a reply comes from this viewer's own form (same origin, its token)")
		return
	}
	rep := worker.Reply{Decision: r.PostForm.Get("decision"), Text: strings.TrimSpace(r.PostForm.Get("text"))}
	if _, err := s.src.Reply(r.Context(), runID, node, rep); err != nil {
		s.fail(w, err)
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(runID), http.StatusSeeOther)
}

// runs serves GET /?status=: the runs, newest first.
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	lines, err := runview.List(r.Context(), s.src.Store, 200)
	if err != nil {
		s.fail(w, err)
		return
	}
	filter := r.URL.Query().Get("status")
	if filter != "" {
		if err := runview.CheckStatus(filter); err != nil {
			s.fail(w, err)
			return
		}
	}
	counts := map[string]int{}
	var shown []RunLine
	for _, l := range lines {
		counts[l.Status]++
		if filter == "" || l.Status == filter {
			shown = append(shown, l)
		}
	}
	statuses := make([]string, 0, len(counts))
	for st := range counts {
		statuses = append(statuses, st)
	}
	sort.Strings(statuses)
	s.page(w, http.StatusOK, "runs.html", map[string]any{"Target": s.src.Target, "Pool": s.pool(r.Context()), "Runs": shown, "Filter": filter, "Statuses": statuses, "Counts": counts, "All": len(lines)})
}

// poolView is the runs page's section of queued tasks.
type poolView struct {
	Tasks []taskpool.Listed
	Err   string // why the pool could not be read
}

// pool is the queued tasks the runs page shows (Source.Tasks); nil when
// there is no pool. A pool that cannot be read says why in its section,
// and the runs are shown all the same.
func (s *Server) pool(ctx context.Context) *poolView {
	if s.src.Tasks == nil {
		return nil
	}
	l, err := s.src.Tasks(ctx)
	switch {
	case err != nil:
		return &poolView{Err: stratus.ErrorMessage(err)}
	case l == nil:
		return nil
	}
	return &poolView{Tasks: l}
}

// keyOf joins sink key parts.
func keyOf(parts ...string) string { return path.Join(parts...) }

func prefixed(flags string) string {
	if flags == "" {
		return ""
	}
	return " " + flags
}
