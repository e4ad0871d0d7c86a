package yamlast

import (
	"bytes"
	"unicode/utf8"
)

// bom is the UTF-8 byte order mark some editors write first; PyYAML (worc)
// skips it, and so does Stratus.
var bom = []byte("\ufeff")

// StripBOM returns data without a leading UTF-8 byte order mark.
func StripBOM(data []byte) []byte { return bytes.TrimPrefix(data, bom) }

// InvalidUTF8 returns the byte offset of the first byte of data that is not
// part of a valid UTF-8 sequence, with its 1-based line and column (in
// bytes), or offset -1 when data is valid UTF-8 (such bytes are
// named, never accepted silently).
func InvalidUTF8(data []byte) (offset, line, col int) {
	if utf8.Valid(data) {
		return -1, 0, 0
	}
	line, start := 1, 0
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i, line, i - start + 1
		}
		if data[i] == '\n' {
			line, start = line+1, i+1
		}
		i += size
	}
	return -1, 0, 0
}
