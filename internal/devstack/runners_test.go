package devstack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stratusflow/stratus/internal/container/containertest"
	"github.com/stratusflow/stratus/internal/devstack"
)

// The containers' side of the stand-in: the offline network's gateway is
// an address of this machine that a forward serves on, and a pause
// container a killed dev aws left (same stack name) is replaced, not a
// conflict.
func TestContainerRunners_ForwardAndALeftPauseContainer(t *testing.T) {
	ctx := context.Background()
	const image = containertest.RunnerImage
	e := containertest.WithImage(t, image)
	stack := fmt.Sprintf("t-runners-%d", time.Now().UnixNano())
	left, err := devstack.StartContainerRunners(ctx, e, image, stack)
	if err != nil {
		t.Fatal(err)
	}
	_ = left // as a killed dev aws leaves it: never closed
	cr, err := devstack.StartContainerRunners(ctx, e, image, stack)
	if err != nil {
		t.Fatalf("a second start of stack %s: %v", stack, err)
	}
	defer cr.Close()
	if cr.Gateway == "" {
		t.Fatal("no gateway address")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "moto") }))
	defer srv.Close()
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u, err := cr.Forward(fctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET %s (forwarded to %s): %v", u, srv.URL, err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "moto" {
		t.Errorf("the forward answered %q", b)
	}
	if d, err := cr.Anchor(ctx, image, 1); err != nil || d <= 0 {
		t.Errorf("Anchor = %v, %v", d, err)
	}
}
