package asl

import (
	"fmt"
	"strings"
)

// Template is a compiled payload template: Parameters (Pass, Task) or
// ResultSelector (Task) (ASL spec § Payload Template). A field whose name
// ends in ".$" takes its value from a path or an intrinsic call and loses
// the suffix; other fields are copied; objects and arrays nested at any
// depth are templates too.
type Template struct {
	root tnode
}

type tnode interface {
	eval(in Value, ctx *Context) (Value, *Failure)
}

type litNode struct{ v Value }

type arrNode struct{ items []tnode }

type objNode struct{ fields []tfield }

type tfield struct {
	key  string // output key (".$" removed)
	src  string // key as written, for messages
	node tnode  // static or nested
	path *Path
	call *Intrinsic
}

// compileTemplate compiles v (an object) and reports problems with the
// field name they sit under (prefix, e.g. "Parameters").
func compileTemplate(v Value, prefix string, report func(field, msg string)) *Template {
	obj, ok := v.(*Object)
	if !ok {
		report(prefix, fmt.Sprintf("must be a JSON object (a payload template), got %s", describe(v)))
		return nil
	}
	return &Template{root: compileObject(obj, prefix, report)}
}

func compileNode(v Value, field string, report func(field, msg string)) tnode {
	switch t := v.(type) {
	case *Object:
		return compileObject(t, field, report)
	case []Value:
		n := &arrNode{items: make([]tnode, len(t))}
		for i, e := range t {
			n.items[i] = compileNode(e, fmt.Sprintf("%s[%d]", field, i), report)
		}
		return n
	}
	return litNode{v}
}

func compileObject(obj *Object, field string, report func(field, msg string)) tnode {
	n := &objNode{}
	seen := map[string]string{}
	for _, m := range obj.Members() {
		sub := field + "." + m.Key
		f := tfield{key: m.Key, src: m.Key}
		if strings.HasSuffix(m.Key, ".$") {
			f.key = strings.TrimSuffix(m.Key, ".$")
			s, ok := m.Value.(string)
			switch {
			case !ok:
				report(sub, fmt.Sprintf("a field ending in \".$\" takes a path or an intrinsic function as a string, got %s", describe(m.Value)))
			case IsIntrinsic(s):
				call, err := ParseIntrinsic(s)
				if err != nil {
					report(sub, err.Error())
				}
				f.call = call
			default:
				p, err := ParsePath(s)
				if err == nil {
					err = checkContextPath(p)
				}
				if err != nil {
					report(sub, err.Error())
				}
				f.path = p
			}
		} else {
			f.node = compileNode(m.Value, sub, report)
		}
		if f.path == nil && f.call == nil && f.node == nil {
			f.node = litNode{} // reported above; the definition is rejected
		}
		if prev, dup := seen[f.key]; dup {
			report(sub, fmt.Sprintf("produces the key %q already produced by %q", f.key, prev))
		}
		seen[f.key] = m.Key
		n.fields = append(n.fields, f)
	}
	return n
}

// Eval builds the payload from input (the effective input for Parameters,
// the raw result for ResultSelector) and the context object.
func (t *Template) Eval(input Value, ctx *Context) (Value, *Failure) {
	return t.root.eval(input, ctx)
}

func (n litNode) eval(Value, *Context) (Value, *Failure) { return n.v, nil }

func (n *arrNode) eval(in Value, ctx *Context) (Value, *Failure) {
	out := make([]Value, len(n.items))
	for i, it := range n.items {
		v, f := it.eval(in, ctx)
		if f != nil {
			return nil, f
		}
		out[i] = v
	}
	return out, nil
}

func (n *objNode) eval(in Value, ctx *Context) (Value, *Failure) {
	out := &Object{members: make([]Member, 0, len(n.fields))}
	for _, f := range n.fields {
		var (
			v    Value
			fail *Failure
		)
		switch {
		case f.path != nil:
			var ok bool
			if v, ok = f.path.Get(in, ctx); !ok {
				src := in
				if f.path.IsContext() && ctx != nil {
					src = ctx.Value()
				}
				// AWS reports a path that selects nothing as States.Runtime
				// (the spec's States.ParameterPathFailure is not raised).
				fail = failf(ErrRuntime, "The JSONPath '%s' specified for the field '%s' could not be found in the input '%s'", f.path, f.src, EncodeString(src))
			}
		case f.call != nil:
			v, fail = f.call.Eval(in, ctx)
		default:
			v, fail = f.node.eval(in, ctx)
		}
		if fail != nil {
			return nil, fail
		}
		out.put(f.key, v)
	}
	return out, nil
}
