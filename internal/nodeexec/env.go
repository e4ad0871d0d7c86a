package nodeexec

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// The variables every check command and tool gets, whatever the runner's
// own environment holds (docs/runner-image.md § The environment of checks
// and tools): a toolchain finds its defaults under them — Go its build
// cache (os.UserCacheDir: $XDG_CACHE_HOME, else $HOME/.cache) and its
// module cache ($HOME/go), npm $HOME/.npm, pip $XDG_CACHE_HOME/pip.
// GOCACHE, GOMODCACHE and friends are deliberately not set: each toolchain
// derives them from these, as on a developer's machine.
const (
	EnvHome  = "HOME"
	EnvTmp   = "TMPDIR"
	EnvCache = "XDG_CACHE_HOME"
)

// CommandEnv is the environment a check command or a tool runs with:
//
//  1. the variables allowed names that are set in the runner's environment
//     (Env: security.allowed_environment, nothing else of the runner's);
//  2. then extra (config checks.env, NAME → value), each replacing a
//     variable of the same name;
//  3. then the floor: HOME and TMPDIR, each filled in when the two above
//     leave it unset or naming no writable directory — HOME with the
//     runner's own HOME when that is a writable directory, else with a
//     directory of the runner's user (FallbackHome); TMPDIR with the
//     system's temporary directory — and XDG_CACHE_HOME, when unset or not
//     an absolute path, with $HOME/.cache (a toolchain creates it).
//
// On AWS the worker's environment is the image's and the task
// definition's (an ECS task may have PATH alone): the floor is what lets
// `go test` find a build cache there. Embedded, the operator's HOME passes
// through the default allowlist and the floor changes nothing. The error
// is non-nil only when no writable HOME can be made.
func CommandEnv(allowed []string, extra map[string]string) ([]string, error) {
	env := Env(allowed)
	set := func(k, v string) {
		for i, kv := range env {
			if strings.HasPrefix(kv, k+"=") {
				env[i] = k + "=" + v
				return
			}
		}
		env = append(env, k+"="+v)
	}
	for _, k := range slices.Sorted(maps.Keys(extra)) {
		set(k, extra[k])
	}
	get := func(k string) string {
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, k+"="); ok {
				return v
			}
		}
		return ""
	}
	if !writableDir(get(EnvHome)) {
		home := os.Getenv(EnvHome)
		if !writableDir(home) {
			var err error
			if home, err = FallbackHome(); err != nil {
				return nil, err
			}
		}
		set(EnvHome, home)
	}
	if !writableDir(get(EnvTmp)) {
		set(EnvTmp, os.TempDir())
	}
	if c := get(EnvCache); c == "" || !filepath.IsAbs(c) {
		set(EnvCache, filepath.Join(get(EnvHome), ".cache"))
	}
	return env, nil
}

// FallbackHome is the HOME of a check or tool whose runner has none it may
// write: <temp dir>/stratus-home-<uid>, created mode 0700 when missing and
// otherwise reused, so the caches a toolchain writes there serve every
// later step a pooled runner takes. A path that exists and is not a
// directory of this user is refused.
func FallbackHome() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("stratus-home-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("a HOME for checks and tools: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("a HOME for checks and tools: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || (ok && int(st.Uid) != os.Getuid()) {
		return "", fmt.Errorf("a HOME for checks and tools: %s exists and is not a directory of user %d; remove it or set HOME in the runner's environment", dir, os.Getuid())
	}
	return dir, nil
}

// writableDir reports whether p is an absolute path of a directory this
// process may create files in.
func writableDir(p string) bool {
	if p == "" || !filepath.IsAbs(p) {
		return false
	}
	fi, err := os.Stat(p)
	if err != nil || !fi.IsDir() {
		return false
	}
	return syscall.Access(p, 0o2|0o1) == nil // W_OK|X_OK
}
