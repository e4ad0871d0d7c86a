package dynamodb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/stratusflow/stratus"
)

// AppendDegradation appends d to its run's degradation record: the next
// entry of the run's degradation range, created only if absent (as
// AppendOutput numbers a tail).
func (s *Store) AppendDegradation(ctx context.Context, d stratus.Degradation) error {
	what := "append degradation of run " + quote(d.RunID)
	pk, wid := pkRun+d.RunID, newWID()
	err := contend(ctx, what, func() (bool, error) {
		last, err := s.lastSeq(ctx, pk, skDegradation)
		if err != nil {
			return false, err
		} else if last >= maxSeq {
			return false, fmt.Errorf("run %q has %d degradations, the most one run can hold", d.RunID, last)
		}
		return s.create(ctx, key(pk, skDegradation+pad(last+1)).setAll(map[string]av{
			attrRecord: str("degradation"), attrWID: str(wid),
			"step_ref": text(d.StepRef), "attempt": num(int64(d.Attempt)), "tool": text(d.Tool), "error": text(d.Error),
			"fallback": text(d.Fallback), "note": text(d.Note), "at": millis(d.At),
		}))
	})
	return wrap(what, err)
}

// ListDegradations returns a run's degradations in append order.
func (s *Store) ListDegradations(ctx context.Context, runID string) ([]stratus.Degradation, error) {
	items, err := s.query(ctx, pkRun+runID, skDegradation, false, 0)
	if err != nil {
		return nil, wrap("list degradations of run "+quote(runID), err)
	}
	var out []stratus.Degradation
	for _, it := range items {
		out = append(out, stratus.Degradation{
			RunID: runID, StepRef: it.str("step_ref"), Attempt: int(it.int("attempt")), Tool: it.str("tool"),
			Error: it.str("error"), Fallback: it.str("fallback"), Note: it.str("note"), At: it.time("at"),
		})
	}
	return out, nil
}

func renderKey(agent string) item { return key(pkAgent+agent, skRenderSize) }

// PutRenderSize records an agent's latest system-prompt size (last write
// wins: an unconditional put).
func (s *Store) PutRenderSize(ctx context.Context, r stratus.RenderSize) error {
	it := renderKey(r.Agent).setAll(map[string]av{attrRecord: str("render_size"), "bytes": num(int64(r.Bytes)), "at": millis(r.At)})
	_, err := s.c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: it})
	return wrap("put render size of agent "+quote(r.Agent), err)
}

// GetRenderSize returns an agent's latest system-prompt size; ENOTFOUND if none.
func (s *Store) GetRenderSize(ctx context.Context, agent string) (stratus.RenderSize, error) {
	it, err := s.get(ctx, renderKey(agent))
	if err != nil {
		return stratus.RenderSize{}, wrap("get render size of agent "+quote(agent), err)
	} else if it == nil {
		return stratus.RenderSize{}, stratus.Errorf(stratus.ENOTFOUND, "agent %q has no observed render size", agent)
	}
	return stratus.RenderSize{Agent: agent, Bytes: int(it.int("bytes")), At: it.time("at")}, nil
}
