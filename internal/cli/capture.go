package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/nettrace-dev/nettrace/internal/ctstat"
	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/linkmtu"
	"github.com/nettrace-dev/nettrace/internal/metrics"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/internal/probe"
	"github.com/nettrace-dev/nettrace/internal/ruletrace"
	"github.com/nettrace-dev/nettrace/internal/rulewatch"
	"github.com/nettrace-dev/nettrace/internal/synwatch"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

// capture is what watch and record assemble around the engine: the
// tracer, the watchers of namespaces and rules, the recorders, the
// terminal. Each part that starts adds its stop to closers.
type capture struct {
	log       zerolog.Logger
	summarize func(output.Summary) // Options.Summarize
	f         watchFlags
	expr      string
	prog      *filter.Program
	targets   []netns.Target
	tr        *probe.Tracer
	meta      trace.Meta
	names     output.Names    // for the renderers
	sources   explain.Sources // for the rules and the recordings
	rules     captureRules
	rec       *trace.Recorder
	flight    *engine.FlightRecorder
	// syn is the user-space part of the syn point; synJudges when it is
	// the point's method (it judges SYNs itself).
	syn       *synwatch.Watcher
	synJudges bool
	// ct reads the conntrack table for drops conntrack may have decided.
	ct *ctstat.Reader
	// mtu reads the MTUs around a packet dropped as too big to forward.
	mtu    *linkmtu.Reader
	status *statusLine
	// apiListed is closed once the Kubernetes API listed pods, nodes and Services,
	// or gave up for now; nil without an API.
	apiListed chan struct{}
	// rescans counts the looks for new namespaces; watched are the
	// namespaces watched since the first; sighted those not watched that
	// events came from since the last look, unfound those a look at every
	// process did not find (sightings).
	rescans int
	watched map[uint32]bool
	sighted map[uint32]bool
	unfound map[uint32]bool
	// metrics serves --metrics; nil without.
	metrics *metrics.Server
	closers []func()
}

// captureRules are the rules a capture's findings name: the namespaces'
// rulesets as read and followed, and with --rules the kernel's traces.
type captureRules struct {
	history ruleset.History
	watcher *rulewatch.Watcher
	first   []ruleset.Snapshot // the rulesets when watching began
	tracer  *ruletrace.Tracer
	// traces are the rule traces read; toRecord carries them to the
	// recording, and unrecorded counts those it had no room for.
	traces     ruleset.Traces
	toRecord   chan ruleset.Trace
	unrecorded atomic.Uint64
	changed    func(netns uint32)
}

func runCapture(log zerolog.Logger, summarize func(output.Summary), f watchFlags, expr string, explicitNetns bool) error {
	prog, forced, err := f.check(expr)
	if err != nil {
		return err
	}
	if explicitNetns && len(f.netns) == 0 {
		return usageError{errors.New(`--netns "": empty: want a NAME under /run/netns, a PATH, or all`)}
	}
	if err := requireRoot("nettrace"); err != nil {
		return err
	}
	targets, err := netns.Resolve(f.netns)
	if err != nil {
		return err
	}
	c := &capture{log: log, summarize: summarize, f: f, expr: expr, prog: prog, targets: targets}
	defer c.close()
	restrict := explicitNetns && !containsString(f.netns, "all")
	if err := c.attach(forced, restrict); err != nil {
		return err
	}
	if err := c.startRecorders(); err != nil {
		return err
	}
	c.startWatchers()
	// Attaching parsed the kernel's BTF and the BPF objects: what of that a
	// long run never needs again goes back to the system now, not whenever
	// the runtime gets round to it.
	debug.FreeOSMemory()
	// A status line only where a person watches: stderr a terminal.
	if isTerminal(os.Stderr) {
		c.status = &statusLine{w: os.Stderr}
	}
	p := c.pipeline()
	if err := c.serveMetrics(p); err != nil {
		return err
	}
	run := c.loop(p, !explicitNetns || containsString(f.netns, "all"))
	// Signals are taken before anyone is told nettrace is ready: an
	// interrupt from then on stops it cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	run.Stop = sig
	if f.readyFile != "" {
		stop, err := c.announceReady(f.readyFile)
		if err != nil {
			return err
		}
		defer stop()
	}
	start := time.Now()
	err = run.Run()
	if c.status != nil {
		c.status.clear()
	}
	run.CountLosses()
	c.finish(p, time.Since(start))
	if err == nil {
		err = p.Err()
	}
	return err
}

// check validates the flags that need no privilege, and compiles the
// filter and the forced methods.
func (f watchFlags) check(expr string) (*filter.Program, map[string]probe.Method, error) {
	if f.format != "none" {
		if err := checkFormat(f.format, f.events); err != nil {
			return nil, nil, err
		}
	}
	if f.fileSize > 0 && f.write == "" {
		return nil, nil, usageError{errors.New("--file-size splits a recording: it needs -w FILE")}
	}
	if f.files > 0 && f.fileSize == 0 {
		return nil, nil, usageError{errors.New("--files keeps the newest files of a split recording: it needs --file-size")}
	}
	if f.snapLen > probe.MaxSnapLen {
		return nil, nil, usageError{fmt.Errorf("--snaplen %d: at most %d", f.snapLen, probe.MaxSnapLen)}
	}
	if f.ringSize < 4096 || f.ringSize&(f.ringSize-1) != 0 {
		return nil, nil, usageError{fmt.Errorf("--ring-size %d: want a power of two of at least 4096", f.ringSize)}
	}
	if err := f.checkCounts(); err != nil {
		return nil, nil, err
	}
	for _, spec := range f.netns {
		if err := netns.Check(spec); err != nil {
			return nil, nil, usageError{fmt.Errorf("--netns %q: %w", spec, err)}
		}
	}
	prog, err := filter.Compile(expr)
	if err != nil {
		return nil, nil, usageError{err}
	}
	if f.healthy.count && prog != nil && len(prog.Insns) > 0 {
		return nil, nil, usageError{errors.New("--healthy count holds connections only with no filter: a filter's connections are traced whole")}
	}
	if f.held == 0 {
		return nil, nil, usageError{errors.New("--held 0: want at least 1")}
	}
	forced, err := parseMethods(f.methods)
	if err != nil {
		return nil, nil, err
	}
	return prog, forced, nil
}

// checkCounts checks the durations and counts: none below zero, the
// flows' bounds above it.
func (f watchFlags) checkCounts() error {
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"--duration", f.duration}, {"--flight-before", f.flight.Before}, {"--flight-after", f.flight.After}} {
		if d.d < 0 {
			return usageError{fmt.Errorf("%s %s: want zero or more", d.flag, d.d)}
		}
	}
	for _, n := range []struct {
		flag string
		n    int
	}{{"--files", f.files}, {"--keep", f.flight.Keep}} {
		if n.n < 0 {
			return usageError{fmt.Errorf("%s %d: want zero (all) or more", n.flag, n.n)}
		}
	}
	return checkFlowFlags(f.flowIdle, f.maxFlows, f.maxPkts)
}

// close stops what started, last first.
func (c *capture) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

// attach loads and attaches the probes, says which points are unavailable
// and why, and sets what recordings and names need of the kernel.
func (c *capture) attach(forced map[string]probe.Method, restrict bool) error {
	log, f := c.log, c.f
	facts := kernel.Probe(func(what, where string) { log.Info().Str("fs", what).Str("at", where).Msg("mounted") })
	syms, err := kernel.LoadSymbols()
	if err != nil {
		return err
	}
	reasons, err := kernel.DropReasons()
	if err != nil {
		log.Warn().Err(err).Msg("drop reasons will be shown as numbers")
	}
	c.tr, err = probe.Open(probe.Options{
		Filter: c.prog, Namespaces: c.targets, RestrictNetns: restrict, RingBytes: f.ringSize, Methods: forced, Log: log, SnapLen: f.snapLen, AllPackets: f.all,
		HealthyCount: f.healthy.count, HeldRecords: f.held,
	}, facts, syms)
	if err != nil {
		return err
	}
	c.closers = append(c.closers, func() { c.tr.Close() })
	for _, s := range c.tr.Statuses() {
		if s.Active() {
			log.Debug().Str("point", s.Point).Str("method", string(s.Method)).Str("target", s.Target).Msg("attached")
			continue
		}
		var why []string
		for _, a := range s.Skipped {
			why = append(why, strings.TrimPrefix(fmt.Sprintf("%s: %s", a.Method, a.Reason), ": "))
		}
		log.Warn().Str("point", s.Point).Msg("unavailable: " + strings.Join(why, "; "))
	}
	if err := c.tr.GateRefused(); err != nil {
		log.Warn().Msg("--healthy count: " + err.Error())
	}
	log.Info().Int("namespaces", len(c.targets)).Str("filter", c.expr).Dur("attach", c.tr.AttachTime).Msg("watching")
	host := f.nodeName
	if host == "" {
		host, _ = os.Hostname()
	}
	mono, wall, anchorErr, err := kernel.ClockAnchor()
	if err != nil {
		return err
	}
	c.meta = trace.Meta{Nettrace: nettraceVersion, Created: time.Now().UTC(), Host: host, Kernel: recordedKernel(facts), Points: recordedPoints(c.tr.Statuses()),
		Filter: c.expr, SnapLen: f.snapLen, MonoNS: mono, WallNS: wall, AnchorErrNS: anchorErr, DropReasons: reasons}
	namer := netns.NewNamer(c.targets)
	c.names = output.Names{
		DropReason: func(r uint32) string { return reasons[r] },
		Symbol:     syms.Name,
		Netns:      namer.Name,
		Wall:       c.meta.Wall,
	}
	c.sources = explain.Sources{Names: c.names, Pods: namer.PodAddresses, Rulesets: c.rules.history.At}
	c.nameFromAPI()
	if f.rules {
		c.sources.RuleTraces = c.rules.traces.Pass
	}
	return nil
}

// about is what an HTML page says of the run: this host, its kernel and
// points, and the namespaces watched from the start.
func (c *capture) about() output.About {
	a := output.About{Recordings: []trace.Meta{c.meta}}
	for _, t := range c.targets {
		a.Namespaces = append(a.Namespaces, c.names.NetnsName(t.Inode))
	}
	slices.Sort(a.Namespaces)
	return a
}

// announceReady writes the ready file once every available point is
// attached and, with a Kubernetes API, its first lists are in (or
// listWait passed): what a test or a readiness probe waits for is
// nettrace naming what it sees. The events meanwhile are traced. stop
// removes the file.
func (c *capture) announceReady(path string) (stop func(), err error) {
	write := func() error {
		if err := os.WriteFile(path, []byte("ready\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
		return nil
	}
	if c.apiListed == nil {
		return func() { os.Remove(path) }, write()
	}
	quit, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		select {
		case <-c.apiListed:
			if err := write(); err != nil {
				c.log.Error().Err(err).Send()
			}
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-finished
		os.Remove(path)
	}, nil
}

// startRecorders opens the recording (-w) and the flight recorder.
func (c *capture) startRecorders() error {
	f, log := c.f, c.log
	if f.write != "" {
		problem := func(err error, resumed bool) {
			if resumed {
				log.Warn().Str("file", f.write).Msg("recording resumed: there is room on the disk again")
				return
			}
			log.Error().Err(err).Str("file", f.write).Msg("recording paused: what is recorded so far is kept and replays; tracing goes on, and the events not written are counted until the disk has room")
		}
		opts := trace.RecordOptions{FileBytes: int64(f.fileSize), Files: f.files, Problem: problem}
		recorded := c.meta
		recorded.LossMarks = true // the pipeline records its counts of losses
		recorded.Ticks = true     // and its ticks
		rec, err := trace.NewRecorder(f.write, recorded, c.sources, opts)
		if err != nil {
			return err
		}
		c.rec = rec
	}
	if f.flight.Dir != "" {
		o := f.flight
		// A finding comes after its flow went idle: its events must be
		// held that long past the window, and then some for long flows.
		o.Span, o.MaxBytes = o.Before+o.After+f.flowIdle+time.Minute, flightMemory
		o.Settle = o.Before + f.flowIdle + time.Second
		o.Written = c.flightWritten
		flight, err := engine.NewFlightRecorder(o, c.meta, c.sources, func(err error) {
			log.Error().Err(err).Str("dir", o.Dir).Msg("flight recorder: a finding's window not written")
		})
		if err != nil {
			return err
		}
		c.flight = flight
	}
	return nil
}

// startWatchers starts the user-space parts: the syn point's (the whole
// method where the kernel offers nothing better, the queue numbers of the
// tracepoint method's unknown listeners otherwise), the drop point's (the
// conntrack table at a drop conntrack may have decided, the MTUs around a
// packet too big to forward), the namespaces'
// rulesets (so that findings name their rules) and, with --rules, the
// rules each selected packet goes through as the kernel traces them.
func (c *capture) startWatchers() {
	log := c.log
	synMethod := c.tr.Status("syn").Method
	if synMethod == probe.MethodUser || synMethod == probe.MethodTpBTF {
		c.syn = synwatch.New(c.targets)
		c.synJudges = synMethod == probe.MethodUser
	}
	if c.tr.Status("drop").Active() {
		c.ct = ctstat.New(c.targets, c.names.DropReason)
		c.mtu = linkmtu.New(c.targets, c.names.DropReason)
	}
	rules, first, err := rulewatch.Start(c.targets, func(err error) { log.Warn().Err(err).Msg("rules of a namespace not named") })
	if err != nil {
		log.Warn().Err(err).Msg("rules not named")
	} else {
		c.rules.watcher, c.rules.first = rules, first
		c.closers = append(c.closers, func() { rules.Close() })
	}
	if !c.f.rules {
		return
	}
	if c.rec != nil {
		c.rules.toRecord = make(chan ruleset.Trace, tracedBacklog)
	}
	tracer, err := ruletrace.Start(c.targets, c.prog, func(t ruleset.Trace) {
		c.rules.traces.Add(t)
		if c.rules.toRecord != nil {
			select {
			case c.rules.toRecord <- t:
			default:
				c.rules.unrecorded.Add(1)
			}
		}
	}, func(err error) { log.Warn().Err(err).Msg("rules named from the ruleset only") })
	if err != nil {
		log.Warn().Err(err).Msg("rules named from the ruleset only")
		return
	}
	c.rules.tracer, c.rules.changed = tracer, tracer.Invalidate
	c.closers = append(c.closers, func() { tracer.Close() })
}

// pipeline makes the engine's pipeline for this run, with the rulesets
// read when watching began.
func (c *capture) pipeline() *engine.Pipeline {
	f := c.f
	out, colour := io.Writer(os.Stdout), colourOn(os.Stdout)
	if c.status != nil {
		out = statusGuard{os.Stdout, c.status}
	}
	o := engine.Options{Format: f.format, Timelines: f.timelines, Events: f.events, Limit: f.count, FlowIdle: f.flowIdle,
		MaxFlows: f.maxFlows, MaxPackets: f.maxPkts, Names: c.names, Sources: c.sources, Recorder: c.rec, Flight: c.flight, Stdout: out, Colour: colour,
		Rulesets: &c.rules.history, RuleTraces: c.rules.toRecord, RulesChanged: c.rules.changed, Losses: &flow.Losses{}, Summarize: c.summarize,
		About: c.about()}
	if c.rules.watcher != nil {
		o.RuleChanges = c.rules.watcher.Changes()
	}
	if c.rules.tracer != nil {
		o.RuleTracesRead = c.rules.tracer.ReadThrough
	}
	c.tellFindings(&o)
	p := engine.New(o)
	for _, s := range c.rules.first {
		p.AddRuleset(s)
	}
	return p
}

// loop assembles the read loop: the tracer as its source, the syn
// watcher and the conntrack table's reader as completers (the syn watcher
// as judge too), the status line, and with rescan a
// look for new namespaces, which every part then watches.
func (c *capture) loop(p *engine.Pipeline, rescan bool) *engine.Capture {
	run := &engine.Capture{Source: c.tr, Pipeline: p, Duration: c.f.duration, Log: c.log,
		Stopping: func(s os.Signal) {
			if c.status != nil {
				c.status.clear()
			}
			c.log.Info().Str("signal", s.String()).Msg("stopping")
		}}
	var completers engine.Completers
	if rescan && containsString(c.f.netns, "all") {
		completers = append(completers, sightings{c})
	}
	if c.syn != nil {
		completers = append(completers, c.syn)
		if c.synJudges {
			run.Judge = c.syn
		}
	}
	if c.ct != nil {
		completers = append(completers, c.ct, c.mtu)
	}
	if len(completers) > 0 {
		run.Completer = completers
	}
	if c.status != nil {
		st := &statusRefresh{line: c.status, tr: c.tr, p: p}
		run.Progress = st.refresh
	}
	if rescan {
		run.Rescan = c.rescan
	}
	return run
}

// finish ends the pipeline with the kernel's final counts and says what
// the run lost, skipped and recorded.
func (c *capture) finish(p *engine.Pipeline, d time.Duration) {
	log := c.log
	lost, lerr := c.tr.Lost()
	shed, serr := c.tr.Shed()
	if err := errors.Join(lerr, serr); err != nil {
		log.Warn().Err(err).Msg("lost counters unavailable")
	}
	if missed, err := c.tr.Missed(); err != nil {
		log.Debug().Err(err).Msg("recursion counters unavailable")
	} else {
		for prog, n := range missed {
			log.Warn().Str("program", prog).Uint64("missed", n).
				Msg("the kernel skipped this program where it was already running on the CPU (an interrupt re-entered it): what those runs would have reported is missing")
		}
	}
	if c.rules.tracer != nil {
		// Every step delivered is then both known and queued for the
		// recording, which Finish drains before it explains the last
		// flows: a step delivered later would name a rule live that the
		// recording, and so replay, would not.
		c.rules.tracer.Sync()
		c.rules.tracer.Close()
	}
	switch {
	case c.tr.GateOn():
		if g, err := c.tr.Gate(); err != nil {
			log.Warn().Err(err).Msg("the gate's counters unavailable")
		} else {
			p.GateCounted(g)
		}
	case c.tr.GateRefused() != nil:
		p.GateCounted(event.GateCounts{Refused: c.tr.GateRefused().Error()})
	}
	p.Finish(lost, shed, d)
	if c.rules.tracer != nil && (c.rules.tracer.Lost() > 0 || c.rules.unrecorded.Load() > 0) {
		log.Warn().Uint64("lost_by_the_kernel", c.rules.tracer.Lost()).Uint64("not_recorded", c.rules.unrecorded.Load()).
			Msg("some rule traces were not kept: those packets' rules are named from the ruleset")
	}
	if c.rec != nil {
		c.closeRecording(p, lost, shed)
	}
	if c.flight != nil {
		log.Info().Str("dir", c.f.flight.Dir).Strs("kept", p.FlightKept()).Msg("flight recorder")
	}
}

// closeRecording ends the recording with its summary and says what it
// holds.
func (c *capture) closeRecording(p *engine.Pipeline, lost, shed map[event.Point]uint64) {
	log, f := c.log, c.f
	st, cerr := c.rec.Close(trace.Summary{Events: engine.PointNames(p.Counts()), Lost: engine.PointNames(lost), Shed: engine.PointNames(shed), Ended: time.Now().UTC()})
	msg := log.Info()
	if st.Unwritten > 0 {
		msg = log.Warn()
	}
	msg = msg.Str("file", f.write).Uint64("events", st.Events).Uint64("written", st.Written).Uint64("not_written", st.Unwritten).Int64("bytes", st.Bytes)
	if f.fileSize > 0 {
		msg = msg.Int("files_kept", len(st.Files)).Int("files_removed", st.Removed())
	}
	msg.Msg("recorded")
	if cerr != nil {
		// Said when it happened; the files replay up to it.
		log.Debug().Err(cerr).Msg("recording stopped once")
	}
}
