package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// docs/security.md § Upload size limits: a report and a part over the 4 MiB
// inline limit travel through an upload, the runner's and `stratus worker`'s
// client choosing it by itself, so an engine writes nothing different: here a
// 6 MiB report (the @file: sentinel, resolved by the runner) and a 5 MiB part
// staged with `stratus worker artifact`. The ctx dir holds every byte and no
// upload is left behind, not even one the engine stored and never named.
func TestRun_ReportAndPartOverTheInlineLimitTravelThroughAnUpload(t *testing.T) {
	t.Parallel()
	dir, task := tinyRun(t, "", `read line
f=$(mktemp); p=$(mktemp)
head -c 6291456 /dev/zero | tr '\0' r > "$f"
head -c 5242880 /dev/zero | tr '\0' p > "$p"
case "$line" in *'"kind":"agent"'*) "$SBINDIR/stratus" worker artifact --name big.md "$p" || exit 3 ;; esac
# An upload asked for and stored, never named: gone once the run ends.
k=$(curl -sf -H "Authorization: Bearer $STRATUS_HANDLE" -d '{"bytes":3}' "$STRATUS_API_URL/v1/worker/upload" | sed 's/.*"url":"\([^"]*\)".*/\1/')
[ -n "$k" ] && curl -sf -X PUT -H "Authorization: Bearer $STRATUS_HANDLE" --data-binary abc "$STRATUS_API_URL$k" || exit 4
rm -f "$p"
printf '{"subrun_report": "@file:%s"}\n' "$f"
`, "{SBINDIR: "+filepath.Dir(stratusBin)+"}", "t-upload")
	r := runCLI(t, "run", task, "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	res := decodeRun(t, r.stdout)
	proj, err := os.ReadFile(filepath.Join(res.CtxDir, "first.md"))
	if err != nil || !bytes.HasSuffix(bytes.TrimRight(proj, "\n"), bytes.Repeat([]byte("r"), 6<<20)) {
		t.Errorf("first.md: %d bytes (%v); want it to end with the 6 MiB report", len(proj), err)
	}
	part, err := os.ReadFile(filepath.Join(res.CtxDir, "big.md"))
	if err != nil || !bytes.Equal(part, bytes.Repeat([]byte("p"), 5<<20)) {
		t.Errorf("big.md: %d bytes (%v); want the 5 MiB part", len(part), err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".stratus/uploads/*/*")); len(left) != 0 {
		t.Errorf("uploads left behind: %v\n%s", left, r.stderr)
	}
}
