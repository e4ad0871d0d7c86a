package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A body that stops arriving loses its connection once the idle timeout
// passes (200 connections sending a byte every 5 s all stayed open before),
// while a body that keeps arriving, however slowly, is read whole.
func TestBodyIdle_AStalledBodyIsCutSlowOneIsRead(t *testing.T) {
	t.Parallel()
	got := make(chan string, 4)
	srv := NewServer(nil)
	srv.Handler = BodyIdle(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			got <- "error"
			http.Error(w, "body: "+err.Error(), http.StatusRequestTimeout)
			return
		}
		got <- string(b)
		w.Write([]byte("ok"))
	}), time.Second, 20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	send := func(chunks []string, gap time.Duration) (string, time.Duration) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		n := 0
		for _, ch := range chunks {
			n += len(ch)
		}
		began := time.Now()
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
		for _, ch := range chunks {
			io.WriteString(c, ch)
			time.Sleep(gap)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line, time.Since(began)
	}
	// Stalled: 1 of 100 bytes, then nothing.
	line, took := send([]string{"x"}, 0)
	if took > 4*time.Second || strings.Contains(line, "200") {
		t.Errorf("a stalled body: %q after %v; want the connection cut within the idle timeout", line, took)
	}
	if g := <-got; g != "error" {
		t.Errorf("the handler read %q from a stalled body", g)
	}
	// A trickle: one byte every 300 ms (3 bytes a second, each read within
	// the idle timeout, under the 20 bytes a second minimum): cut once its
	// grace is spent (about 1.2 s), not after the 30 s the 100 bytes take.
	// Before, every byte moved the deadline and it was held for good.
	trickle := make([]string, 100)
	for i := range trickle {
		trickle[i] = "z"
	}
	if line, took := send(trickle[:20], 300*time.Millisecond); strings.Contains(line, "200") || took > 8*time.Second {
		t.Errorf("a trickling body: %q after %v; want the connection cut", line, took)
	}
	if g := <-got; g != "error" {
		t.Errorf("the handler read %q from a trickling body", g)
	}
	// Slow but steady: 10 chunks of 10 bytes, 300 ms apart (3 s in all,
	// three idle timeouts; 33 bytes a second).
	chunks := make([]string, 10)
	for i := range chunks {
		chunks[i] = strings.Repeat("y", 10)
	}
	if line, _ := send(chunks, 300*time.Millisecond); !strings.Contains(line, "200") {
		t.Errorf("a slow, steady body: %q; want 200", line)
	}
	if g := <-got; g != strings.Repeat("y", 100) {
		t.Errorf("the handler read %q", g)
	}
}
