package projection

import (
	"strings"
	"testing"
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

// issue 14 § 3 and § 6: a name is decoded once — a "%" left over was
// encoded twice; its NFKC form obeys the "/", "\" and ".." rules (full-width
// "．．" and "／" read as ".." and "/"); the names Stratus writes into a ctx
// dir (its marker, and anything starting ".stratus") are reserved.
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
	for _, ok := range []string{"résumé.md", "ｒｅｐｏｒｔ.md", "stratus-ctx", "a.b.c"} {
		if err := CheckPartName(ok); err != nil {
			t.Errorf("CheckPartName(%q) = %v", ok, err)
		}
	}
}
