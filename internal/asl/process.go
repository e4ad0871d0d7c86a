package asl

// The pieces of ASL spec § Input and Output Processing, in the order a
// state applies them: InputPath → Parameters → (the work) →
// ResultSelector → ResultPath → OutputPath.

// EffectiveInput applies InputPath and then Parameters to a state's raw
// input. An InputPath that selects nothing fails with States.Runtime.
func (s *State) EffectiveInput(raw Value, ctx *Context) (Value, *Failure) {
	in, f := applyPath(s.InputPath, raw)
	if f != nil || s.Parameters == nil {
		return in, f
	}
	return s.Parameters.Eval(in, ctx)
}

// PassResult returns what a Pass state hands to ResultPath: its Result
// when it has one, its effective input otherwise.
func (s *State) PassResult(effective Value) Value {
	if s.HasResult {
		return s.Result
	}
	return effective
}

// ApplyResult applies ResultSelector to a task's result and ResultPath
// to put it into the raw input. ResultPath null discards the result; "$"
// replaces the input; a path that cannot be applied fails with
// States.ResultPathMatchFailure.
func (s *State) ApplyResult(raw, result Value, ctx *Context) (Value, *Failure) {
	if s.ResultSelector != nil {
		var f *Failure
		if result, f = s.ResultSelector.Eval(result, ctx); f != nil {
			return nil, f
		}
	}
	return applyResultPath(s.ResultPath, raw, result)
}

// ApplyOutputPath filters a state's output. An OutputPath that selects
// nothing fails with States.Runtime; null yields {}.
func (s *State) ApplyOutputPath(v Value) (Value, *Failure) {
	return applyPath(s.OutputPath, v)
}

// Choose evaluates the rules of a Choice state in order against its
// effective input and returns the Next of the first that matches, else
// Default; with neither, the state fails with States.NoChoiceMatched.
func (s *State) Choose(effective Value, ctx *Context) (string, *Failure) {
	for _, r := range s.Choices {
		ok, f := r.Eval(effective, ctx)
		if f != nil {
			return "", f
		}
		if ok {
			return r.Next, nil
		}
	}
	if s.Default != "" {
		return s.Default, nil
	}
	return "", failf(ErrNoChoiceMatched, "No Choice rule matched the input of state %q and it has no Default", s.Name)
}

// MatchRetrier returns the index of the first Retrier whose ErrorEquals
// matches name, or -1. Only that Retrier applies: once its MaxAttempts
// are spent the error goes to Catch, later Retriers are not consulted.
func (s *State) MatchRetrier(name string) int {
	for i := range s.Retry {
		if s.Retry[i].Matches(name) {
			return i
		}
	}
	return -1
}

// MatchCatcher returns the first Catcher whose ErrorEquals matches name,
// or nil.
func (s *State) MatchCatcher(name string) *Catcher {
	for i := range s.Catch {
		if s.Catch[i].Matches(name) {
			return &s.Catch[i]
		}
	}
	return nil
}

// Output returns what a caught state hands to the catcher's Next: the
// error output placed into the state's raw input by the catcher's
// ResultPath. OutputPath does not apply.
func (c *Catcher) Output(raw Value, f *Failure) (Value, *Failure) {
	return applyResultPath(c.ResultPath, raw, f.Output())
}

func applyPath(p *Path, v Value) (Value, *Failure) {
	if p == nil {
		return &Object{}, nil
	}
	if p.IsRoot() {
		return v, nil
	}
	out, ok := p.Get(v, nil)
	if !ok {
		// Step Functions' wording.
		return nil, failf(ErrRuntime, "Invalid path '%s' : No results for path: %s", p, p.normalized())
	}
	return out, nil
}

func applyResultPath(p *Path, raw, result Value) (Value, *Failure) {
	if p == nil {
		return raw, nil
	}
	out, ok := p.Set(raw, result)
	if !ok {
		return nil, failf(ErrResultPathMatchFailure, "Unable to apply ReferencePath %s to input %s", p, EncodeString(raw))
	}
	return out, nil
}
