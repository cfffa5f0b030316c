package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/internal/probe"
	"github.com/nettrace-dev/nettrace/internal/synwatch"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/explain"
	"github.com/nettrace-dev/nettrace/pkg/filter"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

type watchFlags struct {
	netns     []string
	duration  time.Duration
	count     uint64
	format    string
	readyFile string
	ringSize  uint32
	methods   []string
	events    bool
	flowIdle  time.Duration
	maxFlows  int
}

func newWatchCommand(g *globalFlags) *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch [FILTER]",
		Short: "Stream what the kernel does to the packets matching FILTER",
		Long: `watch attaches every observation point and prints one line (or one JSON
object) per event of the packets matching FILTER, a pcap-filter style
expression evaluated in the kernel. A packet that matched is followed after
NAT or encapsulation change its tuple, and so is its reply, through its
conntrack entry.

FILTER: host, net, port, portrange, src/dst, tcp, udp, icmp, ip,
and/or/not (&&, ||, !), parentheses. Empty: every IPv4 packet.

By default the netfilter programs (the nat point on kernels without kprobes
or fentry) are linked in the current namespace and every namespace under
/run/netns, including ones created while watch runs.`,
		Example: `  nettrace watch 'tcp and host 10.96.0.10 and port 80'
  nettrace watch --netns n1 --netns n2 -o json 'net 10.244.0.0/16' > trace.jsonl
  nettrace watch --duration 30s --count 1000 'port 30285'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			return runWatch(log, f, strings.Join(args, " "), cmd.Flags().Changed("netns"))
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.netns, "netns", nil, "network namespace to watch: NAME under /run/netns, PATH, or all (repeatable)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many events (default: no limit)")
	fl.StringVarP(&f.format, "output", "o", "text", "output format: text or json")
	fl.StringVar(&f.readyFile, "ready-file", "", "create this file once every available point is attached")
	fl.Uint32Var(&f.ringSize, "ring-size", 8<<20, "ring buffer size in bytes (power of two)")
	fl.StringSliceVar(&f.methods, "method", nil, "force a method for a point: POINT=METHOD (repeatable)")
	fl.BoolVar(&f.events, "events", false, "text: also print every event as it arrives (json always has them)")
	fl.DurationVar(&f.flowIdle, "flow-timeout", flow.DefaultConfig.Idle, "a flow ends (and is explained) after this long without events")
	fl.IntVar(&f.maxFlows, "max-flows", flow.DefaultConfig.MaxFlows, "flows kept at once; past it the oldest ends early (counted)")
	return cmd
}

func runWatch(log zerolog.Logger, f watchFlags, expr string, explicitNetns bool) error {
	if f.format != "text" && f.format != "json" {
		return usageError{fmt.Errorf("-o %q: want text or json", f.format)}
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
	if err := requireRoot("nettrace watch"); err != nil {
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
		Filter: prog, Namespaces: targets, RestrictNetns: restrict, RingBytes: f.ringSize, Methods: forced, Log: log,
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

	namer := netns.NewNamer(targets)
	names := output.Names{
		DropReason: func(r uint32) string { return reasons[r] },
		Symbol:     syms.Name,
		Netns:      namer.Name,
		Wall:       output.Monotonic(),
	}
	var w output.Writer
	var jw *output.JSON
	showEvents := f.events
	if f.format == "json" {
		jw = output.NewJSON(os.Stdout, names)
		w = jw
		showEvents = true
	} else {
		tw := output.NewText(os.Stdout, names)
		tw.Colour = isTerminal(os.Stdout)
		w = tw
	}
	var syn *synwatch.Watcher
	if tr.Status("syn").Method == probe.MethodUser {
		syn = synwatch.New(targets)
	}
	if f.readyFile != "" {
		if err := os.WriteFile(f.readyFile, []byte("ready\n"), 0o644); err != nil {
			return fmt.Errorf("write ready file: %w", err)
		}
		defer os.Remove(f.readyFile)
	}

	run := &watchRun{tr: tr, w: w, syn: syn, f: f, counts: map[event.Point]uint64{}, log: log, showEvents: showEvents,
		names: names, corr: flow.New(flow.Config{Idle: f.flowIdle, MaxFlows: f.maxFlows}), findings: map[string]uint64{}}
	if !explicitNetns {
		run.rescan = func() {
			for _, t := range netns.Named() {
				if err := tr.WatchNamespace(t); err != nil {
					log.Warn().Err(err).Str("netns", t.Name).Msg("new namespace not watched")
				}
				if syn != nil {
					syn.AddNamespace(t)
				}
			}
		}
	}
	start := time.Now()
	err = run.loop()
	lost, lerr := tr.Lost()
	if lerr != nil {
		log.Warn().Err(lerr).Msg("lost counters unavailable")
	}
	sum := output.Summary{Events: run.counts, Lost: lost, Duration: time.Since(start), Flows: run.corr.Stats(), Findings: run.findings}
	output.WriteSummary(os.Stderr, sum)
	if jw != nil {
		jw.Raw(summaryJSON(sum))
	}
	return err
}

func containsString(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

type jsonSummary struct {
	Type         string            `json:"type"`
	DurationMS   int64             `json:"duration_ms"`
	Events       map[string]uint64 `json:"events"`
	Lost         map[string]uint64 `json:"lost"`
	Flows        uint64            `json:"flows"`
	FlowsEvicted uint64            `json:"flows_evicted"`
	Findings     map[string]uint64 `json:"findings"`
}

func summaryJSON(s output.Summary) jsonSummary {
	j := jsonSummary{Type: "summary", DurationMS: s.Duration.Milliseconds(), Events: map[string]uint64{}, Lost: map[string]uint64{},
		Flows: s.Flows.Flows, FlowsEvicted: s.Flows.Evicted, Findings: s.Findings}
	for _, p := range event.Points {
		j.Events[p.String()] = s.Events[p]
		j.Lost[p.String()] = s.Lost[p]
	}
	return j
}

// watchRun is one watch session's read loop. It runs on one goroutine: the
// ring buffer read wakes at least every tick for the periodic work
// (stop conditions, unanswered SYNs, new namespaces).
type watchRun struct {
	tr         *probe.Tracer
	w          output.Writer
	syn        *synwatch.Watcher
	f          watchFlags
	rescan     func()
	counts     map[event.Point]uint64
	total      uint64
	log        zerolog.Logger
	showEvents bool
	names      output.Names
	corr       *flow.Correlator
	findings   map[string]uint64
	werr       error
}

// flowDone explains a finished flow and writes it. A flow of socket
// events alone (no packet seen) has nothing to show.
func (r *watchRun) flowDone(f *flow.Flow) {
	if len(f.Packets) == 0 {
		return
	}
	fd := explain.Explain(f, r.names)
	if fd != nil {
		r.findings[fd.Rule]++
	}
	if err := r.w.Flow(f, fd); err != nil && r.werr == nil {
		r.werr = err
	}
}

const tick = 100 * time.Millisecond

func (r *watchRun) emit(e *event.Event) {
	if r.f.count > 0 && r.total >= r.f.count {
		return
	}
	r.counts[e.Point]++
	r.total++
	if r.showEvents {
		if err := r.w.Event(e); err != nil && r.werr == nil {
			r.werr = err
		}
	}
	r.corr.Add(e, r.flowDone)
}

func (r *watchRun) loop() error {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	var deadline time.Time
	if r.f.duration > 0 {
		deadline = time.Now().Add(r.f.duration)
	}
	var rec ringbuf.Record
	var ev event.Event
	emit := r.emit
	lastRescan := time.Now()
	stopping := false
	for {
		if !stopping {
			select {
			case s := <-sig:
				r.log.Info().Str("signal", s.String()).Msg("stopping")
				stopping = true
			default:
			}
			if !deadline.IsZero() && time.Now().After(deadline) {
				stopping = true
			}
			if r.f.count > 0 && r.total >= r.f.count {
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
			if derr := event.Decode(rec.RawSample, &ev); derr != nil {
				r.log.Warn().Err(derr).Msg("undecodable record")
				continue
			}
			emit(&ev)
			if r.syn != nil {
				r.syn.Observe(&ev, emit)
			}
			if r.werr != nil {
				return fmt.Errorf("write output: %w", r.werr)
			}
			continue
		case errors.Is(err, os.ErrDeadlineExceeded):
		case errors.Is(err, ringbuf.ErrClosed):
			stopping = true
		default:
			return fmt.Errorf("read ring buffer: %w", err)
		}
		if r.syn != nil {
			r.syn.Expire(stopping, emit)
		}
		if stopping {
			r.corr.Flush(r.flowDone)
			return r.werr
		}
		r.corr.Expire(kernel.MonotonicNow(), r.flowDone)
		if r.rescan != nil && time.Since(lastRescan) > time.Second {
			r.rescan()
			lastRescan = time.Now()
		}
	}
}
