package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/stratusflow/stratus"
)

// blobReaders is how many spilled bodies ListOutput reads at once.
const blobReaders = 8

// tailPrefix is the sort-key prefix of the output items of one attempt.
func tailPrefix(n int) string { return skOutput + pad(n) + "#" }

// AppendOutput appends e to the tail of attempt (e.TID, e.Attempt) and
// returns its sequence number, one more than the tail's last (1 for an
// empty tail); e.Seq is ignored. A second OutputFinal for one attempt
// fails with ECONFLICT and appends nothing.
//
// The sequence number is the sort key: the write reads the tail's last
// item and creates the next one only if it is still absent, trying again
// when another append took it. A Final is created in one transaction with
// the attempt's final marker, which exists at most once.
func (s *Store) AppendOutput(ctx context.Context, e stratus.OutputEvent) (seq int, err error) {
	return s.appendOutput(ctx, e, nil)
}

// CompleteAttempt appends final to its attempt's tail and replaces the
// attempt and step records, in one transaction: all three happen or none.
// Errors: as AppendOutput (ECONFLICT for a second Final), UpdateAttempt and
// UpdateStep (ENOTFOUND).
func (s *Store) CompleteAttempt(ctx context.Context, final stratus.OutputEvent, a stratus.Attempt, st stratus.Step) (int, error) {
	au, err := s.attemptUpdate(ctx, a)
	if err != nil {
		return 0, fmt.Errorf("complete attempt %d of task %q: %w", a.N, a.TID, err)
	}
	return s.appendOutput(ctx, final, &completion{a, au, st})
}

// completion is what CompleteAttempt writes beside the Final.
type completion struct {
	a      stratus.Attempt
	update update
	st     stratus.Step
}

func (s *Store) appendOutput(ctx context.Context, e stratus.OutputEvent, c *completion) (int, error) {
	what := fmt.Sprintf("append %s output to attempt %d of task %q", e.Kind, e.Attempt, e.TID)
	if _, err := attemptKey(e.TID, e.Attempt); err != nil {
		return 0, err
	}
	body, err := s.spill(ctx, "body", e.Body, s.spillBytes, false)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	wid := newWID()
	pk, prefix := pkTask+e.TID, tailPrefix(e.Attempt)
	final := e.Kind == stratus.OutputFinal
	var seq int
	noRun := false
	err = contend(ctx, what, func() (lost bool, err error) {
		last, err := s.lastSeq(ctx, pk, prefix)
		if err != nil {
			return false, err
		} else if last >= maxSeq {
			return false, fmt.Errorf("the tail holds %d events, the most one attempt can hold", last)
		}
		seq = last + 1
		it := key(pk, prefix+pad(seq)).setAll(map[string]av{
			attrRecord: str("output"), attrWID: str(wid), "tid": str(e.TID), "attempt": num(int64(e.Attempt)), "seq": num(int64(seq)),
			"kind": text(e.Kind), "name": text(e.Name), "ok": boolean(e.OK), "at": millis(e.At),
		}).setAll(body)
		if !final && c == nil {
			exists, err := s.create(ctx, it)
			return exists, err
		}
		// A Final with the attempt's final marker and, for a completion,
		// the attempt and step updates: all or none.
		var items []types.TransactWriteItem
		marker, slot, att, step := -1, 0, -1, -1
		if final {
			marker = len(items)
			items = append(items, s.createTx(key(pk, skFinal+pad(e.Attempt)).setAll(map[string]av{
				attrRecord: str("final"), attrWID: str(wid), "seq": num(int64(seq)),
			})))
		}
		slot = len(items)
		items = append(items, s.createTx(it))
		run := -1
		if c != nil {
			// The attempt's update conditioned on the usage it replaces,
			// and the change to its run's totals (RunTotals).
			w, missing, err := s.replaceUsage(ctx, c.a, c.update, noRun)
			if err != nil {
				return false, err
			} else if missing {
				return false, attemptNotFound(c.a)
			}
			att, step = len(items), len(items)+1
			items = append(items, w.att, s.updateTx(stepUpdate(c.st)))
			if w.run != nil {
				run = len(items)
				items = append(items, *w.run)
			}
		}
		err = s.transact(ctx, items...)
		codes, olds, ok := canceled(err)
		failed := func(i int) bool { return i >= 0 && reason(codes, i) == codeConditionFailed }
		switch {
		case err == nil:
			return false, nil
		case !ok:
			return false, err
		case failed(slot) && mine(olds[slot], wid):
			seq = int(olds[slot].int("seq")) // the SDK retried this transaction after it had committed
			return false, nil
		case failed(marker):
			return false, stratus.Errorf(stratus.ECONFLICT, "attempt %d of task %q already has a final output (DynamoDB TransactionCanceledException: %s)",
				e.Attempt, e.TID, codeConditionFailed)
		case failed(att):
			return true, nil // gone, or its usage changed: the next read says which
		case failed(run):
			noRun = true // the run keeps no totals
			return true, nil
		case failed(step):
			return false, stepNotFound(c.st.TID)
		case failed(slot) || hasCode(codes, codeTransactionConflict):
			return true, nil
		}
		return false, err
	})
	if err != nil {
		if code := stratus.ErrorCode(err); code == stratus.ECONFLICT || code == stratus.ENOTFOUND {
			return 0, err
		}
		return 0, wrap(what, err)
	}
	return seq, nil
}

// ListPartNames returns the distinct names of the OutputArtifact items of
// attempt (tid, attempt), in the order first staged; none for an empty
// tail or an unknown attempt. It reads the tail's kind and name
// attributes only: no inline body travels and no spilled body is read.
func (s *Store) ListPartNames(ctx context.Context, tid string, attempt int) ([]string, error) {
	what := fmt.Sprintf("list part names of attempt %d of task %q", attempt, tid)
	if _, err := attemptKey(tid, attempt); err != nil {
		return nil, err
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ProjectionExpression:     aws.String("#kind, #name"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey, "#sk": SortKey, "#kind": "kind", "#name": "name"},
		ExpressionAttributeValues: map[string]av{
			":pk": str(pkTask + tid), ":prefix": str(tailPrefix(attempt)),
		},
		ConsistentRead:   aws.Bool(true),
		ScanIndexForward: aws.Bool(true),
	}
	items, err := s.queryAll(ctx, in, 0)
	if err != nil {
		return nil, wrap(what, err)
	}
	var names []string
	seen := map[string]bool{}
	for _, it := range items {
		if n := it.str("name"); it.str("kind") == stratus.OutputArtifact && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names, nil
}

// ListOutput returns the tail of attempt (tid, attempt) in append order;
// none (and no error) for an empty tail or an unknown attempt. Spilled
// bodies are read back from Blobs.
func (s *Store) ListOutput(ctx context.Context, tid string, attempt int) ([]stratus.OutputEvent, error) {
	what := fmt.Sprintf("list output of attempt %d of task %q", attempt, tid)
	if _, err := attemptKey(tid, attempt); err != nil {
		return nil, err
	}
	items, err := s.query(ctx, pkTask+tid, tailPrefix(attempt), false, 0)
	if err != nil {
		return nil, wrap(what, err)
	}
	events := make([]stratus.OutputEvent, len(items))
	errs := make([]error, len(items))
	var wg sync.WaitGroup
	sem := make(chan struct{}, blobReaders)
	for i, it := range items {
		e := &events[i]
		*e = stratus.OutputEvent{
			TID: tid, Attempt: attempt, Seq: int(it.int("seq")), Kind: it.str("kind"), Name: it.str("name"),
			OK: it.bool("ok"), At: it.time("at"),
		}
		if e.Seq == 0 || !strings.HasSuffix(it.str(SortKey), pad(e.Seq)) {
			return nil, fmt.Errorf("%s: item %s has seq %d", what, it.str(SortKey), e.Seq)
		}
		if it.str("body"+suffixBlob) == "" {
			e.Body, errs[i] = s.unspill(ctx, it, "body") // inline: no request
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if e.Body, errs[i] = s.unspill(ctx, it, "body"); errs[i] != nil {
				errs[i] = fmt.Errorf("%s: event %d: %w", what, e.Seq, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return events, nil
}
