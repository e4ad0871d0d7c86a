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
	d := s.doc("out.md", []byte("# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>\n"))
	if h := string(d.HTML); strings.Contains(h, "<script>") || strings.Contains(h, "<img") || !strings.Contains(h, "<h1>Title</h1>") {
		t.Errorf("markdown rendered to %q; want the heading and no live HTML", h)
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
