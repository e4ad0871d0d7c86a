package main

import (
	"strings"
	"testing"
)

// A missing or extra positional argument is a usage error (exit 2) naming
// what is missing, or the argument too many, with the usage line.
func TestPositional_NamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "stratus: missing TASK.md (usage: stratus run TASK.md [--dir DIR])"},
		{[]string{"status"}, "stratus: missing RUN (usage: stratus status RUN "},
		{[]string{"answer", "r1"}, "stratus: missing NODE and TEXT (usage: stratus answer RUN NODE TEXT"},
		{[]string{"logs", "r1", "n", "extra"}, `stratus: unexpected argument "extra": logs takes RUN and optionally NODE (usage: stratus logs RUN [NODE]`},
		{[]string{"run", "a.md", "b.md"}, `stratus: unexpected argument "b.md": run takes TASK.md (usage:`},
	} {
		r := runCLI(t, c.args...)
		if r.code != ExitUsage || !strings.HasPrefix(r.stderr, c.want) {
			t.Errorf("%v: exit %d %q; want %d and %q", c.args, r.code, r.stderr, ExitUsage, c.want)
		}
	}
}

func TestArgNames_ReadTheUseLine(t *testing.T) {
	t.Parallel()
	req, opt := argNames("logs RUN [NODE] [--dir DIR | --target aws ...] [--lines N]")
	if strings.Join(req, ",") != "RUN" || strings.Join(opt, ",") != "NODE" {
		t.Errorf("required %v, optional %v", req, opt)
	}
	req, opt = argNames("runs [--dir DIR]")
	if len(req)+len(opt) != 0 {
		t.Errorf("required %v, optional %v", req, opt)
	}
}
