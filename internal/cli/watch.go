package cli

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/engine"
	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/kube"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/internal/output"
	"github.com/nettrace-dev/nettrace/internal/probe"
	"github.com/nettrace-dev/nettrace/internal/ruletrace"
	"github.com/nettrace-dev/nettrace/pkg/flow"
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
	flight    engine.FlightOptions
	all       bool
	rules     bool
	healthy   healthyValue
	held      uint32
	// kubeconfig is the Kubernetes API's client configuration; "" in a
	// pod is its ServiceAccount, "none" no API.
	kubeconfig string
	// nodeName is what recordings call this host.
	nodeName string
	// metrics is where Prometheus metrics are served; "" for nowhere.
	metrics string
}

// captureFlags are the flags of every command that attaches (watch, record).
func captureFlags(fl *pflag.FlagSet, f *watchFlags) {
	fl.StringSliceVar(&f.netns, "netns", nil, "network namespace to watch: NAME under /run/netns, PATH, or all (repeatable)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until interrupted)")
	fl.Uint64Var(&f.count, "count", 0, "stop after this many events (default: no limit)")
	fl.StringVar(&f.readyFile, "ready-file", "", "create this file once every available point is attached (and, with a Kubernetes API, pods, nodes and Services are listed)")
	fl.Uint32Var(&f.ringSize, "ring-size", 32<<20, "ring buffer size in bytes (power of two); 32 MiB holds about a third of a second of a busy node's records")
	fl.StringSliceVar(&f.methods, "method", nil, "force a method for a point: POINT=METHOD (repeatable)")
	fl.Uint32Var(&f.snapLen, "snaplen", defaultSnapLen, fmt.Sprintf("bytes of each packet kept, from its IP header (0 to %d); 128 holds IP, TCP/UDP, vxlan and the inner headers", probe.MaxSnapLen))
	fl.StringVarP(&f.write, "write", "w", "", "also record to `FILE` (replay it with nettrace replay)")
	fl.VarP(&f.fileSize, "file-size", "C", "with -w: split the recording into files of this size (FILE.1, FILE.2, ...; a number alone is millions of bytes, as tcpdump's -C; or 500k, 20M, 1G), each replayable alone")
	fl.IntVarP(&f.files, "files", "W", 0, "with -C: keep only the newest this many files, removing the oldest")
	fl.StringVar(&f.flight.Dir, "flight", "", "flight recorder: keep the last events in memory and write the window around each finding's flow to a file of its own in `DIR`")
	fl.DurationVar(&f.flight.Before, "flight-before", 10*time.Second, "flight recorder: events kept before a finding's flow")
	fl.DurationVar(&f.flight.After, "flight-after", 5*time.Second, "flight recorder: events kept after a finding's flow")
	fl.IntVar(&f.flight.Keep, "keep", 20, "flight recorder: keep only the newest this many files (0: all)")
	fl.BoolVar(&f.all, "all-packets", false, "report every data and ACK segment of established TCP connections (by default: only their drops)")
	fl.Var(&f.healthy, "healthy", "what a healthy TCP connection costs, with no filter: ship (every record reaches nettrace) or count (the kernel holds a connection's records while it looks healthy, ships them whole if it shows trouble, and only counts it if it ends normally; needs Linux 6.12 or later: an older verifier refuses it, and every record ships, with a warning)")
	fl.Uint32Var(&f.held, "held", probe.DefaultHeldRecords, "with --healthy count: records the kernel holds at once (about 4.9 KB of kernel memory each); past it the oldest go, and a connection in trouble that lacks them is incomplete")
	fl.StringVar(&netns.CNICacheDir, "cni-cache", netns.CNICacheDir, "where libcni keeps each sandbox's network (containerd, CRI-O, podman): namespaces of Kubernetes pods are named after their pod from it (pod:NAMESPACE/NAME); under a mounted host root (/host/var/lib/cni/results), its sandboxes are found under that root")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "name pods (also those deleted in the last "+kube.Keep.String()+"), nodes and Services from the Kubernetes API with this `FILE`: a read-only list and watch of pods, nodes and services; in a pod its ServiceAccount is used without it; none: no API")
	fl.StringVar(&f.nodeName, "node-name", os.Getenv("NODE_NAME"), "what recordings call this host, and a replay of several names their namespaces after (default: $NODE_NAME, which the DaemonSet sets to the node's name, else the host name)")
	fl.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://`ADDR`/metrics (host:port, :9476 for every address): findings by rule, namespace and pod; records lost and shed; flows incomplete; nettrace's CPU and memory")
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
(--timelines all shows it whole, --timelines findings not at all). With
-o json the same flows are JSON objects, one a line (a flow where nothing
went wrong: its packets without their steps); --events adds every event
as it comes, in text or JSON. With -o html, watch writes one page when it
ends: an overview, and each flow with a finding as a sequence diagram.

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
  nettrace watch --netns n1 --netns n2 -o json 'net 10.244.0.0/16' > flows.jsonl
  nettrace watch -o json --events --timelines all 'port 53' > everything.jsonl
  nettrace watch -w incident.ntrace --duration 30s 'port 30285'
  nettrace watch -o html --duration 60s 'port 30285' > incident.html
  nettrace watch --rules 'tcp and dst port 30285'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			return runCapture(log, g.summarize(log), f, strings.Join(args, " "), cmd.Flags().Changed("netns"))
		},
	}
	fl := cmd.Flags()
	captureFlags(fl, &f)
	fl.StringVarP(&f.format, "output", "o", "text", formatHelp)
	timelinesFlag(fl, &f.timelines)
	eventsFlag(fl, &f.events)
	fl.DurationVar(&f.flowIdle, "flow-timeout", flow.DefaultConfig.Idle, "a flow ends (and is explained) after this long without events (a connection whose sockets all closed: 1s, or this if shorter)")
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
nothing.

To leave a recorder on for days with no filter (the DaemonSet's), add
--healthy count: the kernel holds each IPv4 TCP connection's records while
it looks healthy, ships them whole the moment it shows trouble (a drop, a
SYN or SYN-ACK sent again, a refusal, a reset before the handshake, an
INVALID verdict), and only counts it if it ends normally. A healthy
connection then costs the node a count instead of a dozen records; the
closing summary says how many were kept, and how many shipped.`,
		Example: `  nettrace record -w incident.ntrace --duration 60s 'host 10.96.0.10'
  nettrace record -w /var/tmp/node.ntrace -C 100 -W 20 'port 30285'   # at most 20 files of 100 MB
  nettrace replay /var/tmp/node.ntrace.*
  nettrace record --flight /var/tmp/failures --keep 50 'port 30285'   # only each failure, with 10 s before and 5 s after
  nettrace record --netns all --flight /var/lib/nettrace/flight --keep 50 --healthy count   # always on, every connection
  nettrace record -w incident.ntrace --rules 'host 10.96.0.10'
  nettrace replay incident.ntrace`,
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if f.write == "" && f.flight.Dir == "" {
				return usageError{errors.New("record needs -w FILE, or --flight DIR")}
			}
			f.format = "none"
			return runCapture(log, g.summarize(log), f, strings.Join(args, " "), cmd.Flags().Changed("netns"))
		},
	}
	captureFlags(cmd.Flags(), &f)
	f.flowIdle, f.maxFlows, f.maxPkts = flow.DefaultConfig.Idle, flow.DefaultConfig.MaxFlows, flow.DefaultConfig.MaxPackets
	return cmd
}

// checkFlowFlags checks the flags that bound flows, of every command that
// shows them.
func checkFlowFlags(idle time.Duration, maxFlows, maxPackets int) error {
	switch {
	case idle <= 0:
		return usageError{fmt.Errorf("--flow-timeout %s: want a duration above zero, such as 5s", idle)}
	case maxFlows < 1:
		return usageError{fmt.Errorf("--max-flows %d: want at least 1", maxFlows)}
	case maxPackets < 1:
		return usageError{fmt.Errorf("--max-packets %d: want at least 1", maxPackets)}
	}
	return nil
}

// tracedBacklog bounds the trace steps waiting to be recorded: past it
// steps are counted and not recorded (a recording replayed names those
// packets' rules from the ruleset).
const tracedBacklog = 1 << 14

// defaultSnapLen holds IP, TCP/UDP, vxlan and the inner headers.
const defaultSnapLen = 128

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

// healthyValue is the --healthy flag: whether the kernel holds healthy
// connections' records (count) or ships them all (ship).
type healthyValue struct{ count bool }

func (v *healthyValue) String() string {
	if v.count {
		return "count"
	}
	return "ship"
}

func (v *healthyValue) Type() string { return "ship|count" }

func (v *healthyValue) Set(s string) error {
	switch s {
	case "ship", "count":
		v.count = s == "count"
		return nil
	}
	return fmt.Errorf("%q: want ship or count", s)
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

// timelinesValue is the --timelines flag of the commands that show flows.
type timelinesValue struct{ t *output.Timelines }

func (v timelinesValue) String() string { return v.t.String() }
func (v timelinesValue) Type() string   { return "brief|findings|all" }
func (v timelinesValue) Set(s string) (err error) {
	*v.t, err = output.ParseTimelines(s)
	return err
}

// timelinesFlag adds --timelines to a command's flags.
func timelinesFlag(fl *pflag.FlagSet, t *output.Timelines) {
	fl.Var(timelinesValue{t}, "timelines", "flows without a finding shown as one line each, at most "+
		strconv.Itoa(engine.BriefLinesPerSecond)+" a second, the rest counted (brief; json: every such flow, its packets without their steps); not at all (findings); or whole, as flows with one (all)")
}

// eventsFlag adds --events to a command's flags.
func eventsFlag(fl *pflag.FlagSet, events *bool) {
	fl.BoolVar(events, "events", false, "also show every event as it comes (a line each; json: an object each)")
}
