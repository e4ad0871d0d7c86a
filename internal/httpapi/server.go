package httpapi

import (
	"io"
	"net/http"
	"time"
)

// Read timeouts of every listener Stratus opens: a client that sends its
// headers or its body slowly — one byte every few seconds — loses its
// connection instead of holding it for ever.
const (
	// HeaderTimeout bounds the request line and headers.
	HeaderTimeout = 10 * time.Second
	// BodyIdleTimeout bounds the wait for each next piece of a request
	// body: a 256 MiB workspace upload over a slow link still arrives, a
	// body that stops arriving does not hold the connection.
	BodyIdleTimeout = 30 * time.Second
	// MinBodyRate is the slowest average a request body may arrive at,
	// bytes a second, once BodyIdleTimeout of grace is spent: a body
	// trickling one byte every 5 s (each read "making progress") is cut
	// after about 30 s instead of being held for days.
	MinBodyRate = 1 << 10
	// IdleTimeout bounds a kept-alive connection between requests.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds the request line and headers, bytes.
	MaxHeaderBytes = 64 << 10
)

// NewServer is an http.Server for h with the timeouts above; serve it
// with Serve(listener).
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           BodyIdle(h, BodyIdleTimeout, MinBodyRate),
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// BodyIdle wraps h so that a request body keeps arriving: each next piece
// within idle, and on average at minRate bytes a second or faster after
// idle of grace (the read deadline is the earlier of the last read plus
// idle and the start plus idle plus one second per minRate bytes read).
// Past it the connection is closed.
func BodyIdle(h http.Handler, idle time.Duration, minRate int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			now := time.Now()
			if rc.SetReadDeadline(now.Add(idle)) == nil {
				r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: idle, rate: minRate, start: now}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type idleBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	idle  time.Duration
	rate  int64
	start time.Time
	read  int64
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.read += int64(n)
		deadline := time.Now().Add(b.idle)
		if b.rate > 0 {
			earned := b.start.Add(b.idle + time.Duration(float64(b.read)/float64(b.rate)*float64(time.Second)))
			if earned.Before(deadline) {
				deadline = earned
			}
		}
		b.rc.SetReadDeadline(deadline)
	}
	return n, err
}
