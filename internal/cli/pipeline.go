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
// shown.
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

func newPipeline(o pipelineOptions) *pipeline {
	p := &pipeline{names: o.names, corr: flow.New(flow.Config{Idle: o.flowIdle, MaxFlows: o.maxFlows, MaxPackets: o.maxPackets}), rec: o.recorder,
		showEvents: o.events, limit: o.limit, counts: map[event.Point]uint64{}, findings: map[string]uint64{}}
	switch o.format {
	case "json":
		p.jw = output.NewJSON(os.Stdout, o.names)
		p.w, p.showEvents = p.jw, true
	case "text":
		tw := output.NewText(os.Stdout, o.names)
		tw.Colour = isTerminal(os.Stdout)
		p.w = tw
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

// flowDone explains a finished flow and shows it. A flow of socket events
// alone (no packet seen) has nothing to show.
func (p *pipeline) flowDone(f *flow.Flow) {
	if len(f.Packets) == 0 {
		return
	}
	fd := explain.Explain(f, p.names)
	if fd != nil {
		p.findings[fd.Rule]++
	}
	if p.w != nil {
		p.fail(p.w.Flow(f, fd))
	}
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
