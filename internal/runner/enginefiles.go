package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/stratusflow/stratus/internal/worker"
)

// EngineFileCache holds the engine files (worker.EngineFile: frozen with
// a run, carried by each step's payload) of many steps in one directory:
// each distinct file is written once, read-only (0444, executables
// 0555), at <dir>/<sha256 of name, mode and bytes>/<name>, and kept until
// Close. The in-process launcher's steps share one (InProcess), where
// each step wrote, and removed, its own copy of the same bytes. The zero
// value is ready; the directory is made on the first file. Safe for
// concurrent use.
type EngineFileCache struct {
	mu    sync.Mutex
	dir   string            // "" until the first file
	paths map[string]string // key → path
}

// place returns the path of f's copy, writing it if it is the first.
func (c *EngineFileCache) place(f worker.EngineFile) (string, error) {
	name := engineFileName(f)
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%t\x00", name, f.Executable)
	h.Write(f.Body)
	key := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.paths[key]; ok {
		return p, nil
	}
	if c.dir == "" {
		dir, err := os.MkdirTemp("", "stratus-engine-files-")
		if err != nil {
			return "", fmt.Errorf("engine files: %w", err)
		}
		c.dir, c.paths = dir, map[string]string{}
	}
	sub := filepath.Join(c.dir, key[:32])
	if err := os.Mkdir(sub, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(sub, name)
	mode := os.FileMode(0o444)
	if f.Executable {
		mode = 0o555
	}
	if err := os.WriteFile(p, f.Body, mode); err != nil {
		return "", err
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is filtered by the umask
		return "", err
	}
	c.paths[key] = p
	return p, nil
}

// Close removes the directory and every file in it; a step still running
// loses its engine's files. Closing a cache that holds nothing does
// nothing. The cache is ready again after Close.
func (c *EngineFileCache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dir == "" {
		return nil
	}
	err := os.RemoveAll(c.dir)
	c.dir, c.paths = "", nil
	return err
}

// engineFileName is the name f's copy takes: its base name, "file" when it
// has none.
func engineFileName(f worker.EngineFile) string {
	name := filepath.Base(f.Name)
	if name == "." || name == ".." || name == "/" || name == "" {
		name = "file"
	}
	return name
}
