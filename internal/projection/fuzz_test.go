package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"

	"github.com/stratusflow/stratus"
	"github.com/stratusflow/stratus/internal/projection"
	sinkfs "github.com/stratusflow/stratus/internal/sink/fs"
	"github.com/stratusflow/stratus/internal/testenv"
)

// fsTempSuffix is how many bytes the fs sink adds to a base name for its
// temporary file: "." + name + ".tmp-" + 16 hex digits.
const fsTempSuffix = len(".") + len(".tmp-") + 16

// docs/contracts.md § Files are the server's job (vectors
// testdata/cases/partnames): CheckPartName never panics; a name it accepts
// holds no "/", "\", NUL or "..", is not "." or "", is NFKC-stable, and
// projects to exactly one file directly inside <root>/ctx; a name it refuses
// is skipped fail-open. Either way nothing is written outside the sink's
// root.
func FuzzCheckPartName(f *testing.F) {
	raw, err := os.ReadFile(testenv.Cases(f, "partnames", "cases.json"))
	if err != nil {
		f.Fatal(err)
	}
	var v struct{ Accept, Reject []string }
	if err := json.Unmarshal(raw, &v); err != nil {
		f.Fatal(err)
	}
	for _, name := range append(v.Accept, v.Reject...) {
		f.Add(name)
	}
	for _, name := range []string{"step.md", "a..b", "...", "..\\", "C:x", "c:", "1:x", "a\tb", "a\u0085b", "\u202e.md",
		"\xff", ". ", " ..", "a\x7f", "%2e%2e", "ünïcødé 名前.md", strings.Repeat("é", 116), strings.Repeat("x", 255-fsTempSuffix+1)} {
		f.Add(name)
	}

	f.Fuzz(func(t *testing.T, name string) {
		err := projection.CheckPartName(name)
		if err != nil {
			var se *stratus.Error
			if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "name" {
				t.Fatalf("CheckPartName(%q) = %#v; want *stratus.Error EINVALID Field name", name, err)
			}
		} else {
			switch {
			case name == "", name == ".", strings.ContainsAny(name, "/\\\x00"), strings.Contains(name, ".."):
				t.Fatalf("CheckPartName(%q) accepted a name that is not a plain file name", name)
			case len(name) > projection.MaxNameBytes:
				t.Fatalf("CheckPartName accepted a %d-byte name; the limit is %d", len(name), projection.MaxNameBytes)
			case norm.NFKC.String(name) != name:
				t.Fatalf("CheckPartName accepted %+q, which NFKC changes (docs/security.md § Part names)", name)
			}
		}

		dir := t.TempDir()
		root := filepath.Join(dir, "root")
		s := sinkfs.New(root)
		body := []byte("part body")
		parts := []projection.Part{{Name: name, Body: body}}
		written, perr := projection.Project(context.Background(), s, "ctx", "step",
			projection.FrontMatter{TaskID: "T1", Step: "step", SubmittedAt: time.Unix(0, 0)}, []byte("final"), parts)
		skipped := projection.SkippedParts("step", parts)

		// Nothing lands outside <root>/ctx, whatever happened.
		var files []string
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		for _, p := range files {
			if rel, err := filepath.Rel(filepath.Join(root, "ctx"), p); err != nil || filepath.Dir(rel) != "." {
				t.Fatalf("part %q: file %s written outside %s/ctx", name, p, root)
			}
		}

		if perr != nil {
			t.Fatalf("Project with part %q: %v; a part is skipped fail-open, never fatal", name, perr)
		}
		want := []string{"ctx/step.md"}
		switch {
		case err != nil:
			if len(skipped) != 1 || stratus.ErrorCode(skipped[0]) != stratus.EINVALID {
				t.Fatalf("refused part %q: SkippedParts = %v; want its EINVALID", name, skipped)
			}
		case name == "step.md":
			if len(skipped) != 1 || stratus.ErrorCode(skipped[0]) != stratus.ECONFLICT {
				t.Fatalf("part %q: SkippedParts = %v; want ECONFLICT", name, skipped)
			}
		default:
			if len(skipped) != 0 {
				t.Fatalf("accepted part %q: SkippedParts = %v", name, skipped)
			}
			want = append(want, "ctx/"+name)
			p := filepath.Join(root, "ctx", name)
			if filepath.Dir(p) != filepath.Join(root, "ctx") {
				t.Fatalf("accepted part %q maps to %s, not a file directly in ctx", name, p)
			}
			if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, body) {
				t.Fatalf("accepted part %q: %s holds %q, %v; want %q", name, p, got, err, body)
			}
		}
		if strings.Join(written, "\x00") != strings.Join(want, "\x00") {
			t.Fatalf("part %q: written %q, want %q", name, written, want)
		}
		if len(files) != len(want) {
			t.Fatalf("part %q: %d files on disk (%q), want %d (no temporary file left)", name, len(files), files, len(want))
		}
	})
}

// docs/contracts.md § Files are the server's job: the wrapped file
// round-trips. For any body bytes and front-matter strings, Encode either
// refuses with *stratus.Error EINVALID (Field "front_matter") or writes a
// document that Decode turns back into the identical body bytes and front
// matter.
func FuzzProjection_RoundTrip(f *testing.F) {
	add := func(body string, strs [6]string, attempt, n int, sec, nsec int64) {
		f.Add([]byte(body), strs[0], strs[1], strs[2], strs[3], strs[4], strs[5], attempt, n, sec, nsec)
	}
	add("# Plan\n\n1. do it\n", [6]string{"T-17", "planning", "planning#1", "planner", "", "722822fb"}, 1, 17, 1741064767, 0)
	add("---\ntask_id: evil\n---\nbody", [6]string{"---", "x\n---\ny", "? x", ".inf", "yes", "null"}, 0, -1, 0, 1)
	add("\x00\xff\xfe binary", [6]string{"a\tb", "'\"", " lead", "trail ", "\r", "\u2028"}, -3, 1<<40, -62135596800, 999999999)
	add("", [6]string{"~", "#c", "a: b", "123", "é 名", "\xff"}, 1, 0, 253402300799, 123456789)
	add("\r\n---\r\n", [6]string{"\u0085", "\ufeff", "- x", "[a]", "{a: 1}", "!tag"}, 2, 2, 1, 0)
	add("a\n---\n", [6]string{"&a", "*a", "|", ">", "%x", "@x"}, 3, 3, 2, 0)

	f.Fuzz(func(t *testing.T, body []byte, taskID, step, stepRef, agent, format, sha string, attempt, n int, sec, nsec int64) {
		fm := projection.FrontMatter{TaskID: taskID, Step: step, StepRef: stepRef, Attempt: attempt, Agent: agent,
			Format: format, SHA256: sha, Bytes: n, SubmittedAt: time.Unix(sec, nsec)}
		doc, err := projection.Encode(fm, body)
		if err != nil {
			var se *stratus.Error
			if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "front_matter" {
				t.Fatalf("Encode(%+v) = %#v; want *stratus.Error EINVALID Field front_matter", fm, err)
			}
			return
		}
		if !bytes.HasSuffix(doc, body) {
			t.Fatalf("Encode(%+v, %q) = %q: the body is not written verbatim at the end", fm, body, doc)
		}
		gotFM, gotBody, err := projection.Decode(doc)
		if err != nil {
			t.Fatalf("Decode(Encode(%+v, %q)) = %v\n%s", fm, body, err, doc)
		}
		if !bytes.Equal(gotBody, body) {
			t.Fatalf("body %q came back %q\n%s", body, gotBody, doc)
		}
		if !gotFM.SubmittedAt.Equal(fm.SubmittedAt) || gotFM.SubmittedAt.Location() != time.UTC {
			t.Fatalf("submitted_at %v came back %v\n%s", fm.SubmittedAt, gotFM.SubmittedAt, doc)
		}
		gotFM.SubmittedAt = fm.SubmittedAt
		if gotFM != fm {
			t.Fatalf("front matter %+v came back %+v\n%s", fm, gotFM, doc)
		}
	})
}

// Encode's fast path (README.md § Performance) writes exactly the bytes the
// YAML library writes: for any front matter, Encode and the library-only
// encoder agree, in output and in refusal.
func FuzzEncode_FastPathIsTheLibrarysBytes(f *testing.F) {
	add := func(strs [6]string, attempt, n int, sec, nsec int64) {
		f.Add(strs[0], strs[1], strs[2], strs[3], strs[4], strs[5], attempt, n, sec, nsec)
	}
	add([6]string{"t1", "planning", "planning#1", "planner", "", "722822fbab"}, 1, 17, 1741064767, 0)
	add([6]string{"T-17", "s_1", "review#12", "a.b", "json", "1234e5"}, 2, 0, 1741064767, 123456789)
	add([6]string{"yes", "No", "null#2", "True", "off", "0b1010"}, -1, -5, 0, 120000000)
	add([6]string{"e10", "inf", "nan", "x#", "#1", "deadbeef"}, 0, 1<<40, -62135596800, 1)
	add([6]string{"a-", "_", "y", "Y", "on", "0e5"}, 3, 3, 253402300799, 999999999)
	add([6]string{"a.b.c", "x-1", "x#01", "é", "a b", "abcdef0123"}, 4, 4, 1, 0)
	f.Fuzz(func(t *testing.T, taskID, step, stepRef, agent, format, sha string, attempt, n int, sec, nsec int64) {
		fm := projection.FrontMatter{TaskID: taskID, Step: step, StepRef: stepRef, Attempt: attempt, Agent: agent,
			Format: format, SHA256: sha, Bytes: n, SubmittedAt: time.Unix(sec, nsec)}
		got, gotErr := projection.Encode(fm, []byte("body"))
		fm.SubmittedAt = fm.SubmittedAt.UTC()
		want, wantErr := projection.EncodeSlow(fm, []byte("body"))
		if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("Encode(%+v) = %q, %v\nthe library writes %q, %v", fm, got, gotErr, want, wantErr)
		}
	})
}

// The fast path's shapes, exhaustively for short strings: every string of
// up to 2 characters over letters YAML gives meaning to, digits and the
// punctuation names hold, in each string field, encodes as the library
// does (FuzzEncode_FastPathIsTheLibrarysBytes explores the rest).
func TestEncode_FastPathShortStrings(t *testing.T) {
	t.Parallel()
	const alphabet = "aeEnNoOyYxb_-.09#"
	var strs []string
	var grow func(prefix string, left int)
	grow = func(prefix string, left int) {
		strs = append(strs, prefix)
		if left == 0 {
			return
		}
		for _, c := range alphabet {
			grow(prefix+string(c), left-1)
		}
	}
	grow("", 2)
	strs = append(strs, "aey", "n.b", "x-y", "e10", "E1_", "y#9", "true", "True", "TRUE", "false", "False", "null", "Null", "NULL", "yes", "Yes", "off", "Off", "inf", "nan", "review#2", "0b101", "0b1e", "0e1", "1e1a")
	for _, s := range strs {
		for field := range 6 {
			v := [6]string{"t1", "planning", "planning#1", "planner", "", "722822fbab"}
			v[field] = s
			fm := projection.FrontMatter{TaskID: v[0], Step: v[1], StepRef: v[2], Attempt: 1, Agent: v[3], Format: v[4], SHA256: v[5], Bytes: 3, SubmittedAt: time.Unix(1741064767, 5).UTC()}
			got, gotErr := projection.Encode(fm, nil)
			want, wantErr := projection.EncodeSlow(fm, nil)
			if (gotErr == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("field %d = %q: Encode wrote %q, %v; the library writes %q, %v", field, s, got, gotErr, want, wantErr)
			}
		}
	}
}
