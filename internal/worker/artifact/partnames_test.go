package artifact_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/worker/artifact"
	"github.com/stratusflow/stratus/internal/worker/workertest"
)

// docs/security.md § Part names: a part name NFKC changes ("pl\u2024an.md",
// ONE DOT LEADER for the dot) is refused at staging — EINVALID on field
// name, the value escaped, the rule said — nothing staged and no file
// written, while "pl.an.md" beside it is staged.
func TestArtifact_RefusesAPartNameNFKCChanges(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.OnePlanFlow})
	st := r.Dispatch(t, "planning")
	h := "Bearer " + r.Launcher.Launched()[0].Handle
	ctx := context.Background()
	for _, name := range []string{"pl\u2024an.md", "ｐｌａｎ.md", "pl\ufb01le.md"} {
		err := artifact.Artifact(ctx, r.Svc.Service, h, name, []byte("spoof"))
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "name" ||
			!strings.Contains(se.Message, "not NFKC-stable") || !strings.Contains(se.Message, strings.Trim(escaped(name), `"`)) {
			t.Errorf("Artifact(%+q) = %v; want EINVALID on field name, the value escaped and the rule", name, err)
		}
		if _, err := os.Stat(r.Ctx(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a file was written for the refused part %+q: %v", name, err)
		}
	}
	if err := artifact.Artifact(ctx, r.Svc.Service, h, "pl.an.md", []byte("the plan")); err != nil {
		t.Fatalf("Artifact(pl.an.md): %v", err)
	}
	tail, err := r.Svc.Store.ListOutput(ctx, st.TID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) != 1 || tail[0].Name != "pl.an.md" {
		t.Errorf("tail = %+v; want only pl.an.md staged", tail)
	}
}

// escaped is name as the part-name errors quote it: Go syntax, ASCII only.
func escaped(name string) string { return strconv.QuoteToASCII(name) }

// docs/security.md § Part names: within one step, a part name equal to an
// already staged one under Unicode case folding but not byte-equal
// ("PLAN.md", "Plan.MD" beside "plan.md"; "STRASSE.md" beside "straße.md",
// full folding) is refused — EINVALID on field name, naming both — with
// nothing staged and no file written; restaging the same name is still last
// write wins (docs/contracts.md § Output is a tool call). Reproduces the
// tester's finding: all three were staged (204).
func TestArtifact_RefusesANameEqualToAStagedOneUnderCaseFolding(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.OnePlanFlow})
	st := r.Dispatch(t, "planning")
	h := "Bearer " + r.Launcher.Launched()[0].Handle
	ctx := context.Background()
	stage := func(name, body string) error { return artifact.Artifact(ctx, r.Svc.Service, h, name, []byte(body)) }
	for _, name := range []string{"plan.md", "straße.md", "notes.md"} {
		if err := stage(name, "first "+name); err != nil {
			t.Fatalf("Artifact(%q): %v", name, err)
		}
	}
	for _, tc := range []struct{ name, staged string }{
		{"PLAN.md", "plan.md"},
		{"Plan.MD", "plan.md"},
		{"STRASSE.md", "straße.md"},
		{"Notes.md", "notes.md"},
	} {
		err := stage(tc.name, "spoof")
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "name" ||
			!strings.Contains(se.Message, strconv.Quote(tc.name)) || !strings.Contains(se.Message, strconv.Quote(tc.staged)) {
			t.Errorf("Artifact(%q) after %q = %v; want EINVALID on field name naming both", tc.name, tc.staged, err)
		}
	}
	// The same name again replaces the body: last write wins.
	if err := stage("plan.md", "second plan.md"); err != nil {
		t.Fatalf("restaging plan.md: %v", err)
	}
	if b, err := os.ReadFile(r.Ctx("plan.md")); err != nil || string(b) != "second plan.md" {
		t.Errorf("ctx plan.md = %q, %v; want the restaged body", b, err)
	}
	names, err := r.Svc.Store.ListPartNames(ctx, st.TID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(names, ","); got != "plan.md,straße.md,notes.md" {
		t.Errorf("staged names = %s; want plan.md,straße.md,notes.md (no refused spelling)", got)
	}
	// The fold is unchanged: each staged name once, its last body.
	sv, err := r.Submit(t, "done")
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if got := strings.Join(sv.Parts, ","); got != "plan.md,straße.md,notes.md" {
		t.Errorf("step value parts = %s; want plan.md,straße.md,notes.md", got)
	}
}

// docs/security.md § Part names: stagings of one attempt racing with
// spellings of one name that differ by case stage exactly one of them.
func TestArtifact_ConcurrentCaseSpellingsStageOne(t *testing.T) {
	t.Parallel()
	r := workertest.NewRig(t, workertest.RigOptions{Flow: workertest.OnePlanFlow})
	st := r.Dispatch(t, "planning")
	h := "Bearer " + r.Launcher.Launched()[0].Handle
	ctx := context.Background()
	spellings := []string{"plan.md", "PLAN.md", "Plan.md", "pLan.md", "plAn.md", "plaN.md", "PLan.md", "PlAn.md",
		"PlaN.md", "pLAn.md", "pLaN.md", "plAN.md", "PLAn.md", "PLaN.md", "PlAN.md", "pLAN.md"}
	var wg sync.WaitGroup
	for _, name := range spellings {
		wg.Go(func() { _ = artifact.Artifact(ctx, r.Svc.Service, h, name, []byte(name)) })
	}
	wg.Wait()
	names, err := r.Svc.Store.ListPartNames(ctx, st.TID, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 1 {
		t.Errorf("staged names = %q; want exactly one spelling of plan.md", names)
	}
}
