package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time: a release build sets version
// (-ldflags "-X main.version=v1.2.3"), `make build` the commit; the
// binary's VCS build info, when it has one, names the commit otherwise.
var (
	version = "dev"
	commit  = ""
)

// versionLine is what `stratus --version` prints: the version, the commit
// it was built from (with "+dirty" for uncommitted changes) and when, and
// the Go toolchain — read from the binary's build info.
func versionLine() string {
	rev, when, dirty := commit, "", false
	if bi, ok := debug.ReadBuildInfo(); ok && rev == "" {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
				if len(rev) > 12 {
					rev = rev[:12]
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	if dirty {
		rev += "+dirty"
	}
	line := fmt.Sprintf("stratus %s (commit %s", version, rev)
	if when != "" {
		line += ", " + when
	}
	return line + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
