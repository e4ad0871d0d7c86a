package handler

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stratusflow/stratus"
)

// The claim function runs one claim whatever woke it — a batch of the claim
// queue, S3's "Object Created" under tasks/pending/, the schedule — and
// refuses any other event, naming it.
func TestClaim_OneClaimPerWakeOtherEventsRefused(t *testing.T) {
	claims := 0
	fail := error(nil)
	h := Claim(func(context.Context) error { claims++; return fail })
	for _, ev := range []string{
		`{"Records":[{"messageId":"1","body":"{\"wake\":\"run r-1 ended\"}","eventSource":"aws:sqs"},{"messageId":"2","body":"{}","eventSource":"aws:sqs"}]}`,
		`{"version":"0","detail-type":"Object Created","source":"aws.s3","detail":{"bucket":{"name":"b"},"object":{"key":"stratus/tasks/pending/t1.md"}}}`,
		`{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`,
	} {
		if _, err := h(context.Background(), json.RawMessage(ev)); err != nil {
			t.Errorf("%s: %v", ev, err)
		}
	}
	if claims != 3 {
		t.Fatalf("%d claims for 3 wakes (one a batch of two messages); want 3", claims)
	}
	_, err := h(context.Background(), json.RawMessage(`{"detail-type":"ECS Task State Change","source":"aws.ecs"}`))
	if stratus.ErrorCode(err) != stratus.EINVALID || !strings.Contains(err.Error(), "ECS Task State Change") {
		t.Errorf("another event: %v; want EINVALID naming it", err)
	}
	if claims != 3 {
		t.Errorf("another event ran a claim")
	}
	// A claim that fails fails the batch: the queue delivers it again.
	fail = errors.New("busy")
	if _, err := h(context.Background(), json.RawMessage(`{"Records":[{"messageId":"1","body":"{}"}]}`)); err == nil {
		t.Errorf("a failed claim answered nil; want its error (the batch is delivered again)")
	}
}
