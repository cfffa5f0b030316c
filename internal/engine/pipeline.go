package engine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
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
	w       output.Writer // nil: nothing on stdout (record)
	jw      *jsonLines
	names   output.Names
	sources explain.Sources
	corr    *flow.Correlator
	// detail is what the reports carry beyond the finding and their
	// packets: the steps' words for the flows shown whole, and their NAT
	// rules only for JSON, which shows them.
	detail         explain.Detail
	rec            *trace.Recorder
	flight         *FlightRecorder
	flightKept     []string // the flight recorder's files, at the end
	showEvents     bool
	jsonOut        bool // -o json
	limit          uint64
	counts         [256]uint64 // per point: a map's increment cost a share of every event's time
	total          uint64
	records        uint64            // kernel records read (KernelRecord)
	findingsByRule map[string]uint64 // the writing goroutine's
	err            error
	// rulesets are the namespaces' rulesets the findings name rules from;
	// ruleChanges brings new ones while watching.
	rulesets     *ruleset.History
	ruleChanges  <-chan ruleset.Snapshot
	ruleTraces   <-chan ruleset.Trace
	rulesChanged func(netns uint32)
	tracesRead   func() uint64

	// ended carries finished flows, numbered, to the goroutines that
	// explain and render them; rendered carries them on to the one that
	// writes them, which closes shown when it is done. nil when flows are
	// explained and shown in place.
	ended    chan endedFlow
	rendered chan renderedFlow
	shown    chan struct{}
	endedN   uint64
	out      io.Writer
	// rooms (for decoded events) and texts (for rendered flows) are the
	// buffers not in use by a flow in flight.
	rooms pool[[]event.Event]
	texts pool[[]byte]
	// showErr is the first error of writing flows on their goroutine.
	showErr error
	// brief, when healthy flows are shown as one line, bounds how many
	// such lines are written a second.
	brief *briefLines
	// findingCount counts the findings so far, for the status line.
	findingCount atomic.Uint64
	// now is the newest kernel time the pipeline saw. The flight recorder
	// may not settle a window past the time the flows it has been told of
	// were handed out at (lastWrittenAt, of flowsWritten of them, on the
	// writing goroutine): a finding still being explained may widen it.
	now           uint64
	flowsWritten  atomic.Uint64
	lastWrittenAt atomic.Uint64
	// losses, when the run counts them, say which flows may lack records:
	// an ended flow waits in unsure until every loss that could have
	// touched it is counted. incomplete counts the flows that lacked some.
	losses     *flow.Losses
	unsure     []*flow.Flow
	incomplete uint64
	// lossesRecorded is when a loss record last went to the recording.
	lossesRecorded time.Time
	// buffered holds what is written as events come, until flushOut.
	buffered  *bufio.Writer
	clocks    []trace.ClockSkew
	summarize func(output.Summary)
}

// outBuffer is how much output is held between flushes: about a tick's
// worth of events on a busy node.
const outBuffer = 256 << 10

// flushOut hands the output held so far to stdout.
func (p *Pipeline) flushOut() {
	if p.buffered != nil {
		p.fail(p.buffered.Flush())
	}
	if p.jw != nil {
		p.jw.Flush()
	}
}

// endedFlow is a finished flow on its way to be explained: the n-th to end.
type endedFlow struct {
	n, at uint64 // at: the pipeline's kernel time when it ended
	f     *flow.Flow
}

// renderedFlow is what is left to do of the n-th flow to end: count its
// finding and write its text.
type renderedFlow struct {
	n, at uint64
	rule  string // of its finding; "" for none
	text  []byte // nil when not shown
	// what the flight recorder needs of a flow with a finding
	id, start, end uint64
}

// pool is a bounded free list goroutines share: what does not fit is let
// go.
type pool[T any] chan T

func (p pool[T]) get() (v T) {
	select {
	case v = <-p:
	default:
	}
	return v
}

func (p pool[T]) put(v T) {
	select {
	case p <- v:
	default:
	}
}

// Options say what a pipeline does with the events it is given.
type Options struct {
	Format     string // text, json or none
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
	// Summarize is given the run's summary at its end, to say it in the
	// diagnostics' format; nil writes it to stderr as text.
	Summarize func(output.Summary)
}

// endedBacklog bounds the flows waiting to be explained, and again to be
// shown: past it correlation waits, so that memory stays bounded when
// output is slow.
const endedBacklog = 256

// maxKeptText bounds the rendered flows kept for reuse: one huge flow
// must not hold its buffer for the rest of the run.
const maxKeptText = 64 << 10

// New starts a pipeline: with deferred flows (events not shown as they
// come), its explaining and writing goroutines, which Finish ends.
func New(o Options) *Pipeline {
	p := &Pipeline{names: o.Names, sources: o.Sources, rec: o.Recorder, flight: o.Flight, showEvents: o.Events, limit: o.Limit,
		findingsByRule: map[string]uint64{}, out: o.Stdout, rulesets: o.Rulesets, ruleChanges: o.RuleChanges,
		ruleTraces: o.RuleTraces, rulesChanged: o.RulesChanged, tracesRead: o.RuleTracesRead, losses: o.Losses, clocks: o.Clocks, summarize: o.Summarize}
	if p.sources.Names == nil {
		// The rules name kernel numbers as the renderers do.
		p.sources.Names = o.Names
	}
	if p.summarize == nil {
		p.summarize = func(s output.Summary) { output.WriteSummary(os.Stderr, s) }
	}
	if p.out == nil {
		p.out = os.Stdout
	}
	out := p.out
	if o.Events && o.Format == "text" {
		// Events are written as they come, one to a few hundred bytes each:
		// a write each would make the reader wait on stdout's reader. They
		// reach it within a tick (flushOut).
		p.buffered = bufio.NewWriterSize(p.out, outBuffer)
		out = p.buffered
	}
	// renderer gives each goroutine that renders flows its own.
	var renderer func() flowRenderer
	p.detail = o.Timelines.Detail()
	switch o.Format {
	case "json":
		p.jsonOut = true
		p.detail.NATRules = p.detail.Steps
		if o.Events {
			// Event lines are converted and encoded on goroutines of
			// their own (jsonLines); flows take their place among them.
			p.jw = newJSONLines(out, o.Names, o.Timelines)
			p.w = p.jw
			break
		}
		flows := output.JSONFlows{Names: o.Names, Timelines: o.Timelines}
		renderer = func() flowRenderer { return flows }
	case "text":
		text := output.NewText(out, o.Names)
		text.Colour = o.Colour
		text.Timelines = o.Timelines
		if o.Timelines == output.TimelinesBrief {
			p.brief = &briefLines{}
		}
		p.w = text
		renderer = func() flowRenderer { return text.Copy() }
	}
	deferred := !p.showEvents
	p.corr = flow.New(flow.Config{Idle: o.FlowIdle, MaxFlows: o.MaxFlows, MaxPackets: o.MaxPackets, Deferred: deferred,
		CrossHost: o.CrossHost})
	p.sources.SNATs = p.corr.SNATs()
	if deferred {
		p.startRendering(renderer)
	}
	return p
}

// startRendering starts the goroutines that explain and render (with a
// renderer each, unless nil) the flows as they end, and the one that
// writes them in order.
func (p *Pipeline) startRendering(renderer func() flowRenderer) {
	workers := runtime.GOMAXPROCS(0)
	p.ended, p.rendered = make(chan endedFlow, endedBacklog), make(chan renderedFlow, endedBacklog)
	p.shown = make(chan struct{})
	p.rooms, p.texts = make(pool[[]event.Event], workers), make(pool[[]byte], 2*endedBacklog+workers)
	var rendering sync.WaitGroup
	for range workers {
		var own flowRenderer
		if renderer != nil {
			own = renderer()
		}
		rendering.Go(func() { p.renderEnded(own) })
	}
	go func() {
		rendering.Wait()
		close(p.rendered)
	}()
	go p.writeRendered()
}

// flowRenderer renders a finished flow with its report, or nothing when
// the flow is not shown.
type flowRenderer interface {
	AppendFlow(b []byte, f *flow.Flow, r *explain.Report) []byte
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
	if p.w != nil && p.showEvents {
		p.fail(p.w.Event(e))
	}
	p.corr.Add(e, p.flowDone)
}

// KernelRecord counts a kernel record read, whose events follow.
func (p *Pipeline) KernelRecord() { p.records++ }

// flowDone takes a finished flow from the correlator. While a loss that
// could have touched it may still be uncounted, it waits (in order, behind
// any flow already waiting).
func (p *Pipeline) flowDone(f *flow.Flow) {
	if p.losses != nil && (len(p.unsure) > 0 || !p.losses.Known(f.Ended)) {
		if p.ended == nil {
			f = f.Clone() // explained in place, its memory is the correlator's again after the call
		}
		p.unsure = append(p.unsure, f)
		return
	}
	p.deliver(f)
}

// releaseKnown passes on the waiting flows whose losses are all counted.
func (p *Pipeline) releaseKnown() {
	n := 0
	for ; n < len(p.unsure) && p.losses.Known(p.unsure[n].Ended); n++ {
		p.deliver(p.unsure[n])
		p.unsure[n] = nil
	}
	p.unsure = append(p.unsure[:0], p.unsure[n:]...)
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
	if p.tracesRead != nil {
		// Read before the steps are recorded: every step it covers is
		// then in the recording ahead of this count.
		read := p.tracesRead()
		through = min(through, max(read, win.To-min(win.To, ruleset.TraceWindow)))
	}
	if p.rec != nil {
		p.recordRuleTraces()
	}
	p.losses.Add(win, through)
	if p.rec != nil && (win.N > 0 || time.Since(p.lossesRecorded) >= time.Second) {
		p.rec.Losses(win, through)
		p.lossesRecorded = time.Now()
	}
	p.releaseKnown()
}

// deliver has a finished flow explained and shown, marked incomplete if
// records were lost around it.
func (p *Pipeline) deliver(f *flow.Flow) {
	if p.losses != nil && len(f.Packets) > 0 {
		if f.LostAround = p.losses.Around(f); f.LostAround > 0 {
			p.incomplete++
		}
	}
	if p.ended != nil {
		p.ended <- endedFlow{n: p.endedN, at: p.now, f: f}
		p.endedN++
		return
	}
	p.fail(p.show(f, p.explain(f)))
}

// renderEnded decodes, explains and renders (with render, unless nil) the
// flows the correlator hands over, and gives them back.
func (p *Pipeline) renderEnded(render flowRenderer) {
	for x := range p.ended {
		room := x.f.Decode(p.rooms.get())
		r := renderedFlow{n: x.n, at: x.at, id: x.f.ID, start: x.f.Start, end: x.f.End}
		report := p.explain(x.f)
		r.rule = report.Rule()
		if render != nil && report != nil {
			r.text = render.AppendFlow(p.texts.get()[:0], x.f, report)
		}
		p.corr.Release(x.f)
		p.rooms.put(room)
		p.rendered <- r
	}
}

// writeRendered counts the findings and writes the rendered flows in the
// order they ended.
func (p *Pipeline) writeRendered() {
	defer close(p.shown)
	inOrder(p.rendered, func(r renderedFlow) uint64 { return r.n }, p.writeFlow)
}

// writeFlow counts a rendered flow's finding and writes its text.
func (p *Pipeline) writeFlow(y renderedFlow) {
	p.countFinding(flightFinding{rule: y.rule, flow: y.id, start: y.start, end: y.end})
	p.lastWrittenAt.Store(y.at)
	p.flowsWritten.Add(1)
	if y.text == nil {
		return
	}
	if p.brief != nil {
		p.write(p.brief.held(time.Now(), y.rule != ""))
		if y.rule == "" && !p.brief.allow() {
			return
		}
	}
	p.write(y.text)
	if cap(y.text) <= maxKeptText {
		p.texts.put(y.text)
	}
}

// inOrder calls each for the items from in in the order of their numbers
// (0, 1, 2, ...), though goroutines working side by side finish them out
// of order: the ones that come early wait, bounded by the items in flight.
func inOrder[T any](in <-chan T, number func(T) uint64, each func(T)) {
	early := map[uint64]T{}
	var next uint64
	for x := range in {
		early[number(x)] = x
		for y, ok := early[next]; ok; y, ok = early[next] {
			delete(early, next)
			next++
			each(y)
		}
	}
}

func (p *Pipeline) write(b []byte) {
	if len(b) == 0 {
		return
	}
	if _, err := p.out.Write(b); err != nil && p.showErr == nil {
		p.showErr = err
	}
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
}

// show counts a finished flow's finding and writes the flow.
func (p *Pipeline) show(f *flow.Flow, r *explain.Report) error {
	p.countFinding(flightFinding{rule: r.Rule(), flow: f.ID, start: f.Start, end: f.End})
	if r == nil || p.w == nil {
		return nil
	}
	return p.w.Flow(f, r)
}

// AddRuleset keeps a namespace's ruleset for the findings, and in the
// recording.
func (p *Pipeline) AddRuleset(s ruleset.Snapshot) {
	if p.rulesets == nil {
		return
	}
	p.rulesets.Add(s)
	if p.flight != nil {
		p.flight.ruleset(s)
	}
	if p.rulesChanged != nil {
		p.rulesChanged(s.Netns)
	}
	if p.rec != nil {
		p.fail(p.rec.Ruleset(s))
	}
}

// recordRuleTraces writes the trace steps read since the last tick.
func (p *Pipeline) recordRuleTraces() {
	for {
		select {
		case t := <-p.ruleTraces:
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
		case s := <-p.ruleChanges:
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
		p.releaseKnown()
	}
	p.flushOut()
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
	if p.ended == nil || p.flowsWritten.Load() == p.endedN {
		return now
	}
	return min(now, max(p.lastWrittenAt.Load(), 1)-1)
}

// Finish ends every flow and writes the summary: on stderr, and as the
// last JSON object.
func (p *Pipeline) Finish(lost, shed map[event.Point]uint64, d time.Duration) output.Summary {
	if p.rec != nil {
		p.recordRuleTraces()
	}
	if p.losses != nil {
		// Every loss is counted by now (the caller's last count).
		p.losses.Complete()
		p.releaseKnown()
	}
	p.corr.Flush(p.flowDone)
	if p.ended != nil {
		close(p.ended)
		<-p.shown
		if p.brief != nil {
			p.write(p.brief.held(time.Now(), true))
		}
		p.fail(p.showErr)
	}
	if p.flight != nil {
		p.flightKept = p.flight.close()
	}
	sum := output.Summary{Events: p.Counts(), Records: p.records, Lost: lost, Shed: shed, Duration: d, Flows: p.corr.Stats(), Findings: p.findingsByRule, Incomplete: p.incomplete,
		Clocks: p.clocks, Gate: p.gate}
	p.summarize(sum)
	switch {
	case p.jw != nil:
		p.fail(p.jw.Raw(summaryJSON(sum)))
		p.fail(p.jw.Close())
	case p.jsonOut:
		p.write(append(SummaryJSON(sum), '\n'))
		p.fail(p.showErr)
	}
	p.flushOut()
	if p.err != nil {
		p.err = fmt.Errorf("write output: %w", p.err)
	}
	return sum
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

type jsonSummary struct {
	Type       string            `json:"type"`
	DurationMS int64             `json:"duration_ms"`
	Events     map[string]uint64 `json:"events"`
	// Records counts the kernel records the events came in (live runs
	// only): the kernel gathers a packet's device hops into one.
	Records uint64            `json:"kernel_records,omitempty"`
	Lost    map[string]uint64 `json:"lost"`
	// Shed are the records not sent, per point, to keep room for evidence
	// in a filling ring buffer (probe.Tracer.Shed).
	Shed         map[string]uint64 `json:"shed"`
	Flows        uint64            `json:"flows"`
	FlowsEvicted uint64            `json:"flows_evicted"`
	// Contradictions counts events that named a known flow but belonged
	// to another connection (flow.Stats.Contradictions).
	Contradictions uint64 `json:"contradictions"`
	// Unheld counts route lookups not kept because one packet had too
	// many (flow.Stats.Unheld).
	Unheld uint64 `json:"route_lookups_not_kept,omitempty"`
	// Incomplete counts the flows records were lost around: none of
	// their findings rests on what they lack.
	Incomplete uint64            `json:"flows_incomplete"`
	Findings   map[string]uint64 `json:"findings"`
	// Gate is what the kernel gate did (--healthy count).
	Gate *jsonGate `json:"gate,omitempty"`
	// Clocks are how a replay of several recordings placed the clocks of
	// all but the first.
	Clocks []jsonClock `json:"clocks,omitempty"`
}

// jsonClock is one recording's clock as replay placed it (trace.ClockSkew).
type jsonClock struct {
	Host      string   `json:"host"`
	OffsetMS  float64  `json:"offset_ms"`
	Packets   int      `json:"packets"`
	Placement string   `json:"placement"`
	AtLeastMS *float64 `json:"at_least_ms,omitempty"`
	AtMostMS  *float64 `json:"at_most_ms,omitempty"`
}

// jsonGate is event.GateCounts as the summary has it (docs/events.md).
type jsonGate struct {
	Held      uint64 `json:"records_held"`
	Released  uint64 `json:"records_released"`
	Healthy   uint64 `json:"connections_healthy"`
	Discarded uint64 `json:"records_discarded"`
	Triggered uint64 `json:"connections_triggered"`
	Missing   uint64 `json:"records_missing"`
	Refused   string `json:"refused,omitempty"`
}

// SummaryJSON is the summary as the JSON output's last line has it, for
// diagnostics in JSON (docs/events.md).
func SummaryJSON(s output.Summary) []byte {
	// Marshal cannot fail on a summary: plain values and maps of them.
	b, _ := json.Marshal(summaryJSON(s))
	return b
}

func summaryJSON(s output.Summary) jsonSummary {
	sum := jsonSummary{Type: "summary", DurationMS: s.Duration.Milliseconds(), Events: PointNames(s.Events), Records: s.Records,
		Lost: PointNames(s.Lost), Shed: PointNames(s.Shed), Flows: s.Flows.Flows, FlowsEvicted: s.Flows.Evicted,
		Contradictions: s.Flows.Contradictions, Unheld: s.Flows.Unheld, Incomplete: s.Incomplete, Findings: s.Findings}
	if g := s.Gate; g != nil {
		sum.Gate = &jsonGate{Held: g.Held, Released: g.Released, Healthy: g.Healthy, Discarded: g.Discarded, Triggered: g.Triggered, Missing: g.Missing, Refused: g.Refused}
	}
	ms := func(d time.Duration) *float64 { v := float64(d) / 1e6; return &v }
	for i, k := range s.Clocks {
		if i == 0 {
			continue // the clock the others are placed against
		}
		c := jsonClock{Host: k.Host, OffsetMS: *ms(k.Offset), Packets: k.Packets, Placement: k.Placement().String()}
		if k.HasLower {
			c.AtLeastMS = ms(k.Lower)
		}
		if k.HasUpper {
			c.AtMostMS = ms(k.Upper)
		}
		sum.Clocks = append(sum.Clocks, c)
	}
	return sum
}

// PointNames keys per-point counts by the points' names, every point present.
func PointNames(m map[event.Point]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for _, p := range event.Points {
		out[p.String()] = m[p]
	}
	return out
}
