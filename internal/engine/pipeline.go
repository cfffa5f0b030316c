package engine

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// Pipeline is what watch, record and replay share: each event is counted,
// recorded, shown and correlated; each finished flow is explained and
// shown. Unless events are shown as they come (their lines and the flows'
// blocks must keep their order), flows are explained and rendered on
// goroutines of their own, one per core, and written in the order they
// ended by another: correlation keeps a core to itself, and a recording
// whose flows all end at once (at its end) is explained on every core.
type Pipeline struct {
	// gate is what the kernel gate did, for the summary (nil: off).
	gate    *event.GateCounts
	out     *sink
	sources explain.Sources
	corr    *flow.Correlator
	// detail is what the reports carry beyond the finding and their
	// packets: the steps' words for the flows shown whole, and their NAT
	// rules only for JSON, which shows them.
	detail         explain.Detail
	rec            *trace.Recorder
	flight         *FlightRecorder
	found          func(Found)
	flightKept     []string // the flight recorder's files, at the end
	showEvents     bool
	limit          uint64
	counts         [256]uint64 // per point: a map's increment cost a share of every event's time
	total          uint64
	records        uint64            // kernel records read (KernelRecord)
	findingsByRule map[string]uint64 // the writing goroutine's
	err            error
	rules          ruleFeed
	// rendering, unless events are shown as they come (their lines and the
	// flows' blocks must keep their order), explains and renders flows on
	// goroutines of their own; nil: in place.
	rendering *renderStage
	// findingCount counts the findings so far, for the status line.
	findingCount atomic.Uint64
	// now is the newest kernel time the pipeline saw.
	now uint64
	// losses, when the run counts them, hold ended flows back until they
	// are known whole or not.
	losses    *lossWait
	clocks    []trace.ClockSkew
	about     output.About
	summarize func(output.Summary)
}

// ruleFeed is what comes to the pipeline of the namespaces' rulesets and
// of the rules the kernel traced (Options says what each is).
type ruleFeed struct {
	history *ruleset.History
	changes <-chan ruleset.Snapshot
	traces  <-chan ruleset.Trace
	changed func(netns uint32)
	read    func() uint64
}

// Options say what a pipeline does with the events it is given.
type Options struct {
	Format     string // text, json, html or none
	Timelines  output.Timelines
	Events     bool // text: also show every event as it comes
	Limit      uint64
	FlowIdle   time.Duration
	MaxFlows   int
	MaxPackets int
	// Names name kernel numbers for the renderers; Sources are what the
	// rules know (the pipeline adds its correlator's SNAT index).
	Names    output.Names
	Sources  explain.Sources
	Recorder *trace.Recorder
	Flight   *FlightRecorder
	// Stdout is where flows and events go (os.Stdout if nil), and Colour
	// whether text is coloured there.
	Stdout io.Writer
	Colour bool
	// Rulesets receives the namespaces' rulesets (AddRuleset), which the
	// sources then give to the findings; nil when none are read.
	Rulesets    *ruleset.History
	RuleChanges <-chan ruleset.Snapshot
	// RuleTraces are the trace steps to record; RulesChanged is told of
	// each namespace whose ruleset changed (rule positions move).
	RuleTraces   <-chan ruleset.Trace
	RulesChanged func(netns uint32)
	// RuleTracesRead, when rules are traced, is how far their trace steps
	// are read (kernel time): a flow's rules are named once its packets'
	// steps are in.
	RuleTracesRead func() uint64
	// Losses, when the run counts its losses, mark incomplete flows.
	Losses *flow.Losses
	// CrossHost joins a connection's flows on several hosts into one
	// (flow.Config.CrossHost): a replay of several recordings, whose
	// clocks were placed as Clocks say (the summary says it again).
	CrossHost bool
	Clocks    []trace.ClockSkew
	// About is what an HTML page says of the recordings or the run.
	About output.About
	// Summarize is given the run's summary at its end, to say it in the
	// diagnostics' format; nil writes it to stderr as text.
	Summarize func(output.Summary)
	// Found is told of each finding, on the goroutine that writes flows.
	Found func(Found)
}

// New starts a pipeline: with deferred flows (events not shown as they
// come), its explaining and writing goroutines, which Finish ends.
func New(o Options) *Pipeline {
	p := &Pipeline{sources: o.Sources, rec: o.Recorder, flight: o.Flight, showEvents: o.Events, limit: o.Limit,
		findingsByRule: map[string]uint64{}, clocks: o.Clocks, about: o.About, summarize: o.Summarize, found: o.Found,
		rules: ruleFeed{history: o.Rulesets, changes: o.RuleChanges, traces: o.RuleTraces, changed: o.RulesChanged, read: o.RuleTracesRead}}
	if o.Losses != nil {
		p.losses = &lossWait{losses: o.Losses}
	}
	if p.sources.Names == nil {
		// The rules name kernel numbers as the renderers do.
		p.sources.Names = o.Names
	}
	if p.summarize == nil {
		p.summarize = func(s output.Summary) { output.WriteSummary(os.Stderr, s) }
	}
	var renderer func() flowRenderer
	p.out, renderer = newSink(o)
	p.detail = o.Timelines.Detail()
	if p.out.jsonOut || p.out.page != nil {
		p.detail.NATRules = p.detail.Steps
	}
	deferred := !p.showEvents
	p.corr = flow.New(flow.Config{Idle: o.FlowIdle, MaxFlows: o.MaxFlows, MaxPackets: o.MaxPackets, Deferred: deferred,
		CrossHost: o.CrossHost})
	p.sources.SNATs = p.corr.SNATs()
	if deferred {
		p.rendering = startRenderStage(renderer, p.explain, p.corr, p.writeFlow)
	}
	return p
}

func (p *Pipeline) fail(err error) {
	if err != nil && p.err == nil {
		p.err = err
	}
}

// Full says whether the event limit is reached.
func (p *Pipeline) Full() bool { return p.limit > 0 && p.total >= p.limit }

// Event counts, records, shows and correlates one event.
func (p *Pipeline) Event(e *event.Event) {
	if p.Full() {
		return
	}
	p.counts[e.Point]++
	p.total++
	p.now = max(p.now, e.Time)
	if p.rec != nil {
		p.rec.Event(e)
	}
	if p.flight != nil {
		p.flight.event(e)
	}
	if p.out.w != nil && p.showEvents {
		p.fail(p.out.w.Event(e))
	}
	p.corr.Add(e, p.flowDone)
}

// KernelRecord counts a kernel record read, whose events follow.
func (p *Pipeline) KernelRecord() { p.records++ }

// flowDone takes a finished flow from the correlator. While a loss that
// could have touched it may still be uncounted, it waits (in order, behind
// any flow already waiting).
func (p *Pipeline) flowDone(f *flow.Flow) {
	// Explained in place (not deferred), a flow's memory is the
	// correlator's again after the call.
	if p.losses != nil && p.losses.hold(f, p.rendering == nil) {
		return
	}
	p.deliver(f)
}

// LossesCounted takes a count of the kernel's losses: the window's, and
// that every loss before through is counted. A flow is explained once its
// losses are counted and, when rules are traced, its packets' trace steps
// read: through is held back to where the steps are read (for at most
// ruleset.TraceWindow, past which a step is no packet's), and the steps
// read are recorded ahead of the count, so that replay, which releases
// flows by the recorded counts, finds the same steps. The recording keeps
// the count when records were lost, and at least once a second otherwise.
func (p *Pipeline) LossesCounted(win event.LossWindow, through uint64) {
	if p.rules.read != nil {
		// Read before the steps are recorded: every step it covers is
		// then in the recording ahead of this count.
		read := p.rules.read()
		through = min(through, max(read, win.To-min(win.To, ruleset.TraceWindow)))
	}
	if p.rec != nil {
		p.recordRuleTraces()
	}
	p.losses.losses.Add(win, through)
	if p.rec != nil && p.losses.recordDue(win.N > 0) {
		p.rec.Losses(win, through)
	}
	p.losses.release(p.deliver)
}

// deliver has a finished flow explained and shown, marked incomplete if
// records were lost around it.
func (p *Pipeline) deliver(f *flow.Flow) {
	if p.losses != nil {
		p.losses.mark(f)
	}
	if p.rendering != nil {
		p.rendering.hand(f, p.now)
		return
	}
	p.fail(p.show(f, p.explain(f)))
}

// writeFlow counts a rendered flow's finding and writes its text, on the
// render stage's writing goroutine.
func (p *Pipeline) writeFlow(y renderedFlow) {
	p.countFinding(flightFinding{rule: y.rule, finding: y.finding, flow: y.id, start: y.start, end: y.end})
	p.out.writeFlow(y)
}

// BriefLinesPerSecond is about as many lines a second as a reader can
// follow.
const BriefLinesPerSecond = 20

// briefLines bounds the one-line healthy flows written a second: past
// BriefLinesPerSecond they are counted, and the count is written when
// the second is over (or before a finding, or at the end).
type briefLines struct {
	second  time.Time
	written int
	unshown uint64
}

// held returns the line counting the flows not shown, when it is due:
// the second it counts is over, or a finding or the end comes next
// (flush).
func (l *briefLines) held(now time.Time, flush bool) []byte {
	if now.Sub(l.second) >= time.Second {
		l.second, l.written = now, 0
	} else if !flush {
		return nil
	}
	if l.unshown == 0 {
		return nil
	}
	line := fmt.Appendf(nil, "... and %d more flows without a finding (--timelines all shows each)\n", l.unshown)
	l.unshown = 0
	return line
}

// allow says whether a healthy flow's line is written, counting it if not.
func (l *briefLines) allow() bool {
	if l.written < BriefLinesPerSecond {
		l.written++
		return true
	}
	l.unshown++
	return false
}

// explain reports on a finished flow: nil for a flow of socket events
// alone (no packet seen), which has nothing to explain or show.
func (p *Pipeline) explain(f *flow.Flow) *explain.Report {
	if len(f.Packets) == 0 {
		return nil
	}
	return explain.NewReport(f, p.sources, p.detail)
}

// countFinding counts a finished flow's finding, if it has one ("" rule),
// and tells the flight recorder: the one place findings are counted,
// whether flows are shown in place (show) or on their goroutines
// (writeFlow).
func (p *Pipeline) countFinding(x flightFinding) {
	if x.rule == "" {
		return
	}
	p.findingsByRule[x.rule]++
	p.findingCount.Add(1)
	if p.flight != nil {
		p.flight.finding(x)
	}
	if p.found != nil {
		p.found(Found{Finding: x.finding, Flow: x.flow, Start: x.start})
	}
}

// Found is a finding as it is told beyond the run's output (Options.Found):
// to the log and the metrics, where a cluster looks.
type Found struct {
	Finding *explain.Finding
	Flow    uint64
	Start   uint64 // its flow's first event, kernel time
}

// show counts a finished flow's finding and writes the flow.
func (p *Pipeline) show(f *flow.Flow, r *explain.Report) error {
	p.countFinding(flightFinding{rule: r.Rule(), finding: r.Found(), flow: f.ID, start: f.Start, end: f.End})
	if r == nil || p.out.w == nil {
		return nil
	}
	return p.out.w.Flow(f, r)
}

// AddRuleset keeps a namespace's ruleset for the findings, and in the
// recording.
func (p *Pipeline) AddRuleset(s ruleset.Snapshot) {
	if p.rules.history == nil {
		return
	}
	p.rules.history.Add(s)
	if p.flight != nil {
		p.flight.ruleset(s)
	}
	if p.rules.changed != nil {
		p.rules.changed(s.Netns)
	}
	if p.rec != nil {
		p.fail(p.rec.Ruleset(s))
	}
}

// recordRuleTraces writes the trace steps read since the last tick.
func (p *Pipeline) recordRuleTraces() {
	for {
		select {
		case t := <-p.rules.traces:
			p.rec.RuleTrace(&t)
		default:
			return
		}
	}
}

// Tick takes the rulesets that changed, ends the flows idle at kernel time
// now and pushes the recording to disk.
func (p *Pipeline) Tick(now uint64) {
	if p.rec != nil {
		// Where flows end depends on where the ticks fall among events
		// that come out of order: replay ends them at the same places.
		p.rec.Tick(now)
	}
	p.now = max(p.now, now)
	for more := true; more; {
		select {
		case s := <-p.rules.changes:
			p.AddRuleset(s)
		default:
			more = false
		}
	}
	if p.rec != nil {
		p.recordRuleTraces()
	}
	p.corr.Expire(now, p.flowDone)
	if p.losses != nil {
		p.losses.release(p.deliver)
	}
	p.fail(p.out.flush())
	if p.rec != nil {
		p.rec.Flush()
	}
	if p.flight != nil {
		p.flight.tick(p.findingsThrough(now), false)
	}
}

// findingsThrough is the kernel time through which the flight recorder
// knows every finding of the flows ended by now: now itself unless flows
// are still being explained on their goroutines, else just before the
// time the last flow written was handed out at (flows handed out at that
// same time may still be on their way).
func (p *Pipeline) findingsThrough(now uint64) uint64 {
	if p.rendering == nil {
		return now
	}
	return p.rendering.findingsThrough(now)
}

// Finish ends every flow and writes the summary: on stderr, and as the
// last JSON object.
func (p *Pipeline) Finish(lost, shed map[event.Point]uint64, d time.Duration) output.Summary {
	if p.rec != nil {
		p.recordRuleTraces()
	}
	if p.losses != nil {
		// Every loss is counted by now (the caller's last count).
		p.losses.losses.Complete()
		p.losses.release(p.deliver)
	}
	p.corr.Flush(p.flowDone)
	if p.rendering != nil {
		p.rendering.close()
		if p.out.brief != nil {
			p.out.write(p.out.brief.held(time.Now(), true))
		}
		p.fail(p.out.writeErr)
	}
	if p.flight != nil {
		p.flightKept = p.flight.close()
	}
	sum := output.Summary{Events: p.Counts(), Records: p.records, Lost: lost, Shed: shed, Duration: d, Flows: p.corr.Stats(), Findings: p.findingsByRule, Incomplete: p.Incomplete(),
		Clocks: p.clocks, Gate: p.gate}
	p.summarize(sum)
	switch {
	case p.out.jw != nil:
		p.fail(p.out.jw.Raw(summaryJSON(sum)))
		p.fail(p.out.jw.Close())
	case p.out.jsonOut:
		p.out.write(append(SummaryJSON(sum), '\n'))
		p.fail(p.out.writeErr)
	case p.out.page != nil:
		p.fail(p.out.page.Write(p.out.out, sum, p.about, time.Now()))
	}
	p.fail(p.out.flush())
	if p.err != nil {
		p.err = fmt.Errorf("write output: %w", p.err)
	}
	return sum
}

// Incomplete counts the flows records were lost around so far; safe from
// any goroutine.
func (p *Pipeline) Incomplete() uint64 {
	if p.losses == nil {
		return 0
	}
	return p.losses.incomplete.Load()
}

// GateCounted gives the summary the kernel gate's final counts.
func (p *Pipeline) GateCounted(g event.GateCounts) { p.gate = &g }

// Err is the first error writing the output or the recording.
func (p *Pipeline) Err() error { return p.err }

// Counts are the events taken so far, per point that had any.
func (p *Pipeline) Counts() map[event.Point]uint64 {
	counts := map[event.Point]uint64{}
	for point, n := range p.counts {
		if n > 0 {
			counts[event.Point(point)] = n
		}
	}
	return counts
}

// FlightKept are the flight recorder's files, once finished.
func (p *Pipeline) FlightKept() []string { return p.flightKept }

// Progress is what a status line shows of a running pipeline.
type Progress struct {
	Events   uint64 // taken so far
	Open     int    // flows open
	Findings uint64 // so far
}

// Progress says how far the pipeline is, asked on the goroutine that gives
// it events.
func (p *Pipeline) Progress() Progress {
	return Progress{Events: p.total, Open: p.corr.Stats().Active, Findings: p.findingCount.Load()}
}
