package storetest

import (
	"bytes"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/stratusflow/stratus"
)

func (su *suite) testOutput(t *testing.T) {
	t.Parallel()

	t.Run("AppendOutput_SeqFrom1PerAttempt", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		st, a1 := b.parents(t, 1)
		a2 := b.createAttempt(t, b.attempt(st.TID, 2))
		_, other := b.parents(t, 1)

		type tail struct {
			tid string
			n   int
		}
		tails := []tail{{a1.TID, a1.N}, {a2.TID, a2.N}, {other.TID, other.N}}
		want := map[tail][]stratus.OutputEvent{}
		// Interleave the appends: each tail still counts 1, 2, 3, ...
		for round := range 3 {
			for i, tl := range tails {
				e := stratus.OutputEvent{
					TID:     tl.tid,
					Attempt: tl.n,
					Kind:    stratus.OutputArtifact,
					Name:    fmt.Sprintf("part-%d.md", round),
					Body:    fmt.Appendf(nil, "round %d tail %d", round, i),
					At:      base.Add(time.Duration(round*10+i) * time.Millisecond),
				}
				if round == 2 {
					e.Kind, e.Name, e.OK = stratus.OutputFinal, "", true // one Final per attempt, each accepted
				}
				seq, err := b.s.AppendOutput(b.ctx, e)
				if err != nil {
					t.Fatalf("AppendOutput(%s/%d, round %d): %v", tl.tid, tl.n, round, err)
				}
				if seq != round+1 {
					t.Errorf("AppendOutput(%s/%d, round %d) = seq %d, want %d", tl.tid, tl.n, round, seq, round+1)
				}
				e.Seq = round + 1
				want[tl] = append(want[tl], e)
			}
		}
		for _, tl := range tails {
			got, err := b.s.ListOutput(b.ctx, tl.tid, tl.n)
			if err != nil {
				t.Fatalf("ListOutput(%s/%d): %v", tl.tid, tl.n, err)
			}
			if len(got) != len(want[tl]) {
				t.Fatalf("ListOutput(%s/%d) has %d events, want %d", tl.tid, tl.n, len(got), len(want[tl]))
			}
			for i := range got {
				checkEvent(t, got[i], want[tl][i])
			}
		}
	})

	t.Run("ListOutput_AppendOrder", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		kinds := []string{stratus.OutputArtifact, stratus.OutputSidecar, stratus.OutputArtifact, stratus.OutputFinal, stratus.OutputSidecar}
		// Names sort against append order and the times tie.
		for i, kind := range kinds {
			e := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: kind, Name: fmt.Sprintf("%c.md", 'z'-i), Body: []byte{byte(i)}, At: base}
			if _, err := b.s.AppendOutput(b.ctx, e); err != nil {
				t.Fatalf("AppendOutput %d (%s): %v", i, kind, err)
			}
		}
		got, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("ListOutput(%s/%d): %v", a.TID, a.N, err)
		}
		if len(got) != len(kinds) {
			t.Fatalf("ListOutput(%s/%d) has %d events, want %d", a.TID, a.N, len(got), len(kinds))
		}
		for i, e := range got {
			if e.Seq != i+1 || e.Kind != kinds[i] || !bytes.Equal(e.Body, []byte{byte(i)}) {
				t.Errorf("ListOutput[%d] = seq %d kind %s body %v; want seq %d kind %s body [%d]", i, e.Seq, e.Kind, e.Body, i+1, kinds[i], i)
			}
		}
	})

	t.Run("ListOutput_EmptyTail", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		got, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil || len(got) != 0 {
			t.Errorf("ListOutput(%s/%d) of a new attempt = %d events, %v; want none", a.TID, a.N, len(got), err)
		}
	})

	t.Run("ListPartNames_DistinctArtifactNamesInFirstStagedOrder", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		other := b.createAttempt(t, b.attempt(a.TID, 2))
		if got, err := b.s.ListPartNames(b.ctx, a.TID, a.N); err != nil || len(got) != 0 {
			t.Fatalf("ListPartNames(%s/%d) of a new attempt = %q, %v; want none", a.TID, a.N, got, err)
		}
		big := bytes.Repeat([]byte("b"), 64<<10) // spilled: still no body read
		for _, e := range []stratus.OutputEvent{
			{Kind: stratus.OutputArtifact, Name: "z.md", Body: []byte("1")},
			{Kind: stratus.OutputSidecar, Name: "audit.json", Body: []byte("{}")},
			{Kind: stratus.OutputArtifact, Name: "a.md", Body: big},
			{Kind: stratus.OutputArtifact, Name: "z.md", Body: []byte("2")}, // restaged: listed once, where first staged
			{Kind: stratus.OutputArtifact, Name: "Z.md", Body: []byte("3")}, // another name, byte for byte
			{Kind: stratus.OutputFinal, Body: []byte("done"), OK: true},
		} {
			e.TID, e.Attempt, e.At = a.TID, a.N, base
			if _, err := b.s.AppendOutput(b.ctx, e); err != nil {
				t.Fatalf("AppendOutput(%s %q): %v", e.Kind, e.Name, err)
			}
		}
		if _, err := b.s.AppendOutput(b.ctx, stratus.OutputEvent{TID: other.TID, Attempt: other.N, Kind: stratus.OutputArtifact, Name: "other.md", Body: []byte("o"), At: base}); err != nil {
			t.Fatalf("AppendOutput(attempt 2): %v", err)
		}
		got, err := b.s.ListPartNames(b.ctx, a.TID, a.N)
		if want := []string{"z.md", "a.md", "Z.md"}; err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ListPartNames(%s/%d) = %q, %v; want %q", a.TID, a.N, got, err, want)
		}
		if got, err := b.s.ListPartNames(b.ctx, other.TID, other.N); err != nil || fmt.Sprint(got) != "[other.md]" {
			t.Errorf("ListPartNames(%s/%d) = %q, %v; want [other.md]", other.TID, other.N, got, err)
		}
		if got, err := b.s.ListPartNames(b.ctx, a.TID, 9); err != nil || len(got) != 0 {
			t.Errorf("ListPartNames(%s/9) of an unknown attempt = %q, %v; want none", a.TID, got, err)
		}
	})

	t.Run("AppendOutput_SecondFinal_ConflictAppendsNothing", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		appendOK := func(e stratus.OutputEvent, want int) {
			t.Helper()
			if seq, err := b.s.AppendOutput(b.ctx, e); err != nil || seq != want {
				t.Fatalf("AppendOutput(%s) = %d, %v; want seq %d", e.Kind, seq, err, want)
			}
		}
		artifact := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputArtifact, Name: "plan.md", Body: []byte("plan"), At: base}
		first := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputFinal, Body: []byte("engine crashed"), OK: false, At: base}
		appendOK(artifact, 1)
		appendOK(first, 2)

		second := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputFinal, Body: []byte("done"), OK: true, At: base}
		_, err := b.s.AppendOutput(b.ctx, second)
		wantCode(t, "AppendOutput of a second Final", err, stratus.ECONFLICT)

		got, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("ListOutput(%s/%d): %v", a.TID, a.N, err)
		}
		if len(got) != 2 {
			t.Fatalf("ListOutput(%s/%d) has %d events after a rejected Final, want 2", a.TID, a.N, len(got))
		}
		first.Seq = 2
		checkEvent(t, got[1], first)

		// The rejected Final took no sequence number: a sidecar (appended
		// by another producer) still gets 3.
		appendOK(stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputSidecar, Name: "audit.json", Body: []byte("{}"), At: base}, 3)
	})

	t.Run("AppendOutput_Bodies_RoundTripByteExact", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)

		binary := make([]byte, 0, 520)
		for i := range 512 {
			binary = append(binary, byte(i))
		}
		binary = append(binary, 0xff, 0xfe, 0x00, 0xc3, 0x28, '\r', '\n', 0x00) // invalid UTF-8, NUL, CRLF
		large := make([]byte, 1<<20)
		mrand.NewChaCha8([32]byte{'s', 't', 'r', 'a', 't', 'u', 's'}).Read(large)

		bodies := []struct {
			name string
			body []byte
		}{
			{"binary", binary},
			{"nil", nil},
			{"empty", []byte{}},
			{"1MiB", large},
			{"text", []byte("## Review\n\nverdict: approve ✓\n")},
		}
		for i, c := range bodies {
			kind := stratus.OutputArtifact
			if i == len(bodies)-1 {
				kind = stratus.OutputFinal
			}
			e := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: kind, Name: c.name, Body: c.body, At: base}
			if seq, err := b.s.AppendOutput(b.ctx, e); err != nil || seq != i+1 {
				t.Fatalf("AppendOutput(%s body) = %d, %v; want seq %d", c.name, seq, err, i+1)
			}
		}
		got, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("ListOutput(%s/%d): %v", a.TID, a.N, err)
		}
		if len(got) != len(bodies) {
			t.Fatalf("ListOutput(%s/%d) has %d events, want %d", a.TID, a.N, len(got), len(bodies))
		}
		for i, c := range bodies {
			if got[i].Name != c.name {
				t.Errorf("ListOutput[%d].Name = %q, want %q", i, got[i].Name, c.name)
			}
			checkBody(t, c.name, got[i].Body, c.body)
		}
	})

	t.Run("AppendOutput_Concurrent_ContiguousSeqsOneFinal", func(t *testing.T) {
		t.Parallel()
		b := su.setup(t)
		_, a := b.parents(t, 1)
		const writers, artifacts = 8, 5
		type result struct {
			seqs     []int
			finalSeq int
			finalErr error
		}
		results := make([]result, writers)
		concurrently(writers, func(w int) {
			r := &results[w]
			for i := range artifacts + 1 {
				e := stratus.OutputEvent{TID: a.TID, Attempt: a.N, Kind: stratus.OutputArtifact,
					Name: fmt.Sprintf("w%d-%d.md", w, i), Body: fmt.Appendf(nil, "writer %d part %d", w, i), At: base}
				if i == artifacts/2 { // every writer races to post the Final mid-stream
					e.Kind, e.Name = stratus.OutputFinal, ""
				}
				seq, err := b.s.AppendOutput(b.ctx, e)
				if e.Kind == stratus.OutputFinal {
					r.finalSeq, r.finalErr = seq, err
					continue
				}
				if err != nil {
					t.Errorf("writer %d: AppendOutput(artifact %d): %v", w, i, err)
					continue
				}
				r.seqs = append(r.seqs, seq)
			}
		})

		seen := map[int]string{}
		finals := 0
		note := func(seq int, who string) {
			if prev, dup := seen[seq]; dup {
				t.Errorf("seq %d returned to both %s and %s", seq, prev, who)
			}
			seen[seq] = who
		}
		for w, r := range results {
			for i, seq := range r.seqs {
				note(seq, fmt.Sprintf("writer %d artifact %d", w, i))
			}
			if r.finalErr == nil {
				finals++
				note(r.finalSeq, fmt.Sprintf("writer %d final", w))
			} else {
				wantCode(t, fmt.Sprintf("writer %d: losing Final", w), r.finalErr, stratus.ECONFLICT)
			}
		}
		if finals != 1 {
			t.Errorf("%d of %d concurrent Finals accepted, want exactly 1", finals, writers)
		}
		n := len(seen)
		for seq := 1; seq <= n; seq++ {
			if _, ok := seen[seq]; !ok {
				t.Errorf("seq %d missing: %d appends did not get 1..%d", seq, n, n)
			}
		}

		got, err := b.s.ListOutput(b.ctx, a.TID, a.N)
		if err != nil {
			t.Fatalf("ListOutput(%s/%d): %v", a.TID, a.N, err)
		}
		if len(got) != n {
			t.Fatalf("ListOutput(%s/%d) has %d events, want %d", a.TID, a.N, len(got), n)
		}
		listedFinals := 0
		for i, e := range got {
			if e.Seq != i+1 {
				t.Errorf("ListOutput[%d].Seq = %d, want %d", i, e.Seq, i+1)
			}
			if e.Kind == stratus.OutputFinal {
				listedFinals++
			}
		}
		if listedFinals != 1 {
			t.Errorf("the tail holds %d Finals, want 1", listedFinals)
		}
	})
}
