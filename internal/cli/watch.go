package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/internal/probe"
	"github.com/nettrace-dev/nettrace/internal/ruletrace"
	"github.com/nettrace-dev/nettrace/internal/rulewatch"
	"github.com/nettrace-dev/nettrace/internal/synwatch"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
	"github.com/nettrace-dev/nettrace/pkg/trace"
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// colourOn says whether to colour what goes to f: only a terminal, and not
// when the user set NO_COLOR (no-color.org), so that a file or a pipe never
// carries escape codes.
func colourOn(f *os.File) bool {
	return os.Getenv("NO_COLOR") == "" && isTerminal(f)
}

type watchFlags struct {
	netns     []string
	duration  time.Duration
	count     uint64
	format    string
	timelines output.Timelines
	readyFile string
	ringSize  uint32
	methods   []string
	events    bool
	flowIdle  time.Duration
	maxFlows  int
	maxPkts   int
	snapLen   uint32
	write     string
	fileSize  byteSize
	files     int
	flight    flightOptions
	all       bool
	rules     bool
}

// captureFlags are the flags of every command that attaches (watch, record).
func captureFlags(fl *pflag.FlagSet, f *watchFlags) {
	fl.StringSliceVar(&f.netns, "netns", nil, "network namespace to watch: NAME under /run/netns, PATH, or all (repeatable)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many events (default: no limit)")
	fl.StringVar(&f.readyFile, "ready-file", "", "create this file once every available point is attached")
	fl.Uint32Var(&f.ringSize, "ring-size", 8<<20, "ring buffer size in bytes (power of two)")
	fl.StringSliceVar(&f.methods, "method", nil, "force a method for a point: POINT=METHOD (repeatable)")
	fl.Uint32Var(&f.snapLen, "snaplen", defaultSnapLen, fmt.Sprintf("bytes of each packet kept, from its IP header (0 to %d); 128 holds IP, TCP/UDP, vxlan and the inner headers", probe.MaxSnapLen))
	fl.StringVarP(&f.write, "write", "w", "", "also record to `FILE` (replay it with nettrace replay)")
	fl.VarP(&f.fileSize, "file-size", "C", "with -w: split the recording into files of this size (FILE.1, FILE.2, ...; a number alone is millions of bytes, as tcpdump's -C; or 500k, 20M, 1G), each replayable alone")
	fl.IntVarP(&f.files, "files", "W", 0, "with -C: keep only the newest this many files, removing the oldest")
	fl.StringVar(&f.flight.dir, "flight", "", "flight recorder: keep the last events in memory and write the window around each finding's flow to a file of its own in `DIR`")
	fl.DurationVar(&f.flight.before, "flight-before", 10*time.Second, "flight recorder: events kept before a finding's flow")
	fl.DurationVar(&f.flight.after, "flight-after", 5*time.Second, "flight recorder: events kept after a finding's flow")
	fl.IntVar(&f.flight.keep, "keep", 20, "flight recorder: keep only the newest this many files (0: all)")
	fl.BoolVar(&f.all, "all-packets", false, "report every data and ACK segment of established TCP connections (by default: only their drops)")
	fl.BoolVar(&f.rules, "rules", false, "name rules as the kernel traces them: adds an nftables table \""+ruletrace.TableName+"\" to each watched namespace, removed at exit (also if killed)")
}

func newWatchCommand(g *globalFlags) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch [FILTER]",
		Short: "Stream what the kernel does to the packets matching FILTER, and explain what went wrong",
		Long: `watch attaches every observation point and follows the packets matching
FILTER, a pcap-filter style expression evaluated in the kernel. A packet
that matched is followed after NAT or encapsulation change its tuple, and
so is its reply, through its conntrack entry. When a flow ends, what went
wrong is explained, and the flow is shown as a timeline of what the kernel
did to each of its packets; a flow where nothing went wrong is one line
(--timelines all shows it whole, --timelines findings not at all).

FILTER: host, net, port, portrange, src/dst, tcp, udp, icmp, ip,
and/or/not (&&, ||, !), parentheses. Empty: every IPv4 packet.

By default the netfilter programs (the nat point on kernels without kprobes
or fentry) are linked in the current namespace and every namespace under
/run/netns, including ones created while watch runs.

Explanations name the iptables or nftables rule behind them (the RETURN
that skipped a MASQUERADE, the DNAT to a dead pod, the DROP): watch reads
each namespace's ruleset with iptables-save (and its native nftables tables
with nft) as it starts and again after every change, and attributes each
outcome to the rule that yields it. With --rules the kernel
itself says which rules each selected packet went through (nftables
tracing): watch adds a table of its own, "nettrace", to each watched
namespace, whose chains mark the packets FILTER selects for tracing
(at most 5000 a second per rule). The kernel removes that table when
nettrace exits, even when it is killed; nothing else in any ruleset
changes. Without --rules nothing in any ruleset changes at all.`,
		Example: `  nettrace watch 'tcp and host 10.96.0.10 and port 80'
  nettrace watch --timelines findings 'net 10.244.0.0/16'
  nettrace watch --netns n1 --netns n2 -o json 'net 10.244.0.0/16' > trace.jsonl
  nettrace watch -w incident.ntrace --duration 30s 'port 30285'
  nettrace watch --rules 'tcp and dst port 30285'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			return runCapture(log, f, strings.Join(args, " "), cmd.Flags().Changed("netns"))
		},
	}
	fl := cmd.Flags()
	captureFlags(fl, &f)
	fl.StringVarP(&f.format, "output", "o", "text", "output format: text or json")
	timelinesFlag(fl, &f.timelines)
	fl.BoolVar(&f.events, "events", false, "text: also print every event as it arrives (json always has them)")
	fl.DurationVar(&f.flowIdle, "flow-timeout", flow.DefaultConfig.Idle, "a flow ends (and is explained) after this long without events")
	fl.IntVar(&f.maxFlows, "max-flows", flow.DefaultConfig.MaxFlows, "flows kept at once; past it the oldest ends early (counted)")
	fl.IntVar(&f.maxPkts, "max-packets", flow.DefaultConfig.MaxPackets, "packets kept per flow; later ones are counted, not kept")
	return cmd
}

func newRecordCommand(g *globalFlags) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "record -w FILE [FILTER]",
		Short: "Record the packets matching FILTER to a file, to replay anywhere",
		Long: `record attaches like watch and writes every event to FILE, with what
replay needs to explain them on another machine (the kernel's drop-reason
names, namespace and device names, the observation points and their
methods, each namespace's iptables ruleset and its changes, lost-event
counts, and with --rules the rules each packet was traced through). The
file is written as a stream: one cut off
by a crash replays up to its last complete record. It is readable by its
owner only (0600): it holds packet headers.

For a run of hours or days, --file-size splits the recording into files
of that size (FILE.1, FILE.2, ...), each a recording of its own that
replays alone, and --files keeps only the newest; replay given several of
them puts them back together. Writing never holds up tracing: a disk that
is full (or slower than the events) pauses the recording, said once,
keeps every file whole, and resumes when there is room; the events not
written are counted in the closing summary.

For a failure that comes once an hour, --flight DIR keeps only what
matters: the last events are held in memory, and when a finding fires the
window around its flow (--flight-before ahead of its first event,
--flight-after past its last) is written to DIR, to a file named after the
finding, its time and its flow; findings whose windows overlap share one
file, and --keep bounds how many files there are. A healthy run writes
nothing.`,
		Example: `  nettrace record -w incident.ntrace --duration 60s 'host 10.96.0.10'
  nettrace record -w /var/tmp/node.ntrace -C 100 -W 20 'port 30285'   # at most 20 files of 100 MB
  nettrace replay /var/tmp/node.ntrace.*
  nettrace record --flight /var/tmp/failures --keep 50 'port 30285'   # only each failure, with 10 s before and 5 s after
  nettrace record -w incident.ntrace --rules 'host 10.96.0.10'
  nettrace replay incident.ntrace`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if f.write == "" && f.flight.dir == "" {
				return usageError{errors.New("record needs -w FILE, or --flight DIR")}
			}
			f.format = "none"
			return runCapture(log, f, strings.Join(args, " "), cmd.Flags().Changed("netns"))
		},
	}
	captureFlags(cmd.Flags(), &f)
	f.flowIdle, f.maxFlows, f.maxPkts = flow.DefaultConfig.Idle, flow.DefaultConfig.MaxFlows, flow.DefaultConfig.MaxPackets
	return cmd
}

// tracedBacklog bounds the trace steps waiting to be recorded: past it
// steps are counted and not recorded (a recording replayed names those
// packets' rules from the ruleset).
const tracedBacklog = 1 << 14

// defaultSnapLen holds IP, TCP/UDP, vxlan and the inner headers.
const defaultSnapLen = 128

// nettraceVersion goes into recordings.
const nettraceVersion = "0.1.0-dev"

func runCapture(log zerolog.Logger, f watchFlags, expr string, explicitNetns bool) error {
	if f.format != "text" && f.format != "json" && f.format != "none" {
		return usageError{fmt.Errorf("-o %q: want text or json", f.format)}
	}
	if f.fileSize > 0 && f.write == "" {
		return usageError{errors.New("--file-size splits a recording: it needs -w FILE")}
	}
	if f.files > 0 && f.fileSize == 0 {
		return usageError{errors.New("--files keeps the newest files of a split recording: it needs --file-size")}
	}
	if f.snapLen > probe.MaxSnapLen {
		return usageError{fmt.Errorf("--snaplen %d: at most %d", f.snapLen, probe.MaxSnapLen)}
	}
	if f.ringSize < 4096 || f.ringSize&(f.ringSize-1) != 0 {
		return usageError{fmt.Errorf("--ring-size %d: want a power of two of at least 4096", f.ringSize)}
	}
	prog, err := filter.Compile(expr)
	if err != nil {
		return usageError{err}
	}
	forced, err := parseMethods(f.methods)
	if err != nil {
		return err
	}
	if err := requireRoot("nettrace"); err != nil {
		return err
	}
	targets, err := netns.Resolve(f.netns)
	if err != nil {
		return err
	}
	facts := kernel.Probe(func(what, where string) { log.Info().Str("fs", what).Str("at", where).Msg("mounted") })
	syms, err := kernel.LoadSymbols()
	if err != nil {
		return err
	}
	reasons, err := kernel.DropReasons()
	if err != nil {
		log.Warn().Err(err).Msg("drop reasons will be shown as numbers")
	}
	restrict := explicitNetns && !containsString(f.netns, "all")
	tr, err := probe.Open(probe.Options{
		Filter: prog, Namespaces: targets, RestrictNetns: restrict, RingBytes: f.ringSize, Methods: forced, Log: log, SnapLen: f.snapLen, AllPackets: f.all,
	}, facts, syms)
	if err != nil {
		return err
	}
	defer tr.Close()
	for _, s := range tr.Statuses() {
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
	log.Info().Int("namespaces", len(targets)).Str("filter", expr).Dur("attach", tr.AttachTime).Msg("watching")

	host, _ := os.Hostname()
	meta := trace.Meta{Nettrace: nettraceVersion, Created: time.Now().UTC(), Host: host, Kernel: recordedKernel(facts), Points: recordedPoints(tr.Statuses()),
		Filter: expr, SnapLen: f.snapLen, MonoNS: int64(kernel.MonotonicNow()), WallNS: time.Now().UnixNano(), DropReasons: reasons}
	namer := netns.NewNamer(targets)
	var rulesets ruleset.History
	var ruleTraces ruleset.Traces
	names := output.Names{
		DropReason: func(r uint32) string { return reasons[r] },
		Symbol:     syms.Name,
		Netns:      namer.Name,
		Wall:       meta.Wall,
		Rulesets:   rulesets.At,
	}
	if f.rules {
		names.RuleTraces = ruleTraces.Pass
	}
	var rec *trace.Recorder
	if f.write != "" {
		problem := func(err error, resumed bool) {
			if resumed {
				log.Warn().Str("file", f.write).Msg("recording resumed: there is room on the disk again")
				return
			}
			log.Error().Err(err).Str("file", f.write).Msg("recording paused: what is recorded so far is kept and replays; tracing goes on, and the events not written are counted until the disk has room")
		}
		opts := trace.RecordOptions{FileBytes: int64(f.fileSize), Files: f.files, Problem: problem}
		recorded := meta
		recorded.LossMarks = true // the pipeline records its counts of losses
		if rec, err = trace.NewRecorder(f.write, recorded, names, opts); err != nil {
			return err
		}
	}
	var flight *flightRecorder
	if f.flight.dir != "" {
		o := f.flight
		// A finding comes after its flow went idle: its events must be
		// held that long past the window, and then some for long flows.
		o.span, o.maxBytes = o.before+o.after+f.flowIdle+time.Minute, flightMemory
		o.settle = o.before + f.flowIdle + time.Second
		if flight, err = newFlightRecorder(o, meta, names, func(err error) {
			log.Error().Err(err).Str("dir", o.dir).Msg("flight recorder: a finding's window not written")
		}); err != nil {
			return err
		}
	}
	// The user-space part of the syn point: the whole method where the
	// kernel offers nothing better, the queue numbers of the tracepoint
	// method's unknown listeners otherwise.
	var syn *synwatch.Watcher
	synMethod := tr.Status("syn").Method
	if synMethod == probe.MethodUser || synMethod == probe.MethodTpBTF {
		syn = synwatch.New(targets)
	}
	// The namespaces' rulesets, so that findings name their rules.
	rules, firstRulesets, err := rulewatch.Start(targets, func(err error) { log.Warn().Err(err).Msg("rules of a namespace not named") })
	var ruleChanges <-chan ruleset.Snapshot
	if err != nil {
		log.Warn().Err(err).Msg("rules not named")
	} else {
		defer rules.Close()
		ruleChanges = rules.Changes()
	}
	// With --rules, the rules each selected packet goes through, as the
	// kernel traces them.
	var tracer *ruletrace.Tracer
	var traced chan ruleset.Trace
	var unrecorded atomic.Uint64
	var rulesChanged func(uint32)
	if f.rules {
		if rec != nil {
			traced = make(chan ruleset.Trace, tracedBacklog)
		}
		tracer, err = ruletrace.Start(targets, prog, func(t ruleset.Trace) {
			ruleTraces.Add(t)
			if traced != nil {
				select {
				case traced <- t:
				default:
					unrecorded.Add(1)
				}
			}
		}, func(err error) { log.Warn().Err(err).Msg("rules named from the ruleset only") })
		if err != nil {
			log.Warn().Err(err).Msg("rules named from the ruleset only")
		} else {
			defer tracer.Close()
			rulesChanged = tracer.Invalidate
		}
	}
	// A status line only where a person watches: stderr a terminal.
	var status *statusLine
	if isTerminal(os.Stderr) {
		status = &statusLine{w: os.Stderr}
	}
	run := &watchRun{tr: tr, syn: syn, synJudges: synMethod == probe.MethodUser, f: f, log: log, status: status, p: newPipeline(pipelineOptions{status: status, format: f.format, timelines: f.timelines, events: f.events,
		limit: f.count, flowIdle: f.flowIdle, maxFlows: f.maxFlows, maxPackets: f.maxPkts, names: names, recorder: rec, flight: flight,
		rulesets: &rulesets, ruleChanges: ruleChanges, ruleTraces: traced, rulesChanged: rulesChanged, losses: &flow.Losses{}})}
	for _, s := range firstRulesets {
		run.p.addRuleset(s)
	}
	// Signals are taken before anyone is told nettrace is ready: an
	// interrupt from then on stops it cleanly.
	run.sig = make(chan os.Signal, 1)
	signal.Notify(run.sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(run.sig)
	if f.readyFile != "" {
		if err := os.WriteFile(f.readyFile, []byte("ready\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
		defer os.Remove(f.readyFile)
	}
	if !explicitNetns {
		run.rescan = func() {
			for _, t := range netns.Named() {
				if err := tr.WatchNamespace(t); err != nil {
					log.Warn().Err(err).Str("netns", t.Name).Msg("new namespace not watched")
				}
				if syn != nil {
					syn.AddNamespace(t)
				}
				if rules != nil {
					rules.Add(t)
				}
				if tracer != nil {
					tracer.Add(t)
				}
			}
		}
	}
	start := time.Now()
	err = run.loop()
	if status != nil {
		status.clear()
	}
	run.countLosses()
	lost, lerr := tr.Lost()
	shed, serr := tr.Shed()
	if err := errors.Join(lerr, serr); err != nil {
		log.Warn().Err(err).Msg("lost counters unavailable")
	}
	if missed, err := tr.Missed(); err != nil {
		log.Debug().Err(err).Msg("recursion counters unavailable")
	} else {
		for prog, n := range missed {
			log.Warn().Str("program", prog).Uint64("missed", n).
				Msg("the kernel skipped this program where it was already running on the CPU (an interrupt re-entered it): what those runs would have reported is missing")
		}
	}
	if tracer != nil {
		tracer.Sync()
	}
	run.p.finish(lost, shed, time.Since(start))
	if tracer != nil && (tracer.Lost() > 0 || unrecorded.Load() > 0) {
		log.Warn().Uint64("lost_by_the_kernel", tracer.Lost()).Uint64("not_recorded", unrecorded.Load()).
			Msg("some rule traces were not kept: those packets' rules are named from the ruleset")
	}
	if rec != nil {
		st, cerr := rec.Close(trace.Summary{Events: pointNames(run.p.counts), Lost: pointNames(lost), Shed: pointNames(shed), Ended: time.Now().UTC()})
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
	if flight != nil {
		log.Info().Str("dir", f.flight.dir).Strs("kept", run.p.flightKept).Msg("flight recorder")
	}
	if err == nil {
		err = run.p.err
	}
	return err
}

// flightMemory bounds the events the flight recorder holds.
const flightMemory = 512 << 20

// recordedKernel and recordedPoints put what the kernel allowed into a
// recording's terms: the format depends on nothing in internal/.
func recordedKernel(f kernel.Facts) trace.Kernel {
	return trace.Kernel{Release: f.Release, BTF: f.BTF, Lockdown: f.Lockdown, Kprobes: f.Kprobes}
}

func recordedPoints(sts []probe.Status) []trace.Point {
	out := make([]trace.Point, 0, len(sts))
	for _, s := range sts {
		p := trace.Point{Point: s.Point, Method: string(s.Method), Target: s.Target, Note: s.Note}
		for _, a := range s.Skipped {
			p.Unavailable = append(p.Unavailable, trace.Unavailable{Method: string(a.Method), Reason: a.Reason})
		}
		out = append(out, p)
	}
	return out
}

func containsString(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// watchRun is one capture's read loop. It runs on one goroutine: the ring
// buffer read wakes at least every tick for the periodic work (stop
// conditions, unanswered SYNs, idle flows, new namespaces, flushing the
// recording).
type watchRun struct {
	tr  *probe.Tracer
	syn *synwatch.Watcher
	// synJudges: syn is the syn point's method (it judges SYNs itself),
	// not only the completer of the kernel's judgements.
	synJudges bool
	f         watchFlags
	rescan    func()
	log       zerolog.Logger
	p         *pipeline
	sig       chan os.Signal // SIGINT and SIGTERM
	// status is the terminal's status line (nil when stderr is not a
	// terminal), drawn every statusEvery from what was counted since.
	status      *statusLine
	statusAt    time.Time
	statusStart time.Time
	statusTotal uint64
	// undelivered is the kernel's count of records lost or shed at the
	// last count, made at kernel time counted (less lossSlack).
	undelivered uint64
	counted     uint64
}

// lossSlack is how long a record may take from its timestamp to being
// counted lost: a count at kernel time t covers the losses before
// t-lossSlack for sure.
const lossSlack = 50 * time.Millisecond

// countLosses reads the kernel's loss counters and tells the pipeline
// which window lost how many records, and how far losses are counted.
func (r *watchRun) countLosses() {
	now := kernel.MonotonicNow()
	n, err := r.tr.Undelivered()
	if err != nil {
		// Nothing is counted: every flow from now on waits for the count
		// at the end, which stays as conservative as the run can be.
		r.log.Debug().Err(err).Msg("lost counters unavailable")
		return
	}
	through := now - min(now, uint64(lossSlack))
	r.p.lossesCounted(event.LossWindow{From: r.counted, To: now, N: n - r.undelivered}, through)
	r.undelivered, r.counted = n, through
}

const statusEvery = time.Second

// refreshStatus redraws the status line when it is due.
func (r *watchRun) refreshStatus() {
	if r.status == nil {
		return
	}
	now := time.Now()
	if r.statusStart.IsZero() {
		r.statusStart, r.statusAt = now, now
		return
	}
	elapsed := now.Sub(r.statusAt)
	if elapsed < statusEvery {
		return
	}
	var lost uint64
	if perPoint, err := r.tr.Lost(); err == nil {
		for _, n := range perPoint {
			lost += n
		}
	}
	rate := float64(r.p.total-r.statusTotal) / elapsed.Seconds()
	r.status.show(statusText(rate, r.p.corr.Stats().Active, r.p.found.Load(), lost, now.Sub(r.statusStart)))
	r.statusAt, r.statusTotal = now, r.p.total
}

const tick = 100 * time.Millisecond

func (r *watchRun) loop() error {
	var deadline time.Time
	if r.f.duration > 0 {
		deadline = time.Now().Add(r.f.duration)
	}
	var rec ringbuf.Record
	var ev event.Event
	lastRescan, lastJudged, lastTick := time.Now(), time.Now(), time.Now()
	stopping := false
	for {
		if !stopping {
			select {
			case s := <-r.sig:
				if r.status != nil {
					r.status.clear()
				}
				r.log.Info().Str("signal", s.String()).Msg("stopping")
				stopping = true
			default:
			}
			if (!deadline.IsZero() && time.Now().After(deadline)) || r.p.full() {
				stopping = true
			}
		}
		if stopping {
			// Drain what is already in the ring buffer, then stop.
			r.tr.SetDeadline(time.Now())
		} else {
			r.tr.SetDeadline(time.Now().Add(tick))
		}
		err := r.tr.ReadInto(&rec)
		switch {
		case err == nil:
			if derr := event.DecodeKernel(rec.RawSample, &ev); derr != nil {
				r.log.Warn().Err(derr).Msg("undecodable record")
				continue
			}
			if r.syn != nil {
				r.syn.Complete(&ev)
			}
			r.p.event(&ev)
			if r.synJudges {
				r.syn.Observe(&ev, r.p.event)
				// Judged on a clock: a busy ring buffer is never idle.
				if time.Since(lastJudged) >= tick {
					r.syn.Expire(false, r.p.event)
					lastJudged = time.Now()
				}
			}
			// Flows end, held events expire and the recording is
			// flushed on a clock too: a busy ring buffer never idles.
			// At the time of the event just read, not the clock's: the
			// ring buffer may hold seconds of later events, and a flow
			// idle by the clock may have its next events there.
			if time.Since(lastTick) >= tick {
				r.countLosses()
				r.p.tick(ev.Time)
				r.refreshStatus()
				lastTick = time.Now()
			}
			if r.p.err != nil {
				return r.p.err
			}
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrClosed):
			stopping = true
		default:
			return fmt.Errorf("read ring buffer: %w", err)
		}
		if r.synJudges {
			r.syn.Expire(stopping, r.p.event)
			lastJudged = time.Now()
		}
		if stopping {
			return r.p.err
		}
		r.countLosses()
		r.p.tick(kernel.MonotonicNow())
		r.refreshStatus()
		lastTick = time.Now()
		if r.rescan != nil && time.Since(lastRescan) > time.Second {
			r.rescan()
			lastRescan = time.Now()
		}
	}
}

// byteSize is a size flag: a number alone is millions of bytes (tcpdump's
// -C), or with a suffix k, M, G (powers of 1000).
type byteSize int64

func (b *byteSize) String() string {
	if *b == 0 {
		return "0"
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Type() string { return "size" }

func (b *byteSize) Set(s string) error {
	mult := int64(1_000_000)
	num := strings.TrimSuffix(strings.TrimSuffix(s, "B"), "b")
	if n := len(num); n > 0 {
		switch num[n-1] {
		case 'k', 'K':
			mult, num = 1_000, num[:n-1]
		case 'm', 'M':
			mult, num = 1_000_000, num[:n-1]
		case 'g', 'G':
			mult, num = 1_000_000_000, num[:n-1]
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a size such as 100 (millions of bytes), 500k, 20M or 1G", s)
	}
	*b = byteSize(v * float64(mult))
	return nil
}
