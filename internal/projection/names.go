package projection

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/stratusflow/stratus"
)

// MaxNameBytes is the longest part name, in bytes, that common file
// systems hold (ext4, APFS, NTFS in UTF-16 units aside).
const MaxNameBytes = 255

// CheckPartName reports whether name can be a staged part's file name in
// the ctx dir: a plain file name
// (docs/contracts.md § Files are the server's job; vectors
// testdata/cases/partnames). It refuses, with a *stratus.Error EINVALID
// (Field "name") naming the rule broken: the empty name, "." and "..", any
// name containing "/", "\" or "..", a NUL or other control character, invalid
// UTF-8, a drive prefix ("C:") and names over MaxNameBytes bytes; a '%'
// (names are percent-decoded once: one left over was encoded twice,
// "%252e%252e"); a name whose NFKC form breaks those rules ("．．", "／"); a
// name NFKC changes at all ("pl\u2024an.md", full-width letters, ligatures, a
// decomposed "é": docs/security.md § Part names); and the names
// Stratus keeps for its own files in a ctx dir (ReservedPrefix: CtxMarker).
// Unicode letters (NFC-composed), spaces and dotfiles are accepted.
func CheckPartName(name string) error {
	if err := checkName("name", "part name", name); err != nil {
		return err
	}
	// Two names NFKC folds together read as one ("pl\u2024an.md" beside
	// "pl.an.md") to a reviewer, a $.parts["…"] lookup typed by hand, or a
	// tool that normalizes: only the one spelling NFKC keeps is a name.
	if n := norm.NFKC.String(name); n != name {
		return stratus.FieldErrorf(stratus.EINVALID, "name",
			"part name %+q is not NFKC-stable: NFKC normalization reads it as %+q, so it could pass for another part's name; want a name NFKC leaves unchanged (docs/security.md § Part names)", name, n)
	}
	if len(name) >= len(ReservedPrefix) && strings.EqualFold(name[:len(ReservedPrefix)], ReservedPrefix) {
		return stratus.FieldErrorf(stratus.EINVALID, "name", "part name %q is reserved: names starting %q are Stratus's own files in a ctx dir (its marker %s); want another name", name, ReservedPrefix, CtxMarker)
	}
	if strings.EqualFold(name, ".git") {
		// A ".git" file is a gitdir pointer: git run in the ctx dir (inside
		// the work dir's repository) would follow it to another repository.
		return stratus.FieldErrorf(stratus.EINVALID, "name", `part name %q is reserved: a ".git" file points git at another repository; want another name`, name)
	}
	return nil
}

// CtxMarker is the file Stratus writes into every ctx dir it creates, so
// that a later run knows the directory is its own to archive.
const CtxMarker = ".stratus-ctx"

// ReservedPrefix starts every name Stratus writes into a ctx dir of its
// own accord; no part may take one (matched case-insensitively).
const ReservedPrefix = ".stratus"

// checkName applies the part-name rule to any value that becomes one path
// segment (a part name, a step id, a task id).
func checkName(field, what, name string) error {
	bad := func(rule string) error {
		return stratus.FieldErrorf(stratus.EINVALID, field,
			"%s %q %s; want a plain file name such as \"plan.md\"", what, name, rule)
	}
	switch {
	case name == "":
		return bad("is empty")
	case name == "." || name == "..":
		return bad(`is "." or ".."`)
	case strings.Contains(name, "/"):
		return bad(`contains "/"`)
	case strings.Contains(name, `\`):
		return bad(`contains "\"`)
	case strings.Contains(name, ".."):
		return bad(`contains ".."`)
	case len(name) > MaxNameBytes:
		return bad("is longer than 255 bytes")
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case len(name) >= 2 && name[1] == ':' && (name[0]|0x20 >= 'a' && name[0]|0x20 <= 'z'):
		return bad(`starts with a drive prefix such as "C:"`)
	case strings.Contains(name, "%"):
		return bad(`contains "%": names are percent-decoded once, so a "%" left over was encoded twice`)
	}
	// A file system or a reader that folds compatibility characters sees
	// "．．" as "..", "／" as "/": the rules apply to the NFKC form too.
	if n := norm.NFKC.String(name); n != name {
		if n == "." {
			return bad(`reads as "." once normalized (NFKC)`)
		}
		for _, r := range []struct{ bad, rule string }{{"/", `"/"`}, {`\`, `"\"`}, {"..", `".."`}} {
			if strings.Contains(n, r.bad) {
				return bad(fmt.Sprintf("reads as %q once normalized (NFKC), which contains %s", n, r.rule))
			}
		}
		if len(n) >= 2 && n[1] == ':' {
			return bad(fmt.Sprintf("reads as %q once normalized (NFKC), which starts with a drive prefix", n))
		}
	}
	for _, r := range name {
		if r == 0 {
			return bad("contains a NUL byte")
		}
		if unicode.IsControl(r) {
			return bad("contains a control character")
		}
		if unicode.Is(unicode.Cf, r) {
			// Bidi overrides and other invisible format characters make a
			// name read differently from what it is.
			return bad(fmt.Sprintf("contains the invisible format character %U", r))
		}
		if strings.ContainsRune(`<>:"|?*`, r) {
			return bad(fmt.Sprintf("contains %q, which Windows file systems cannot hold", r))
		}
	}
	if strings.HasSuffix(name, ".") || strings.HasSuffix(name, " ") {
		return bad("ends with a dot or a space, which Windows file systems drop")
	}
	stem := strings.ToUpper(name)
	if i := strings.IndexByte(stem, '.'); i >= 0 {
		stem = stem[:i]
	}
	stem = strings.TrimRight(stem, " ")
	if windowsDevice[stem] {
		return bad(fmt.Sprintf("is the Windows device name %s, which no Windows file system can hold", stem))
	}
	return nil
}

// windowsDevice are the reserved device names of Windows, with any extension.
var windowsDevice = map[string]bool{
	"CON": true, "PRN": true, "AUX": true, "NUL": true,
	"COM1": true, "COM2": true, "COM3": true, "COM4": true, "COM5": true, "COM6": true, "COM7": true, "COM8": true, "COM9": true,
	"LPT1": true, "LPT2": true, "LPT3": true, "LPT4": true, "LPT5": true, "LPT6": true, "LPT7": true, "LPT8": true, "LPT9": true,
}
