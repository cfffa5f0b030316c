package cli

import (
	"bytes"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// incidentStream is the five incidents and their healthy twins repeated
// as distinct connections 50 ms apart: flows end while later ones are
// still being correlated.
func incidentStream(conns int) []event.Event {
	var seqs [][]event.Event
	for _, healthy := range []bool{false, true} {
		seqs = append(seqs, fixture.SNATMissing(healthy), fixture.SYNOverflow(healthy), fixture.StaleHostPort(healthy), fixture.Hairpin(healthy))
	}
	var out []event.Event
	for c := 0; c < conns; c++ {
		for _, seq := range seqs {
			for _, e := range seq {
				fixture.Repeat(&e, c, 50_000_000)
				out = append(out, e)
			}
		}
	}
	return out
}

// TestPipelineShowsFlowsAsInPlace: flows explained and shown on goroutines
// of their own come out in the order the correlator ended them, as
// explaining and showing each in place would write them. Run with -race,
// it also checks the hand-over between the goroutines.
func TestPipelineShowsFlowsAsInPlace(t *testing.T) {
	events := incidentStream(200)
	names := output.Names{DropReason: fixture.Names{}.ReasonName, Symbol: fixture.Names{}.SymbolName, Netns: fixture.Names{}.NetnsName}
	const tickEvery = 64

	var want bytes.Buffer
	text := output.NewText(&want, names)
	c := flow.New(flow.DefaultConfig)
	wantFindings := map[string]uint64{}
	show := func(f *flow.Flow) {
		if len(f.Packets) == 0 {
			return
		}
		fd := explain.Explain(f, names)
		if fd != nil {
			wantFindings[fd.Rule]++
		}
		if err := text.Flow(f, fd); err != nil {
			t.Fatal(err)
		}
	}
	for i := range events {
		c.Add(&events[i], show)
		if i%tickEvery == 0 {
			c.Expire(events[i].Time, show)
		}
	}
	endedBeforeFlush := c.Stats().Flows
	c.Flush(show)

	var got bytes.Buffer
	p := newPipeline(pipelineOptions{format: "text", names: names, stdout: &got})
	if p.ended == nil {
		t.Fatal("text flows without events are not shown on their own goroutines")
	}
	for i := range events {
		p.event(&events[i])
		if i%tickEvery == 0 {
			p.tick(events[i].Time)
		}
	}
	sum := p.finish(nil, 0)
	if p.err != nil {
		t.Fatal(p.err)
	}
	if endedBeforeFlush < 500 {
		t.Fatalf("only %d flows ended before the end of the run: the test shows little", endedBeforeFlush)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("pipeline wrote %d bytes, in place %d; first difference at byte %d", got.Len(), want.Len(), firstDiff(got.Bytes(), want.Bytes()))
	}
	for rule, n := range wantFindings {
		if sum.Findings[rule] != n {
			t.Errorf("%s: %d findings counted, %d found in place", rule, sum.Findings[rule], n)
		}
	}
	if len(sum.Findings) != len(wantFindings) {
		t.Errorf("findings %v, in place %v", sum.Findings, wantFindings)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
