package workspace

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/stratusflow/stratus/internal/gitwork"
)

// WorkDirState is what the operator's work dir holds that a run whose
// engines work in checkouts of their own (workspace: worktree) must leave
// as it is (docs/security.md § Workspace commits): a stamp of each file a
// commit of everything would hold — tracked and untracked, .gitignore
// honoured, as Freeze takes them — and of the repository's hooks, config
// and info dir, which git runs or reads on the operator's next command.
//
// A stamp is the file's lstat: type and permissions, size, modification
// and change time (the change time cannot be set back), inode. Ignored
// files are not stamped: they are the operator's build outputs and caches,
// which change while they work.
type WorkDirState struct {
	stamps map[string]stamp // path (relative to the work dir, or absolute outside it) → stamp
}

type stamp struct {
	mode         fs.FileMode
	size         int64
	mtime, ctime int64 // ns
	ino          uint64
}

// ReadWorkDir stamps the files of dir (see WorkDirState), except those
// under the exclude paths (relative to dir, slash-separated: Stratus's
// state dir, the run's ctx and report dirs, which Stratus itself writes).
// A dir in no git repository is read with its own .gitignore files.
//
// Errors: EINVALID for a malformed exclude path; git's when it cannot
// list the files.
func ReadWorkDir(ctx context.Context, dir string, exclude []string) (*WorkDirState, error) {
	exclude, err := cleanExcludes("exclude", exclude)
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	var env []string
	var gitDirs []string // the repository's paths git runs or reads: hooks, config, info
	switch _, err := gitwork.Open(ctx, dir); {
	case err == nil:
		out, err := gitLine(ctx, dir, nil, "rev-parse", "--path-format=absolute", "--git-common-dir", "--git-dir")
		if err != nil {
			return nil, err
		}
		paths := strings.Split(out, "\n")
		common := paths[0]
		gitDirs = []string{filepath.Join(common, "hooks"), filepath.Join(common, "config"), filepath.Join(common, "info")}
		if len(paths) > 1 && paths[1] != common {
			gitDirs = append(gitDirs, filepath.Join(paths[1], "config.worktree"))
		}
	case errors.Is(err, gitwork.ErrNotTree) && !strings.Contains(gitwork.Reason(err), "not installed"):
		tmp, err := os.MkdirTemp("", "stratus-watch-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := initGitDir(tmp, "", nil); err != nil {
			return nil, err
		}
		env = []string{"GIT_DIR=" + tmp, "GIT_WORK_TREE=" + dir}
	default:
		return nil, err
	}
	out, err := git(ctx, dir, env, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	if err != nil {
		return nil, err
	}
	s := &WorkDirState{stamps: map[string]stamp{}}
	for _, p := range strings.Split(string(out), "\x00") {
		p = strings.TrimSuffix(p, "/") // a nested repository is listed as "dir/"
		if p == "" || excluded(p, exclude) {
			continue
		}
		s.stamps[p] = stampOf(filepath.Join(dir, filepath.FromSlash(p)))
	}
	for _, g := range gitDirs {
		_ = filepath.WalkDir(g, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil // absent: stamped as absent below
			}
			if !d.IsDir() {
				s.stamps[shown(dir, p)] = stampOf(p)
			}
			return nil
		})
		if _, err := os.Lstat(g); err != nil {
			s.stamps[shown(dir, g)] = stamp{}
		}
	}
	return s, nil
}

// shown is p relative to dir when inside it, else p.
func shown(dir, p string) string {
	if rel, err := filepath.Rel(dir, p); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return p
}

// Changed lists the paths whose stamp differs between s (before) and
// after: added, changed or removed, sorted.
func (s *WorkDirState) Changed(after *WorkDirState) []string {
	var out []string
	for p, a := range after.stamps {
		if b, ok := s.stamps[p]; !ok || b != a {
			out = append(out, p)
		}
	}
	for p, b := range s.stamps {
		if _, ok := after.stamps[p]; !ok && b != (stamp{}) {
			out = append(out, p) // removed (or ignored now: .gitignore changed, and is listed too)
		}
	}
	sort.Strings(out)
	return out
}

// stampOf is the stamp of the file at p; the zero stamp when it is absent.
func stampOf(p string) stamp {
	fi, err := os.Lstat(p)
	if err != nil {
		return stamp{}
	}
	st := stamp{mode: fi.Mode(), size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	st.ctime, st.ino = sysStamp(fi)
	return st
}
