package runner

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stratusflow/stratus/internal/private"
	"github.com/stratusflow/stratus/internal/testenv"
	"github.com/stratusflow/stratus/internal/worker"
)

// nobody is the uid (and gid) of "another local user" in these tests.
const nobody = 65534

// asNobody makes path (a file, a directory or a symbolic link) belong to
// uid nobody, as if that user had made it.
func asNobody(t *testing.T, path string) {
	t.Helper()
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

// The finding: a runner with no state dir (on ECS, a pooled runner, a
// worker's own process) wrote an undeliverable report to
// $TMPDIR/stratus-spool-<task>-<attempt>.report with os.WriteFile, under
// a name anyone could predict: another user who made that file first (mode
// 0666) read the step's whole report, and one who put a symbolic link
// there had root overwrite the file it pointed to. Now the report goes to
// a directory only the runner's user may enter, in a file made anew with
// mode 0600, never through a link; what another user made first is left
// alone and never used. docs/security.md § Files under .stratus.
func TestSpool_AnotherUserNeitherReadsNorRedirectsTheReport(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("playing another user needs root")
	}
	const report = "precious: the whole report of the step"
	for name, plant := range map[string]func(t *testing.T, tmp, victim string) (untouched []string){
		"a file made first, mode 0666": func(t *testing.T, tmp, _ string) []string {
			p := filepath.Join(tmp, "stratus-spool-t1-1.report")
			if err := os.WriteFile(p, nil, 0o666); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, 0o666)
			asNobody(t, p)
			return []string{p}
		},
		"a symbolic link made first, to a file of root's": func(t *testing.T, tmp, victim string) []string {
			p := filepath.Join(tmp, "stratus-spool-t1-1.report")
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
			asNobody(t, p)
			return nil
		},
		"the spool directory made first, open to all": func(t *testing.T, tmp, _ string) []string {
			d := SpoolDirFor(tmp)
			if err := os.Mkdir(d, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(d, 0o777)
			asNobody(t, d)
			return []string{d}
		},
		"the spool directory a symbolic link to another user's": func(t *testing.T, tmp, _ string) []string {
			theirs := filepath.Join(tmp, "theirs")
			if err := os.Mkdir(theirs, 0o777); err != nil {
				t.Fatal(err)
			}
			os.Chmod(theirs, 0o777)
			asNobody(t, theirs)
			if err := os.Symlink(theirs, SpoolDirFor(tmp)); err != nil {
				t.Fatal(err)
			}
			asNobody(t, SpoolDirFor(tmp))
			return []string{theirs}
		},
	} {
		t.Run(name, func(t *testing.T) {
			tmp := testenv.SharedDir(t)
			t.Setenv("TMPDIR", tmp)
			victim := filepath.Join(t.TempDir(), "victim.txt")
			if err := os.WriteFile(victim, []byte("root's own"), 0o600); err != nil {
				t.Fatal(err)
			}
			untouched := plant(t, tmp, victim)

			f, o := setup(t, `read l; printf '{"subrun_report":"`+report+`"}\n'`)
			f.submitErr = 503
			o.SpoolDir = "" // a runner with no state dir
			err := Run(context.Background(), o)
			if !errors.Is(err, ErrSpooled) {
				t.Fatalf("Run: %v, want ErrSpooled", err)
			}
			// The error (said on stderr) names the file.
			_, rest, _ := strings.Cut(err.Error(), "spooled to ")
			path, _, _ := strings.Cut(rest, ": ")
			if b, rerr := os.ReadFile(path); rerr != nil || string(b) != report {
				t.Fatalf("the spool file %q named by %q holds %q (%v)", path, err, b, rerr)
			}
			fi, _ := os.Lstat(path)
			if uid, _ := private.Owner(fi); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || uid != os.Geteuid() {
				t.Errorf("spool file %s: %s, uid %d; want a regular file of yours with mode 0600", path, fi.Mode(), uid)
			}
			if err := private.CheckDir("spool directory", filepath.Dir(path), ""); err != nil {
				t.Errorf("the spool file's directory: %v", err)
			}
			cat := exec.Command("cat", path)
			cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			if out, err := cat.Output(); err == nil {
				t.Errorf("uid %d read the spooled report: %q", nobody, out)
			}
			if b, _ := os.ReadFile(victim); string(b) != "root's own" {
				t.Errorf("the file a planted link points to now holds %q", b)
			}
			for _, p := range untouched {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Errorf("%s: %v", p, err)
					continue
				}
				if fi.IsDir() {
					if entries, _ := os.ReadDir(p); len(entries) != 0 {
						t.Errorf("the runner wrote into another user's directory %s: %v", p, entries)
					}
				} else if fi.Size() != 0 {
					b, _ := os.ReadFile(p)
					t.Errorf("the runner wrote into another user's file %s: %q", p, b)
				}
			}
		})
	}
}

// A name already taken in the spool directory (the same attempt spooled
// twice: a refused result, then the failure that reports it) is never
// reused: the second file gets a name of its own.
func TestSpool_NeverReusesAFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "spool")
	o := Options{SpoolDir: dir}
	p := &worker.Payload{TaskID: "t1", Attempt: 1}
	first, err := spool(o, p, "report", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := spool(o, p, "report", []byte("two"))
	if err != nil {
		t.Fatal(err)
	}
	if first == second {
		t.Fatalf("both spooled to %s", first)
	}
	for path, want := range map[string]string{first: "one", second: "two"} {
		if b, _ := os.ReadFile(path); string(b) != want {
			t.Errorf("%s holds %q, want %q", path, b, want)
		}
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode().Perm() != 0o700 || fi.Mode().Type() != fs.ModeDir {
		t.Errorf("spool directory %s: %v %v, want a directory with mode 0700", dir, fi.Mode(), err)
	}
}
