package cli

import (
	"fmt"
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
// blocks must keep their order), flows are explained and shown on a
// goroutine of their own, so that correlation keeps a core to itself.
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
	// ended carries finished flows to the goroutine that explains and
	// shows them, which closes shown when it is done; nil when flows are
	// shown in place.
	ended chan *flow.Flow
	shown chan struct{}
	// showErr is the first error of showing flows on that goroutine.
	showErr error
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
}

// endedBacklog bounds the flows waiting to be shown: past it correlation
// waits, so that memory stays bounded when output is slow.
const endedBacklog = 256

func newPipeline(o pipelineOptions) *pipeline {
	p := &pipeline{names: o.names, rec: o.recorder, showEvents: o.events, limit: o.limit,
		counts: map[event.Point]uint64{}, findings: map[string]uint64{}}
	switch o.format {
	case "json":
		p.jw = output.NewJSON(os.Stdout, o.names)
		p.w, p.showEvents = p.jw, true
	case "text":
		tw := output.NewText(os.Stdout, o.names)
		tw.Colour = isTerminal(os.Stdout)
		p.w = tw
	}
	deferred := !p.showEvents
	p.corr = flow.New(flow.Config{Idle: o.flowIdle, MaxFlows: o.maxFlows, MaxPackets: o.maxPackets, Deferred: deferred})
	if deferred {
		p.ended, p.shown = make(chan *flow.Flow, endedBacklog), make(chan struct{})
		go p.showEnded()
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
	p.fail(p.show(f))
}

// showEnded explains and shows the flows the correlator hands over, and
// gives their memory back.
func (p *pipeline) showEnded() {
	defer close(p.shown)
	var room []event.Event
	for f := range p.ended {
		room = f.Decode(room)
		if err := p.show(f); err != nil && p.showErr == nil {
			p.showErr = err
		}
		p.corr.Release(f)
	}
}

// show explains a finished flow and shows it. A flow of socket events
// alone (no packet seen) has nothing to show.
func (p *pipeline) show(f *flow.Flow) error {
	if len(f.Packets) == 0 {
		return nil
	}
	fd := explain.Explain(f, p.names)
	if fd != nil {
		p.findings[fd.Rule]++
	}
	if p.w != nil {
		return p.w.Flow(f, fd)
	}
	return nil
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
