package fold_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/fold"
	"github.com/stratusflow/stratus/internal/testenv"
)

type foldCase struct {
	Name   string `json:"name"`
	Format string `json:"format"`
	Role   string `json:"role"`
	Input  string `json:"input"`
	Want   struct {
		String *string          `json:"string"`
		JSON   *json.RawMessage `json:"json"`
		Reject int              `json:"reject"`
	} `json:"want"`
}

// decode unmarshals JSON keeping numbers as their digits.
func decode(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

// docs/contracts.md § The fold and submit_format: every vector of
// testdata/cases/fold.
func TestValue_SharedVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(testenv.Cases(t, "fold", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []foldCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) == 0 {
		t.Fatal("no fold vectors")
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			role := fold.RoleBody
			if c.Role == "part" {
				role = fold.RolePart
			}
			got, err := fold.Value("planner", []byte(c.Input), c.Format, role)
			switch {
			case c.Want.Reject != 0:
				if c.Want.Reject != 422 {
					t.Fatalf("vector wants reject %d; only 422 is defined", c.Want.Reject)
				}
				if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE {
					t.Fatalf("Value = %s, %v; want EUNPROCESSABLE", got, err)
				}
				msg := stratus.ErrorMessage(err)
				if !strings.Contains(msg, `"planner"`) || !strings.Contains(msg, strconv.Quote(c.Input)) {
					t.Errorf("message %q should name the agent and echo the body", msg)
				}
			case err != nil:
				t.Fatalf("Value: %v", err)
			case c.Want.String != nil:
				var s string
				if err := json.Unmarshal(got, &s); err != nil {
					t.Fatalf("Value = %s, want a JSON string", got)
				}
				if s != *c.Want.String {
					t.Errorf("Value = %q, want string %q", s, *c.Want.String)
				}
			case c.Want.JSON != nil:
				if g, w := decode(t, got), decode(t, *c.Want.JSON); !reflect.DeepEqual(g, w) {
					t.Errorf("Value = %s, want %s", got, *c.Want.JSON)
				}
			default:
				t.Fatal("vector has no want")
			}
		})
	}
}

// docs/contracts.md § The fold and submit_format (cases README: numbers keep
// their exact digits): the folded value is the compacted original bytes.
func TestValue_NumbersKeepExactDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format string
		in     string
		want   string
	}{
		{"", `{"big": 12345678901234567890, "f": 0.1000000000000000055511151231257827}`, `{"big":12345678901234567890,"f":0.1000000000000000055511151231257827}`},
		{"", "[1e400, -0.0, 1.50]", `[1e400,-0.0,1.50]`},
		{"json", "  3.14159265358979323846264338327950288  ", `3.14159265358979323846264338327950288`},
		{"", `{"html":"<a>&</a>","b":1,"b":2}`, `{"html":"<a>&</a>","b":1,"b":2}`},
	}
	for _, tt := range tests {
		got, err := fold.Value("a", []byte(tt.in), tt.format, fold.RoleBody)
		if err != nil || string(got) != tt.want {
			t.Errorf("Value(%q, %q) = %s, %v; want %s", tt.in, tt.format, got, err, tt.want)
		}
	}
}

// docs/contracts.md § The fold and submit_format (cases README: a fence is
// stripped only when the whole body is one fenced block). A fence is
// CommonMark's (§ Fenced code blocks): three or more backticks or tildes,
// closed by a
// line of at least as many of the same character, indented by up to three
// spaces, followed by nothing but spaces.
func TestValue_FenceStrippedOnlyWhenBodyIsOneFencedBlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // compacted JSON, or "" for "stays the string"
	}{
		{"four backticks", "````json\n{\"a\":1}\n````", `{"a":1}`},
		{"crlf lines", "```json\r\n{\"a\":1}\r\n```\r\n", `{"a":1}`},
		{"info string with spaces", "```json title=x\n[1]\n```", `[1]`},
		{"closing shorter than opening is content: no close", "````\n{\"a\":1}\n```", ""},
		{"closing longer than opening", "```\n{\"a\":1}\n````", `{"a":1}`},
		{"closing much longer than opening", "```json\n[1, 2]\n``````````", `[1,2]`},
		{"closing fence indented three spaces", "```\n{\"a\":1}\n   ```", `{"a":1}`},
		{"closing fence indented four spaces is content", "```\n{\"a\":1}\n    ```", ""},
		{"closing fence followed by text is content", "```\n{\"a\":1}\n``` end", ""},
		{"tildes", "~~~\n{\"a\":1}\n~~~", `{"a":1}`},
		{"tildes, info string, longer close", "~~~json\n{\"a\":1}\n~~~~~", `{"a":1}`},
		{"tildes allow backticks in the info string", "~~~js`on\n{\"a\":1}\n~~~", `{"a":1}`},
		{"backticks opened, tildes closed", "```\n{\"a\":1}\n~~~", ""},
		{"tildes opened, backticks closed", "~~~\n{\"a\":1}\n```", ""},
		{"two tildes only", "~~\n{\"a\":1}\n~~", ""},
		{"text after closing fence", "```json\n{\"a\":1}\n```\nDone.", ""},
		{"two fenced blocks", "```json\n{\"a\":1}\n```\n```json\n{\"b\":2}\n```", ""},
		{"no closing fence", "```json\n{\"a\":1}\n", ""},
		{"two backticks only", "``\n{\"a\":1}\n``", ""},
		{"one line", "```{\"a\":1}```", ""},
		{"backtick in info string", "```js`on\n{\"a\":1}\n```", ""},
		{"empty block", "```\n```", ""},
		{"nested fence is not a container", "```\n```\n{}\n```\n```", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := fold.Value("a", []byte(tt.in), "", fold.RoleBody)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want == "" {
				b, _ := json.Marshal(tt.in)
				want = string(b)
			}
			if g, w := decode(t, got), decode(t, []byte(want)); !reflect.DeepEqual(g, w) {
				t.Errorf("Value(%q) = %s, want %s", tt.in, got, want)
			}
		})
	}
}

// docs/contracts.md § The fold and submit_format: "json" promises a JSON
// body; a fenced one is unwrapped (fold doc decision), and a refusal echoes
// at most the first 200 bytes, cut on a rune boundary.
func TestValue_JSONModeStrictBodyRejectsWith422(t *testing.T) {
	t.Parallel()
	got, err := fold.Value("planner", []byte("```json\n\"pass\"\n```"), "json", fold.RoleBody)
	if err != nil || string(got) != `"pass"` {
		t.Errorf("fenced scalar under json = %s, %v; want \"pass\"", got, err)
	}
	// A closing fence longer than the opening one closes it (CommonMark §
	// Fenced code blocks): no 422.
	for _, in := range []string{"```json\n{\"a\":1}\n````", "~~~\n{\"a\":1}\n~~~~"} {
		if got, err := fold.Value("planner", []byte(in), "json", fold.RoleBody); err != nil || string(got) != `{"a":1}` {
			t.Errorf("Value(%q) under json = %s, %v; want {\"a\":1}", in, got, err)
		}
	}

	long := strings.Repeat("é", 150) // 300 bytes
	_, err = fold.Value("reviewer", []byte(long), "json", fold.RoleBody)
	var se *stratus.Error
	if !errors.As(err, &se) || se.Code != stratus.EUNPROCESSABLE || se.Field != "body" {
		t.Fatalf("err = %#v, want *stratus.Error EUNPROCESSABLE Field body", err)
	}
	if !strings.Contains(se.Message, `"reviewer"`) || !strings.Contains(se.Message, strings.Repeat("é", 100)+"…") ||
		strings.Contains(se.Message, strings.Repeat("é", 101)) {
		t.Errorf("message %q should name the agent and echo exactly the first 200 bytes", se.Message)
	}

	for _, in := range []string{"", "  \n", "\xff"} {
		if _, err := fold.Value("a", []byte(in), "json", fold.RoleBody); stratus.ErrorCode(err) != stratus.EUNPROCESSABLE {
			t.Errorf("json body %q: err %v, want EUNPROCESSABLE", in, err)
		}
	}
}

// docs/contracts.md § The fold and submit_format: a string folds as itself,
// readably (no HTML escaping), and invalid UTF-8 never folds structured.
func TestValue_StringsFoldAsThemselves(t *testing.T) {
	t.Parallel()
	got, err := fold.Value("a", []byte("<b>&</b>\n"), "", fold.RoleBody)
	if err != nil || string(got) != `"<b>&</b>\n"` {
		t.Errorf("Value = %s, %v", got, err)
	}
	got, _ = fold.Value("a", []byte("{\"a\":\"\xff\"}"), "", fold.RolePart)
	if got[0] != '"' {
		t.Errorf("invalid UTF-8 folded structured: %s", got)
	}
}

// docs/contracts.md § The fold and submit_format: unknown values fall back to
// the default and the caller logs the warning.
func TestKnownFormat_OnlyEmptyJSONAndText(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"": true, "json": true, "text": true, "yaml": false, "JSON ": false, "Json": false} {
		if got := fold.KnownFormat(s); got != want {
			t.Errorf("KnownFormat(%q) = %v, want %v", s, got, want)
		}
	}
}

func ev(kind, name, body string) stratus.OutputEvent {
	return stratus.OutputEvent{Kind: kind, Name: name, Body: []byte(body)}
}

// docs/contracts.md § Output is a tool call, § The in-process twin: the step
// value is the Final's fold, or {"out", "parts"} once a part is staged; last
// write wins per name; sidecars are invisible.
func TestFold_StagedPartsWrapTheFinal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		format string
		tail   []stratus.OutputEvent
		want   string
	}{
		{"final only", "", []stratus.OutputEvent{ev(stratus.OutputFinal, "", `{"lanes":[1,2]}`)}, `{"lanes":[1,2]}`},
		{"final prose", "", []stratus.OutputEvent{ev(stratus.OutputFinal, "", "done")}, `"done"`},
		{
			"parts in first-staging order, last write wins", "",
			[]stratus.OutputEvent{
				ev(stratus.OutputArtifact, "plan.md", "# v1"),
				ev(stratus.OutputArtifact, "plan-meta.json", `{"lanes": ["a"]}`),
				ev(stratus.OutputArtifact, "plan.md", "# v2\n"),
				ev(stratus.OutputFinal, "", "ok"),
			},
			`{"out":"ok","parts":{"plan.md":"# v2\n","plan-meta.json":{"lanes":["a"]}}}`,
		},
		{
			"sidecar invisible", "",
			[]stratus.OutputEvent{
				ev(stratus.OutputFinal, "", "pass"),
				ev(stratus.OutputSidecar, "audit:review#1", `{"tokens":3}`),
			},
			`"pass"`,
		},
		{
			"sidecar beside parts invisible", "",
			[]stratus.OutputEvent{
				ev(stratus.OutputArtifact, "verdict", "pass"),
				ev(stratus.OutputSidecar, "audit:review#1", "x"),
				ev(stratus.OutputFinal, "", "body"),
			},
			`{"out":"body","parts":{"verdict":"pass"}}`,
		},
		{
			"json mode is body only", "json",
			[]stratus.OutputEvent{
				ev(stratus.OutputArtifact, "plan.md", "# Plan\nnot json"),
				ev(stratus.OutputFinal, "", "42"),
			},
			`{"out":42,"parts":{"plan.md":"# Plan\nnot json"}}`,
		},
		{
			"text mode covers parts", "text",
			[]stratus.OutputEvent{
				ev(stratus.OutputArtifact, "m.json", `{"a":1}`),
				ev(stratus.OutputFinal, "", `[1]`),
			},
			`{"out":"[1]","parts":{"m.json":"{\"a\":1}"}}`,
		},
		{
			// docs/security.md § Part names: only a tail written before the
			// rule holds such a name; the fold leaves it out.
			"a part name NFKC changes is left out", "",
			[]stratus.OutputEvent{
				ev(stratus.OutputArtifact, "pl\u2024an.md", "spoof"),
				ev(stratus.OutputArtifact, "plan.md", "# Plan"),
				ev(stratus.OutputArtifact, "../x", "escape"),
				ev(stratus.OutputFinal, "", "ok"),
			},
			`{"out":"ok","parts":{"plan.md":"# Plan"}}`,
		},
		{
			"first final wins", "",
			[]stratus.OutputEvent{ev(stratus.OutputFinal, "", "first"), ev(stratus.OutputFinal, "", "second")},
			`"first"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := fold.Fold("planner", tt.tail, tt.format)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Fold = %s\nwant   %s", got, tt.want)
			}
			if !json.Valid(got) {
				t.Errorf("Fold returned invalid JSON %s", got)
			}
		})
	}
}

// docs/contracts.md § The in-process twin: without a Final the caller sees
// the bare "no Final in output_tail"; a json-mode body that is not JSON is a
// 422.
func TestFold_NoFinalOrBadJSONBodyIsUnprocessable(t *testing.T) {
	t.Parallel()
	for _, tail := range [][]stratus.OutputEvent{
		nil,
		{ev(stratus.OutputArtifact, "plan.md", "x"), ev(stratus.OutputSidecar, "audit", "y")},
	} {
		_, err := fold.Fold("planner", tail, "")
		if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE || stratus.ErrorMessage(err) != "no Final in output_tail" {
			t.Errorf("Fold(%d events) err = %v, want EUNPROCESSABLE \"no Final in output_tail\"", len(tail), err)
		}
	}
	_, err := fold.Fold("planner", []stratus.OutputEvent{ev(stratus.OutputFinal, "", "I could not finish.")}, "json")
	if stratus.ErrorCode(err) != stratus.EUNPROCESSABLE {
		t.Errorf("json body prose: err %v, want EUNPROCESSABLE", err)
	}
}

// docs/security.md § Part names: Parts lists the names the fold folds, in
// first-staging order, and says once why each other name is left out.
func TestParts_NamesFoldedAndRefused(t *testing.T) {
	t.Parallel()
	names, refused := fold.Parts([]stratus.OutputEvent{
		ev(stratus.OutputArtifact, "plan.md", "a"),
		ev(stratus.OutputArtifact, "pl\u2024an.md", "b"),
		ev(stratus.OutputSidecar, "audit:x", "c"),
		ev(stratus.OutputArtifact, "pl\u2024an.md", "d"),
		ev(stratus.OutputArtifact, "notes.md", "e"),
		ev(stratus.OutputFinal, "", "f"),
	})
	if strings.Join(names, ",") != "plan.md,notes.md" {
		t.Errorf("names = %q, want plan.md, notes.md", names)
	}
	if len(refused) != 1 || stratus.ErrorCode(refused[0]) != stratus.EINVALID || !strings.Contains(refused[0].Error(), `"pl\u2024an.md" is not NFKC-stable`) {
		t.Errorf("refused = %v, want one EINVALID for the dot-leader name", refused)
	}
}
