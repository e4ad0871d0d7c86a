package lifecycle

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"sync"
	"time"

	"github.com/stratusflow/stratus"
)

// NewRunID returns a fresh run id: r-<UTC yyyymmddThhmmss>-<6 hex digits>.
func NewRunID() string {
	b := make([]byte, 3)
	rand.Read(b)
	return "r-" + time.Now().UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

var runIDPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^r-[0-9]{8}T[0-9]{6}-[0-9a-f]{6}$`) })

// CheckRunID refuses a run id NewRunID would not make (EINVALID, field
// "run_id"): run ids name directories, files and executions.
func CheckRunID(id string) error {
	if !runIDPattern().MatchString(id) {
		return stratus.FieldErrorf(stratus.EINVALID, "run_id", "%q is not a run id; want r-<yyyymmddThhmmss>-<6 hex digits>", id)
	}
	return nil
}
