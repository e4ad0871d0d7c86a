package httpapi

import (
	"io"
	"net/http"
	"time"
)

// Read timeouts of every listener Stratus opens (issue 14 § 5): a client
// that sends its headers or its body slowly — one byte every few seconds —
// loses its connection instead of holding it for ever.
const (
	// HeaderTimeout bounds the request line and headers.
	HeaderTimeout = 10 * time.Second
	// BodyIdleTimeout bounds the wait for each next piece of a request
	// body: a 256 MiB workspace upload over a slow link still arrives, a
	// body that stops arriving does not hold the connection.
	BodyIdleTimeout = 30 * time.Second
	// IdleTimeout bounds a kept-alive connection between requests.
	IdleTimeout = 2 * time.Minute
	// MaxHeaderBytes bounds the request line and headers, bytes.
	MaxHeaderBytes = 64 << 10
)

// NewServer is an http.Server for h with the timeouts above; serve it
// with Serve(listener).
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           BodyIdle(h, BodyIdleTimeout),
		ReadHeaderTimeout: HeaderTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}

// BodyIdle wraps h so that each read of a request body must make progress
// within idle: the read deadline moves forward as bytes arrive (the
// connection is closed once it passes).
func BodyIdle(h http.Handler, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(idle)) == nil {
				r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: idle}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.rc.SetReadDeadline(time.Now().Add(b.idle))
	}
	return n, err
}
