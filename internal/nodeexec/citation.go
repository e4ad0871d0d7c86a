package nodeexec

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// RunCitation verifies a citation manifest (reference.md § checks node,
// checker citation): manifest is `{"sources": [{id, claim, path, line?,
// snippet?} | {id, claim, url}]}`, paths relative to the work dir. Each
// entry is verified (the snippet is at the cited line, or anywhere in the
// file when no line is cited), weak (in the file, not at the cited line),
// broken (the path, line or snippet does not resolve) or uncheckable (an
// external url, no snippet to check, a malformed entry). It never judges a
// claim. A missing or unreadable manifest is a note ("uncheckable: <name>
// missing") and no entries: the gate does nothing, as in worc.
func RunCitation(dir, manifest string) *ChecksResult {
	res := &ChecksResult{Checker: Citation, Runs: []CheckRun{}, ManifestPath: manifest}
	if rel, err := filepath.Rel(dir, manifest); err == nil && !strings.HasPrefix(rel, "..") {
		res.ManifestPath = filepath.ToSlash(rel)
	}
	name := filepath.Base(manifest)
	raw, err := os.ReadFile(manifest)
	if errors.Is(err, fs.ErrNotExist) {
		res.Note = fmt.Sprintf("uncheckable: %s missing", name)
		return res
	} else if err != nil {
		res.Note = fmt.Sprintf("uncheckable: %s: %v", name, err)
		return res
	}
	var m struct {
		Sources []json.RawMessage `json:"sources"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		res.Note = fmt.Sprintf(`uncheckable: %s is not {"sources": [...]}: %v`, name, err)
		return res
	}
	res.Citations = []CitationEntry{}
	for _, e := range m.Sources {
		res.Citations = append(res.Citations, checkCitation(dir, e))
	}
	return res
}

func checkCitation(dir string, raw json.RawMessage) CitationEntry {
	var e struct {
		ID      string `json:"id"`
		Path    string `json:"path"`
		Line    *int   `json:"line"`
		Snippet string `json:"snippet"`
		URL     string `json:"url"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return CitationEntry{Verdict: Uncheckable, Why: "malformed entry: " + err.Error()}
	}
	c := CitationEntry{ID: e.ID, Path: e.Path, URL: e.URL}
	if e.Line != nil {
		c.Line = *e.Line
	}
	switch {
	case e.Path == "" && e.URL != "":
		c.Verdict, c.Why = Uncheckable, "external url"
		return c
	case e.Path == "":
		c.Verdict, c.Why = Uncheckable, "malformed entry: neither path nor url"
		return c
	}
	p, err := inside(dir, e.Path)
	if err != nil {
		c.Verdict, c.Why = Broken, "path "+err.Error()
		return c
	}
	b, err := os.ReadFile(p)
	if err != nil {
		c.Verdict, c.Why = Broken, fmt.Sprintf("path %s does not resolve", e.Path)
		return c
	}
	lines := strings.Split(string(b), "\n")
	if e.Line != nil && (*e.Line < 1 || *e.Line > len(lines)) {
		c.Verdict, c.Why = Broken, fmt.Sprintf("line %d is outside %s (%d lines)", *e.Line, e.Path, len(lines))
		return c
	}
	snippet := strings.TrimSpace(e.Snippet)
	if snippet == "" {
		c.Verdict, c.Why = Uncheckable, "no snippet to check"
		return c
	}
	if !strings.Contains(string(b), snippet) {
		c.Verdict, c.Why = Broken, "snippet not found in "+e.Path
		return c
	}
	if e.Line == nil {
		c.Verdict = Verified
		return c
	}
	// The snippet at the cited line: in the lines it would span from there.
	n := strings.Count(snippet, "\n") + 1
	at := strings.Join(lines[*e.Line-1:min(len(lines), *e.Line-1+n)], "\n")
	if strings.Contains(at, snippet) {
		c.Verdict = Verified
	} else {
		c.Verdict, c.Why = Weak, fmt.Sprintf("snippet is in %s but not at line %d", e.Path, *e.Line)
	}
	return c
}
