package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time: `make build` sets both
// (-ldflags "-X main.version=$(git describe --tags --dirty) -X
// main.commit=…"); a build without them takes both from the binary's
// build info (versionOf).
var (
	version = "dev"
	commit  = ""
)

// versionLine is what `stratus --version` prints: the version, the commit
// it was built from (with "+dirty" for uncommitted changes) and when, and
// the Go toolchain.
func versionLine() string {
	bi, _ := debug.ReadBuildInfo()
	return versionOf(version, commit, bi)
}

// versionOf is the version line of a binary linked with version and commit
// (either may be empty or the default) whose build info is bi (nil when it
// has none). The version is the linked one, else the main module's as the
// go command stamped it (go install …@v1.2.3 gives v1.2.3; go build at a
// tagged commit gives the tag, past it a pseudo-version naming the tag,
// "+dirty" for uncommitted changes), else "dev". The commit is the linked
// one, else the build info's vcs.revision.
func versionOf(linkedVersion, linkedCommit string, bi *debug.BuildInfo) string {
	v, rev, when, dirty := linkedVersion, linkedCommit, "", false
	if bi != nil {
		if (v == "" || v == "dev") && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if linkedCommit == "" {
					rev = s.Value
					if len(rev) > 12 {
						rev = rev[:12]
					}
				}
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				dirty = linkedCommit == "" && s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	if rev == "" {
		rev = "unknown"
	}
	if dirty {
		rev += "+dirty"
	}
	line := fmt.Sprintf("stratus %s (commit %s", v, rev)
	if when != "" {
		line += ", " + when
	}
	return line + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
