package bundlecheck

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// header is what a bundle's header says.
type header struct {
	prereqs []plumbing.Hash // commits the pack's objects may build on
	refs    []ref           // the refs the header lists, in order
	pack    int             // offset of the packfile
}

// ref is one ref line of a bundle's header.
type ref struct {
	hash plumbing.Hash
	name string
}

// maxHeader bounds a bundle's header, bytes: thousands of refs.
const maxHeader = 1 << 20

// parseHeader reads the header of a git bundle (gitformat-bundle(5)):
// "# v2 git bundle" or "# v3 git bundle" and v3 capabilities ("@..."; only
// object-format=sha1 is understood), then prerequisites ("-<sha>
// [comment]") and refs ("<sha> <refname>"), then an empty line before the
// packfile. The error says what is wrong, for an EUNPROCESSABLE.
func parseHeader(data []byte) (*header, error) {
	h := &header{}
	first := true
	v3 := false
	for off := 0; ; {
		if off >= len(data) || off > maxHeader {
			return nil, fmt.Errorf("no end of the bundle header within %d bytes", min(len(data), maxHeader))
		}
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return nil, fmt.Errorf("the bundle header ends without a newline")
		}
		line := string(data[off : off+nl])
		off += nl + 1
		switch {
		case first:
			first = false
			switch line {
			case "# v2 git bundle":
			case "# v3 git bundle":
				v3 = true
			default:
				return nil, fmt.Errorf("it does not start with \"# v2 git bundle\" (it starts with %q)", clip(line))
			}
		case line == "":
			h.pack = off
			return h, nil
		case v3 && strings.HasPrefix(line, "@"):
			if line != "@object-format=sha1" {
				return nil, fmt.Errorf("capability %q is not supported (only @object-format=sha1)", clip(line))
			}
		case strings.HasPrefix(line, "-"):
			sha, _, _ := strings.Cut(line[1:], " ")
			if !isSHA(sha) {
				return nil, fmt.Errorf("prerequisite line %q does not name a commit", clip(line))
			}
			h.prereqs = append(h.prereqs, plumbing.NewHash(sha))
		default:
			sha, name, ok := strings.Cut(line, " ")
			if !ok || !isSHA(sha) || name == "" {
				return nil, fmt.Errorf("ref line %q is not \"<sha> <refname>\"", clip(line))
			}
			h.refs = append(h.refs, ref{plumbing.NewHash(sha), name})
		}
	}
}

// isSHA reports 40 lowercase hex digits.
func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// clip shortens what an error quotes of an input.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
