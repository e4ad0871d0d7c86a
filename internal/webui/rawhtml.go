package webui

import (
	"html"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// escapedHTML renders raw HTML in Markdown as text: what an engine or a
// human wrote is shown (List<String>, a <script> tag) and never live, where
// goldmark's safe default drops it ("raw HTML omitted") and the reader
// loses the words.
type escapedHTML struct{}

// RegisterFuncs implements renderer.NodeRenderer.
func (escapedHTML) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := node.(*ast.RawHTML).Segments
			for i := range segs.Len() {
				seg := segs.At(i)
				w.WriteString(html.EscapeString(string(seg.Value(source))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
		n := node.(*ast.HTMLBlock)
		if entering {
			w.WriteString("<pre class=\"raw\">")
			lines := n.Lines()
			for i := range lines.Len() {
				line := lines.At(i)
				w.WriteString(html.EscapeString(string(line.Value(source))))
			}
			if n.HasClosure() {
				w.WriteString(html.EscapeString(string(n.ClosureLine.Value(source))))
			}
			w.WriteString("</pre>\n")
		}
		return ast.WalkSkipChildren, nil
	})
}

func rawHTMLAsText() renderer.Option {
	return renderer.WithNodeRenderers(util.Prioritized(escapedHTML{}, 100))
}
