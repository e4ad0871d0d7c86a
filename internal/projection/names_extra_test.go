package projection

import "testing"

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
