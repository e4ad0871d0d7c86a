package webui

import (
	"strings"
	"testing"
)

// A file an engine wrote is shown, never run: raw HTML in Markdown is
// escaped (goldmark without WithUnsafe), JSON is pretty-printed, a
// projection's front matter is kept apart from its body.
func TestDoc_EscapesHTMLAndShapesJSONAndFrontMatter(t *testing.T) {
	s, err := New(Source{})
	if err != nil {
		t.Fatal(err)
	}
	d := s.doc("out.md", []byte("# Title\n\n<script>alert(1)</script>\n\nDone <img src=x onerror=alert(2)> with List<String>.\n"))
	h := string(d.HTML)
	if strings.Contains(h, "<script>") || strings.Contains(h, "<img") || !strings.Contains(h, "<h1>Title</h1>") {
		t.Errorf("markdown rendered to %q; want the heading and no live HTML", h)
	}
	// What looked like HTML is shown as text, never dropped.
	if !strings.Contains(h, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(h, "&lt;img src=x onerror=alert(2)&gt;") || !strings.Contains(h, "List&lt;String&gt;") {
		t.Errorf("raw HTML was not shown as text: %q", h)
	}
	if d := s.doc("review.md", []byte("---\nstep: r\n---\n{\"findings\":[]}\n")); d.Text != "{\n  \"findings\": []\n}" || d.Front != "step: r" {
		t.Errorf("a JSON report in a .md: front %q, text %q; want it pretty-printed", d.Front, d.Text)
	}
	if d := s.doc("v.json", []byte(`{"a":[1,2]}`)); d.Text != "{\n  \"a\": [\n    1,\n    2\n  ]\n}" {
		t.Errorf("json shown as %q", d.Text)
	}
	d = s.doc("p.md", []byte("---\ntask_id: t1\nstep: a\n---\nBody *here*.\n"))
	if d.Front != "task_id: t1\nstep: a" || !strings.Contains(string(d.HTML), "<em>here</em>") || strings.Contains(string(d.HTML), "task_id") {
		t.Errorf("projection: front %q, body %q", d.Front, d.HTML)
	}
}

// The token of a reply form names its run and node: one run's token does
// not answer another run's gate.
func TestCSRFToken_PerRunAndNode(t *testing.T) {
	s, _ := New(Source{})
	if a, b := s.csrfToken("r1", "gate"), s.csrfToken("r2", "gate"); a == b || len(a) != 64 {
		t.Errorf("tokens %q and %q", a, b)
	}
	if other, _ := New(Source{}); other.csrfToken("r1", "gate") == s.csrfToken("r1", "gate") {
		t.Error("two viewers share a token: the key is not per process")
	}
}
