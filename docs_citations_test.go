package stratus_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestDocsCitations fails when a comment or a string literal of the
// repository's Go code cites a section of its docs that does not exist:
// `docs/<name>.md § <Heading>` must name a file under docs/ and some heading
// of it. Every broken
// citation is reported, each as path:line.
func TestDocsCitations(t *testing.T) {
	t.Parallel()
	headings, err := docsHeadings("docs")
	if err != nil {
		t.Fatal(err)
	}
	var checked, broken int
	eachGoText(t, func(path string, tx goText) {
		for _, c := range citations(tx.text, headings) {
			checked++
			if c.problem == "" {
				continue
			}
			broken++
			t.Errorf("%s:%d: %s", path, tx.line(c.offset), c.problem)
		}
	})
	if checked == 0 {
		t.Fatal("no docs citation found in the repository's Go files: the scan is broken")
	}
	if broken > 0 {
		t.Logf("%d of %d docs citations name no heading; cite a heading as written (docs/<name>.md § <Heading>), or add the section the code relies on", broken, checked)
	}
}

// TestNoUnreachableCitations fails when a comment or a string literal of the
// repository's Go code, production or test, points at a document a reader of
// the repository cannot open: DESIGN.md and the seeds live outside it, and a
// tracker issue is no part of it (docs/contracts.md, the citation rule at the
// top). Every such pointer is reported, each as path:line.
func TestNoUnreachableCitations(t *testing.T) {
	t.Parallel()
	var found int
	files := eachGoText(t, func(path string, tx goText) {
		for _, c := range unreachableCitations(tx.text) {
			found++
			t.Errorf("%s:%d: %s", path, tx.line(c.offset), c.problem)
		}
	})
	if files == 0 {
		t.Fatal("no Go file scanned: the walk is broken")
	}
	if found > 0 {
		t.Logf("%d pointers a reader of the repository cannot follow; cite a section of docs/ (docs/<name>.md § <Heading>), an AWS documentation page by name, a public upstream issue by its URL, or the test that pins the rule", found)
	}
}

// unreachable matches what a reader of the repository cannot open:
//   - DESIGN.md cited by section or quoted ("DESIGN.md § Limits",
//     "DESIGN.md: ..."), under any path;
//   - a seed by number ("seed 004", "Seed 000", "seeds 003");
//   - a tracker issue by number ("issue 14", "Issue 7", "issues 12 and 14",
//     "issue #3", "GH #12").
//
// An issue's URL ("github.com/golang/go/issues/66084") names a public page
// and does not match, nor does "an issue" without a number.
var unreachable = regexp.MustCompile(`DESIGN\.md\s*[§:]|\b[Ss]eeds? 00[0-9]\b|\b[Ii]ssues? #?[0-9]+\b|\bGH ?#[0-9]+\b`)

// unreachableCitations returns every pointer of text that unreachable
// matches: where it starts, and what to say about it.
func unreachableCitations(text string) []citation {
	var out []citation
	for _, m := range unreachable.FindAllStringIndex(text, -1) {
		out = append(out, citation{m[0], fmt.Sprintf("%q points outside the repository: cite a docs section, an AWS documentation page, an upstream URL or a test", text[m[0]:m[1]])})
	}
	return out
}

// skipDir reports whether a directory holds no Go code of the project's
// own: version control and state (hidden directories), vendored code,
// dependencies, fixtures and build output.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || slices.Contains([]string{"third_party", "vendor", "node_modules", "testdata", "bin"}, name)
}

// docsHeadings reads every docs/*.md under dir: file key ("docs/x.md") →
// the text of each of its headings.
func docsHeadings(dir string) (map[string][]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out["docs/"+filepath.Base(f)] = markdownHeadings(b)
	}
	return out, nil
}

// markdownHeadings returns the text of each ATX heading of a Markdown
// document (any level; the #'s, a closing run of #'s and surrounding
// spaces removed, inner white space collapsed), skipping fenced code
// blocks, whose "# comment" lines are no headings.
func markdownHeadings(doc []byte) []string {
	var out []string
	fence := ""
	sc := bufio.NewScanner(bytes.NewReader(doc))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), " \t\r")
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) <= 3 {
			if f := fenceOf(trimmed); f != "" {
				switch {
				case fence == "":
					fence = f
				case strings.HasPrefix(f, fence[:1]) && len(f) >= len(fence) && strings.Trim(trimmed, f[:1]) == "":
					fence = ""
				}
				continue
			}
		}
		if fence != "" || len(line)-len(trimmed) > 3 {
			continue
		}
		level := len(trimmed) - len(strings.TrimLeft(trimmed, "#"))
		if level < 1 || level > 6 {
			continue
		}
		text := trimmed[level:]
		if text != "" && text[0] != ' ' && text[0] != '\t' {
			continue // "#hashtag" is no heading
		}
		text = strings.TrimSpace(text)
		if closing := strings.TrimRight(text, "#"); closing == "" || strings.HasSuffix(closing, " ") {
			text = strings.TrimSpace(closing)
		}
		out = append(out, strings.Join(strings.Fields(text), " "))
	}
	return out
}

// fenceOf returns the run of three or more backticks or tildes a line
// starts with, "" when it starts no fence.
func fenceOf(line string) string {
	for _, c := range "`~" {
		n := len(line) - len(strings.TrimLeft(line, string(c)))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// goText is the text of one comment group, or of one string literal (with
// the literals "+" joins to it), white space collapsed, and where each of
// its source lines starts in it.
type goText struct {
	text   string
	starts []int // offset in text of each source line's segment
	lines  []int // that line's number
}

// line is the source line of offset off in t.text.
func (t goText) line(off int) int {
	i, found := slices.BinarySearch(t.starts, off)
	if !found {
		i--
	}
	return t.lines[max(i, 0)]
}

func (t *goText) add(line int, s string) {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return
	}
	if t.text != "" {
		t.text += " "
	}
	t.starts = append(t.starts, len(t.text))
	t.lines = append(t.lines, line)
	t.text += s
}

// goTexts returns the comment groups (comments on consecutive lines with no
// code between them) and the string literals of a Go source file: where a
// citation may be written. A citation may run over several lines of a
// comment, or over literals joined with "+".
func goTexts(src []byte) []goText {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, func(token.Position, string) {}, scanner.ScanComments)
	var out []goText
	var group *goText
	lastComment := -1 // the last line of the previous comment of group
	var str *goText
	plus := false // a "+" followed the last string literal
	flushStr := func() {
		if str != nil {
			out = append(out, *str)
			str = nil
		}
	}
	flushGroup := func() {
		if group != nil {
			out = append(out, *group)
			group = nil
		}
	}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		line := file.Line(pos)
		switch tok {
		case token.COMMENT:
			if group == nil || line > lastComment+1 {
				flushGroup()
				group = &goText{}
			}
			body := lit
			if strings.HasPrefix(body, "//") {
				body = body[2:]
			} else {
				body = strings.TrimSuffix(strings.TrimPrefix(body, "/*"), "*/")
			}
			for i, l := range strings.Split(body, "\n") {
				group.add(line+i, l)
			}
			lastComment = line + strings.Count(lit, "\n")
			continue
		case token.SEMICOLON:
			if lit == "\n" {
				continue // inserted at a line end: no code between comments
			}
		case token.STRING:
			v, err := strconv.Unquote(lit)
			if err != nil {
				v = lit
			}
			if str == nil || !plus {
				flushStr()
				str = &goText{}
			}
			for i, l := range strings.Split(v, "\n") {
				str.add(line+i, l)
			}
			plus = false
			flushGroup()
			continue
		case token.ADD:
			if str != nil {
				plus = true
				flushGroup()
				continue
			}
		}
		flushGroup()
		flushStr()
		plus = false
	}
	flushGroup()
	flushStr()
	return out
}

// citation is one `docs/<name>.md § <text>` of a text: where it starts, and
// what is wrong with it ("" when some heading of the file matches).
type citation struct {
	offset  int
	problem string
}

// citeStart finds `docs/<name>.md §`: not part of a longer path (a peer's
// "worc/docs/x.md" is another project's page), any white space around §.
var citeStart = regexp.MustCompile(`docs/([A-Za-z0-9_.-]+\.md)\s*§\s*`)

// followOn continues a citation with another section of the same file:
// ", § X", "; § X", " and § X", ", and § X".
var followOn = regexp.MustCompile(`^(?:\s*[,;]\s*(?:and\s+)?|\s+and\s+)§\s*`)

// citations checks every docs citation of text against headings (file key
// → headings; a file that is not there has no key). A citation holds when
// some heading of its file is a prefix of the text after "§ " that is
// followed by the end of the text or by a rune that is neither a letter
// nor a digit; a matched citation may go on with follow-ons that name more
// sections of the same file.
func citations(text string, headings map[string][]string) []citation {
	var out []citation
	for _, m := range citeStart.FindAllStringSubmatchIndex(text, -1) {
		start := m[0]
		if start > 0 {
			if r, _ := utf8.DecodeLastRuneInString(text[:start]); r == '/' || r == '.' || r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
				continue
			}
		}
		file := "docs/" + text[m[2]:m[3]]
		rest := m[1]
		hs, ok := headings[file]
		if !ok {
			out = append(out, citation{start, fmt.Sprintf("%s § %s: no such file %s", file, excerpt(text[rest:]), file)})
			continue
		}
		for {
			h := matchHeading(text[rest:], hs)
			if h == "" {
				out = append(out, citation{start, fmt.Sprintf("%s § %s: no such heading (headings: %s)", file, excerpt(text[rest:]), strings.Join(hs, "; "))})
				break
			}
			out = append(out, citation{start, ""})
			rest += len(h)
			f := followOn.FindStringIndex(text[rest:])
			if f == nil {
				break
			}
			rest += f[1]
		}
	}
	return out
}

// matchHeading returns the longest heading of hs that s starts with,
// followed by the end of s or a rune that is neither letter nor digit;
// "" when none.
func matchHeading(s string, hs []string) string {
	best := ""
	for _, h := range hs {
		if h == "" || len(h) <= len(best) || !strings.HasPrefix(s, h) {
			continue
		}
		if r, _ := utf8.DecodeRuneInString(s[len(h):]); len(s) > len(h) && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			continue
		}
		best = h
	}
	return best
}

// excerpt is the start of a cited text, for a message.
func excerpt(s string) string {
	const n = 60
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}

// The matcher against a fixed set of headings: each case is a comment's
// text and the problems expected, in order ("" for a citation that holds).
func TestDocsCitations_Matcher(t *testing.T) {
	t.Parallel()
	headings := map[string][]string{
		"docs/security.md":  {"Security: who is trusted", "Handles", "Workspace commits", "Files under .stratus"},
		"docs/contracts.md": {"Worker I/O", "The event stream", "Terminal classification", "The supervisor", "What the supervisor layer does"},
	}
	tests := []struct {
		name string
		text string
		want []string // a substring of each citation's problem, "" when it holds
	}{
		{"exact heading", "see docs/security.md § Handles", []string{""}},
		{"heading then punctuation", "(docs/security.md § Handles).", []string{""}},
		{"heading then more words", "docs/security.md § Workspace commits: the head moves once", []string{""}},
		{"heading with a dot inside", "docs/security.md § Files under .stratus; mode 0600", []string{""}},
		{"no space around the section sign", "docs/security.md§Handles", []string{""}},
		{"the heading is only a prefix of a word", "docs/security.md § Handlesx", []string{"no such heading"}},
		{"a prefix of a heading is no heading", "docs/security.md § Workspace", []string{"no such heading (headings: Security: who is trusted; Handles; Workspace commits; Files under .stratus)"}},
		{"a heading that does not exist", "docs/contracts.md § Structured worker output", []string{"docs/contracts.md § Structured worker output: no such heading"}},
		{"a file that does not exist", "docs/flow-authoring.md § Example", []string{"no such file docs/flow-authoring.md"}},
		{"nothing after the section sign", "docs/security.md §", []string{"no such heading"}},
		{"case matters", "docs/security.md § handles", []string{"no such heading"}},
		{"the longest heading wins", "docs/contracts.md § The supervisor layer does not route", []string{""}},
		{"follow-on after a comma", "docs/contracts.md § The event stream, § Terminal classification", []string{"", ""}},
		{"follow-on after and", "docs/contracts.md § The event stream and § Terminal classification.", []string{"", ""}},
		{"follow-on after a semicolon", "docs/security.md § Handles; § Workspace commits)", []string{"", ""}},
		{"a broken follow-on", "docs/contracts.md § The event stream, § Terminal precedence", []string{"", "docs/contracts.md § Terminal precedence: no such heading"}},
		{"a section sign of another source is no follow-on", "docs/security.md § Handles (RFC 9110 § 15.5.6)", []string{""}},
		{"two citations", "docs/security.md § Handles and docs/contracts.md § Worker I/O", []string{"", ""}},
		{"another project's docs are not ours", "../shared/peers/worc/docs/configuration.md § agents.retry", nil},
		{"a path inside a word", "mydocs/security.md § Nope", nil},
		{"a mention without a section", "see docs/security.md for the rules", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := citations(tt.text, headings)
			if len(got) != len(tt.want) {
				t.Fatalf("citations(%q) = %+v; want %d", tt.text, got, len(tt.want))
			}
			for i, c := range got {
				if tt.want[i] == "" && c.problem != "" || tt.want[i] != "" && !strings.Contains(c.problem, tt.want[i]) {
					t.Errorf("citation %d of %q: problem %q; want %q", i, tt.text, c.problem, tt.want[i])
				}
			}
		})
	}
}

// A citation runs over the lines of a comment group and over literals
// joined with "+", and is reported at the line where it starts.
func TestDocsCitations_GoTexts(t *testing.T) {
	t.Parallel()
	src := []byte(`package p

// Fenced to its run (docs/security.md §
// Handles).
var x = 1 // trailing

/* docs/security.md § Workspace
   commits */
func f() error {
	return fmt.Errorf("refused (docs/security.md § "+
		"Files under .stratus): %s", "docs/security.md § Nowhere")
}
`)
	headings := map[string][]string{"docs/security.md": {"Handles", "Workspace commits", "Files under .stratus"}}
	type found struct {
		line    int
		problem string
	}
	var got []found
	for _, tx := range goTexts(src) {
		for _, c := range citations(tx.text, headings) {
			got = append(got, found{tx.line(c.offset), c.problem})
		}
	}
	want := []found{{3, ""}, {7, ""}, {10, ""}, {11, "docs/security.md § Nowhere: no such heading (headings: Handles; Workspace commits; Files under .stratus)"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

// Headings are the ATX headings outside fenced code blocks.
func TestDocsCitations_MarkdownHeadings(t *testing.T) {
	t.Parallel()
	doc := []byte("# Title\n\ntext\n\n## Files under .stratus ##\n\n```sh\n# a shell comment\n```\n\n~~~\n## inside tildes\n~~~\n### The fold and submit_format\n#hashtag\n    # indented code\n")
	got := markdownHeadings(doc)
	want := []string{"Title", "Files under .stratus", "The fold and submit_format"}
	if !slices.Equal(got, want) {
		t.Errorf("markdownHeadings = %q; want %q", got, want)
	}
}

// The pointers a reader cannot follow, and look-alikes that must pass.
func TestNoUnreachableCitations_Matcher(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text string
		want []string // the pointers found, in order
	}{
		{"see DESIGN.md § Limits", []string{"DESIGN.md §"}},
		{"(../../shared/DESIGN.md § The compiled state machines)", []string{"DESIGN.md §"}},
		{"DESIGN.md§Layout", []string{"DESIGN.md§"}},
		{`(DESIGN.md: "The same compiled state machine runs")`, []string{"DESIGN.md:"}},
		{"the rule of seed 004 § Flows", []string{"seed 004"}},
		{`Seed 000 names /, \ and ..`, []string{"Seed 000"}},
		{"seeds 003 and 004", []string{"seeds 003"}},
		{"seed 000's in-process twin", []string{"seed 000"}},
		{"a lease (issue 14 § 11)", []string{"issue 14"}},
		{"Issue 7: the handle", []string{"Issue 7"}},
		{"issues 12 and 14", []string{"issues 12"}},
		{"fixed in issue #3", []string{"issue #3"}},
		{"see GH #12 and GH#13", []string{"GH #12", "GH#13"}},
		{"seed 004 § Flows, issue 9", []string{"seed 004", "issue 9"}},
		// Public pages and plain words pass.
		{"see https://github.com/golang/go/issues/66084 (net/url)", nil},
		{"github.com/aws/aws-sdk-go-v2/issues/1234", nil},
		{"an issue with the queue", nil},
		{"the issues a reviewer raised", nil},
		{"it reissue 5 times; tissue 3", nil},
		{"minted when issued 5 seconds ago", nil},
		{"docs/architecture.md § Limits", nil},
		{"restates DESIGN.md in the project's words", nil},
		{"a random seed 42", nil},
		{"seed 0042 of the fuzzer", nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, c := range unreachableCitations(tt.text) {
				m := unreachable.FindStringIndex(tt.text[c.offset:])
				got = append(got, tt.text[c.offset:c.offset+m[1]])
				if !strings.Contains(c.problem, "points outside the repository") {
					t.Errorf("problem %q says not what to do", c.problem)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("unreachableCitations(%q) found %q; want %q", tt.text, got, tt.want)
			}
		})
	}
}

// eachGoText calls f with every comment and string literal of every Go file
// of the repository (slash-separated path, the text), but for this file,
// whose cases cite missing sections and unreachable pointers on purpose; it
// returns the number of files read.
func eachGoText(t *testing.T, f func(path string, tx goText)) (files int) {
	t.Helper()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != "." && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || path == "docs_citations_test.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, tx := range goTexts(src) {
			f(filepath.ToSlash(path), tx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
