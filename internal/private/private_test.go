package private

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// nobody is the uid (and gid) of "another local user" in these tests.
const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("playing another user needs root")
	}
}

// A directory is private only when it is a real directory of this user's
// that no one else may enter; anything else is refused, naming the path
// and the problem. docs/security.md § The host socket, § Files under .stratus.
func TestCheckDir_RefusesWhatAnotherUserMadeOrMayEnter(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		make func(t *testing.T, dir string)
		want string // "" = accepted
	}{
		"mode 0700, yours": {func(t *testing.T, dir string) { os.Mkdir(dir, 0o700) }, ""},
		"missing":          {func(*testing.T, string) {}, "does not exist"},
		"open to others": {func(t *testing.T, dir string) {
			os.Mkdir(dir, 0o700)
			os.Chmod(dir, 0o777)
		}, "has mode 0777"},
		"a file": {func(t *testing.T, dir string) { os.WriteFile(dir, nil, 0o600) }, "is not a directory"},
		"a symbolic link to a private directory": {func(t *testing.T, dir string) {
			real := dir + ".real"
			os.Mkdir(real, 0o700)
			os.Symlink(real, dir)
		}, "is a symbolic link"},
		"another user's": {func(t *testing.T, dir string) {
			needRoot(t)
			os.Mkdir(dir, 0o700)
			os.Chown(dir, nobody, nobody)
		}, "belongs to uid 65534, not to you"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "d")
			c.make(t, dir)
			err := CheckDir("test directory", dir, "remove it")
			switch {
			case c.want == "" && err != nil:
				t.Errorf("CheckDir: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir)):
				t.Errorf("CheckDir: %v; want a refusal naming %s and %q", err, dir, c.want)
			case c.want != "" && c.want != "does not exist" && (stratus.ErrorCode(err) != stratus.EFORBIDDEN || !strings.HasSuffix(err.Error(), "; remove it")):
				t.Errorf("CheckDir: %v (%s); want EFORBIDDEN ending with the fix", err, stratus.ErrorCode(err))
			}
		})
	}
}

// CreateIn makes the directory 0700 when missing, never reuses a file or
// follows a link at the name (the next free name is taken), and creates
// the file 0600. docs/security.md § Files under .stratus.
func TestCreateIn_MakesANewPrivateFileNeverThroughALink(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "spool")
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o600)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Symlink(victim, filepath.Join(dir, "r.report"))
	os.WriteFile(filepath.Join(dir, "r-2.report"), []byte("older"), 0o600)
	f, path, err := CreateIn("spool directory", dir, "", "r.report")
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	f.Close()
	if path != filepath.Join(dir, "r-3.report") {
		t.Errorf("path %s, want r-3.report (r.report is a link, r-2.report a file)", path)
	}
	if fi, _ := os.Lstat(path); fi.Mode().Perm() != 0o600 || !fi.Mode().IsRegular() {
		t.Errorf("%s: mode %s, want a regular file 0600", path, fi.Mode())
	}
	for p, want := range map[string]string{victim: "keep", filepath.Join(dir, "r-2.report"): "older", path: "new"} {
		if b, _ := os.ReadFile(p); string(b) != want {
			t.Errorf("%s holds %q, want %q", p, b, want)
		}
	}
	fresh := filepath.Join(t.TempDir(), "fresh")
	f, _, err = CreateIn("spool directory", fresh, "", "x")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Lstat(fresh); !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("a missing directory was made %s, want 0700", fi.Mode())
	}
}

// A secret file is read only when no other user could have written or
// read it: the file itself (not a link), yours, 0600, in a directory of
// yours or root's that no one else may write (as ssh asks of its key
// files). docs/security.md § The run viewer's secret.
func TestReadFile_RefusesASecretAnotherUserCouldReadOrReplace(t *testing.T) {
	t.Parallel()
	const secret = "0123456789abcdef0123456789abcdef"
	for name, c := range map[string]struct {
		make func(t *testing.T, dir string) string // returns the path to read
		want string                                // "" = read
	}{
		"yours, 0600, in a private directory": {func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o600)
			return p
		}, ""},
		"mode 0644": {func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o644)
			os.Chmod(p, 0o644)
			return p
		}, "has mode 0644"},
		"another user's file, 0600": {func(t *testing.T, dir string) string {
			needRoot(t)
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o600)
			os.Chown(p, nobody, nobody)
			return p
		}, "belongs to uid 65534, not to you"},
		"a symbolic link to a good file": {func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o600)
			os.Symlink(p, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link")
		}, "is a symbolic link"},
		"in a directory another user owns": {func(t *testing.T, dir string) string {
			needRoot(t)
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o600)
			os.Chown(dir, nobody, nobody)
			return p
		}, "belongs to uid 65534, not to you"},
		"in a directory others may write": {func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "tok")
			os.WriteFile(p, []byte(secret), 0o600)
			os.Chmod(dir, 0o1777)
			return p
		}, "has mode 0777"},
		"a directory": {func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "tok")
			os.Mkdir(p, 0o700)
			return p
		}, "is not a regular file"},
		"missing": {func(t *testing.T, dir string) string { return filepath.Join(dir, "tok") }, "does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "d")
			os.Mkdir(dir, 0o700)
			p := c.make(t, dir)
			b, err := ReadFile("--token-file", p, 1024)
			switch {
			case c.want == "" && (err != nil || string(b) != secret):
				t.Errorf("ReadFile: %q, %v", b, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p)):
				t.Errorf("ReadFile: %q, %v; want a refusal naming %s and %q", b, err, p, c.want)
			}
		})
	}
}
