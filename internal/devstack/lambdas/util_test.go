package lambdas_test

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
)

// syncBuffer is a bytes.Buffer safe for the log writer's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  interface {
		io.Writer
		String() string
	}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// zombie reports whether pid has exited but not been reaped (state Z).
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}
