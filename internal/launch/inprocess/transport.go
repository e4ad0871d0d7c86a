package inprocess

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// Direct returns a RoundTripper that serves each request by calling h in
// the caller's goroutine: the worker API without the socket, the same
// contract minus the transport (docs/contracts.md § The in-process twin).
// The handler sees the request as a server would (RequestURI, Host, a
// non-nil Body); its answer is buffered whole (the worker API's answers
// are small JSON documents). A panic in h is returned as an error, as a
// server's dropped connection would be.
func Direct(h http.Handler) http.RoundTripper { return direct{h} }

type direct struct{ h http.Handler }

func (d direct) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.Host = req.URL.Host
	in.RemoteAddr = "in-process"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := &recorder{header: http.Header{}}
	defer func() {
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("%s %s: the worker API panicked: %v", req.Method, req.URL.Path, p)
		}
	}()
	d.h.ServeHTTP(w, in)
	if req.Body != nil {
		req.Body.Close()
	}
	w.WriteHeader(http.StatusOK)
	h := w.sent
	h.Set("Content-Length", strconv.Itoa(w.body.Len()))
	return &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// recorder is the ResponseWriter a direct call writes to.
type recorder struct {
	header http.Header
	sent   http.Header // the header as it was when the status was written
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code, r.sent = code, r.header.Clone()
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}
