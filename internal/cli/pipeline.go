package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// pipeline is what watch, record and replay share: each event is counted,
// recorded, shown and correlated; each finished flow is explained and
// shown. Unless events are shown as they come (their lines and the flows'
// blocks must keep their order), flows are explained on one goroutine and
// shown on another, in order, so that correlation keeps a core to itself.
type pipeline struct {
	w          output.Writer // nil: nothing on stdout (record)
	jw         *output.JSON
	names      output.Names
	corr       *flow.Correlator
	rec        *trace.Writer
	showEvents bool
	limit      uint64
	counts     map[event.Point]uint64
	total      uint64
	findings   map[string]uint64
	err        error
	// ended carries finished flows to the goroutine that explains them,
	// explained on to the one that shows them, which closes shown when it
	// is done; nil when flows are explained and shown in place.
	ended     chan *flow.Flow
	explained chan explainedFlow
	shown     chan struct{}
	// rooms are arrays for decoded events not in use by a flow in flight.
	rooms chan []event.Event
	// showErr is the first error of showing flows on their goroutine.
	showErr error
}

// explainedFlow is a finished flow on its way to be shown.
type explainedFlow struct {
	f    *flow.Flow
	fd   *explain.Finding
	room []event.Event // holds the flow's decoded events
}

type pipelineOptions struct {
	format     string // text, json or none
	events     bool
	limit      uint64
	flowIdle   time.Duration
	maxFlows   int
	maxPackets int
	names      output.Names
	recorder   *trace.Writer
	stdout     io.Writer // where flows and events go; os.Stdout if nil
}

// endedBacklog bounds the flows waiting to be explained, and again to be
// shown: past it correlation waits, so that memory stays bounded when
// output is slow.
const endedBacklog = 256

func newPipeline(o pipelineOptions) *pipeline {
	p := &pipeline{names: o.names, rec: o.recorder, showEvents: o.events, limit: o.limit,
		counts: map[event.Point]uint64{}, findings: map[string]uint64{}}
	out := o.stdout
	if out == nil {
		out = os.Stdout
	}
	switch o.format {
	case "json":
		p.jw = output.NewJSON(out, o.names)
		p.w, p.showEvents = p.jw, true
	case "text":
		tw := output.NewText(out, o.names)
		tw.Colour = out == os.Stdout && isTerminal(os.Stdout)
		p.w = tw
	}
	deferred := !p.showEvents
	p.corr = flow.New(flow.Config{Idle: o.flowIdle, MaxFlows: o.maxFlows, MaxPackets: o.maxPackets, Deferred: deferred})
	if deferred {
		p.ended, p.explained = make(chan *flow.Flow, endedBacklog), make(chan explainedFlow, endedBacklog)
		p.shown, p.rooms = make(chan struct{}), make(chan []event.Event, 2*endedBacklog+2)
		go p.explainEnded()
		go p.showExplained()
	}
	return p
}

func (p *pipeline) fail(err error) {
	if err != nil && p.err == nil {
		p.err = err
	}
}

// full says whether the event limit is reached.
func (p *pipeline) full() bool { return p.limit > 0 && p.total >= p.limit }

func (p *pipeline) event(e *event.Event) {
	if p.full() {
		return
	}
	p.counts[e.Point]++
	p.total++
	if p.rec != nil {
		p.fail(p.rec.Event(e))
	}
	if p.w != nil && p.showEvents {
		p.fail(p.w.Event(e))
	}
	p.corr.Add(e, p.flowDone)
}

// flowDone takes a finished flow from the correlator.
func (p *pipeline) flowDone(f *flow.Flow) {
	if p.ended != nil {
		p.ended <- f
		return
	}
	p.fail(p.show(f, p.explain(f)))
}

// explainEnded decodes and explains the flows the correlator hands over.
func (p *pipeline) explainEnded() {
	defer close(p.explained)
	for f := range p.ended {
		var room []event.Event
		select {
		case room = <-p.rooms:
		default:
		}
		room = f.Decode(room)
		p.explained <- explainedFlow{f: f, fd: p.explain(f), room: room}
	}
}

// showExplained shows the explained flows in the order they ended and
// gives their memory back.
func (p *pipeline) showExplained() {
	defer close(p.shown)
	for x := range p.explained {
		if err := p.show(x.f, x.fd); err != nil && p.showErr == nil {
			p.showErr = err
		}
		p.corr.Release(x.f)
		select {
		case p.rooms <- x.room:
		default:
		}
	}
}

// explain explains a finished flow and counts its finding.
func (p *pipeline) explain(f *flow.Flow) *explain.Finding {
	if len(f.Packets) == 0 {
		return nil
	}
	fd := explain.Explain(f, p.names)
	if fd != nil {
		p.findings[fd.Rule]++
	}
	return fd
}

// show writes a finished flow. A flow of socket events alone (no packet
// seen) has nothing to show.
func (p *pipeline) show(f *flow.Flow, fd *explain.Finding) error {
	if len(f.Packets) == 0 || p.w == nil {
		return nil
	}
	return p.w.Flow(f, fd)
}

// tick ends the flows idle at kernel time now and pushes the recording
// to disk.
func (p *pipeline) tick(now uint64) {
	p.corr.Expire(now, p.flowDone)
	if p.rec != nil {
		p.fail(p.rec.Flush())
	}
}

// finish ends every flow and writes the summary: on stderr, and as the
// last JSON object.
func (p *pipeline) finish(lost map[event.Point]uint64, d time.Duration) output.Summary {
	p.corr.Flush(p.flowDone)
	if p.ended != nil {
		close(p.ended)
		<-p.shown
		p.fail(p.showErr)
	}
	sum := output.Summary{Events: p.counts, Lost: lost, Duration: d, Flows: p.corr.Stats(), Findings: p.findings}
	output.WriteSummary(os.Stderr, sum)
	if p.jw != nil {
		p.fail(p.jw.Raw(summaryJSON(sum)))
	}
	if p.err != nil {
		p.err = fmt.Errorf("write output: %w", p.err)
	}
	return sum
}

type jsonSummary struct {
	Type         string            `json:"type"`
	DurationMS   int64             `json:"duration_ms"`
	Events       map[string]uint64 `json:"events"`
	Lost         map[string]uint64 `json:"lost"`
	Flows        uint64            `json:"flows"`
	FlowsEvicted uint64            `json:"flows_evicted"`
	// Contradictions counts events that named a known flow but belonged
	// to another connection (flow.Stats.Contradictions).
	Contradictions uint64 `json:"contradictions"`
	// Unheld counts route lookups not kept because one packet had too
	// many (flow.Stats.Unheld).
	Unheld   uint64            `json:"route_lookups_not_kept,omitempty"`
	Findings map[string]uint64 `json:"findings"`
}

func summaryJSON(s output.Summary) jsonSummary {
	return jsonSummary{Type: "summary", DurationMS: s.Duration.Milliseconds(), Events: pointNames(s.Events),
		Lost: pointNames(s.Lost), Flows: s.Flows.Flows, FlowsEvicted: s.Flows.Evicted,
		Contradictions: s.Flows.Contradictions, Unheld: s.Flows.Unheld, Findings: s.Findings}
}

func pointNames(m map[event.Point]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range event.Points {
		out[p.String()] = m[p]
	}
	return out
}
