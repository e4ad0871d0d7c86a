package projection

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/stratusflow/stratus"
)

// Stratus also refuses names no portable file system can hold
// (testdata/cases/partnames/README.md), and invisible format characters.
func TestCheckPartName_PortableNames(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"con", "NUL.txt", "com1.md", "lpt9", "a:b", "what?", "x*", "trailing.", "trailing ", "evil\u202egnp.md", "zero\u200bwidth"} {
		if CheckPartName(bad) == nil {
			t.Errorf("CheckPartName(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"console.md", "nullable.txt", "-rf", "com10", "a b.txt"} {
		if err := CheckPartName(ok); err != nil {
			t.Errorf("CheckPartName(%q) = %v", ok, err)
		}
	}
}

// A name is decoded once — a "%" left over was encoded twice; its NFKC form
// obeys the "/", "\" and ".." rules (full-width "．．" and "／" read as ".." and
// "/"); the names Stratus writes into a ctx dir (its marker, and anything
// starting ".stratus") are reserved.
func TestCheckPartName_DecodedOnceNormalizedAndReserved(t *testing.T) {
	t.Parallel()
	for bad, why := range map[string]string{
		"%2e%2e":            `contains "%"`,
		"%252e%252e":        `contains "%"`,
		"100%.md":           `contains "%"`,
		"．．":                `reads as ".." once normalized (NFKC)`,
		"a．．b":              `reads as "a..b" once normalized (NFKC), which contains ".."`,
		"a／b":               `reads as "a/b" once normalized (NFKC), which contains "/"`,
		"a＼b":               `reads as "a\\b" once normalized (NFKC), which contains "\"`,
		"．":                 `reads as "." once normalized (NFKC)`,
		"Ｃ:x":               `starts with a drive prefix`,
		"\u2024\u2024":      `once normalized (NFKC)`, // one dot leader twice: ".."
		".stratus-ctx":      "is reserved",
		".STRATUS-CTX":      "is reserved",
		".stratus-anything": "is reserved",
		".git":              "points git at another repository",
		".GIT":              "points git at another repository",
	} {
		err := CheckPartName(bad)
		if err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckPartName(%q) = %v; want it refused: %s", bad, err, why)
		}
	}
	for _, ok := range []string{"résumé.md", "stratus-ctx", "a.b.c"} {
		if err := CheckPartName(ok); err != nil {
			t.Errorf("CheckPartName(%q) = %v", ok, err)
		}
	}
}

// docs/security.md § Part names: a part name is NFKC-stable (NFKC leaves it
// unchanged), so no two accepted names read as one: "pl\u2024an.md" (ONE
// DOT LEADER) is refused beside "pl.an.md", as are full-width, ligature,
// superscript, compatibility-symbol and decomposed spellings. The error is
// EINVALID on field "name", with the value escaped, its NFKC form and the
// rule.
func TestCheckPartName_RefusesNamesNFKCChanges(t *testing.T) {
	t.Parallel()
	for bad, escaped := range map[string]string{
		"pl\u2024an.md":   `"pl\u2024an.md"`,                           // ONE DOT LEADER
		"ｒｅｐｏｒｔ.md":       `"\uff52\uff45\uff50\uff4f\uff52\uff54.md"`, // full-width letters
		"\ufb01le.md":     `"\ufb01le.md"`,                             // LATIN SMALL LIGATURE FI
		"x\u00b2.txt":     `"x\u00b2.txt"`,                             // SUPERSCRIPT TWO
		"\u2126.md":       `"\u2126.md"`,                               // OHM SIGN (NFKC: GREEK CAPITAL OMEGA)
		"re\u0301sume.md": `"re\u0301sume.md"`,                         // decomposed é (NFD, as macOS may spell it)
		"a\u00a0b.md":     `"a\u00a0b.md"`,                             // NO-BREAK SPACE
	} {
		err := CheckPartName(bad)
		var se *stratus.Error
		if !errors.As(err, &se) || se.Code != stratus.EINVALID || se.Field != "name" {
			t.Errorf("CheckPartName(%+q) = %v; want EINVALID on field name", bad, err)
			continue
		}
		for _, want := range []string{escaped, "not NFKC-stable", strconv.QuoteToASCII(norm.NFKC.String(bad))} {
			if !strings.Contains(se.Message, want) {
				t.Errorf("CheckPartName(%+q): %q does not say %s", bad, se.Message, want)
			}
		}
	}
	for _, ok := range []string{"plan.md", "pl.an.md", "r\u00e9sum\u00e9.md", "日本語.md", "\u03a9.md", "notes v2.md"} {
		if err := CheckPartName(ok); err != nil {
			t.Errorf("CheckPartName(%+q) = %v; an NFKC-stable name is accepted", ok, err)
		}
	}
}
