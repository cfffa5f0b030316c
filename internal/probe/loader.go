package probe

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/rs/zerolog"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/nettrace-dev/nettrace/internal/kernel"
	"github.com/nettrace-dev/nettrace/internal/netns"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/filter"
)

// Options configure which packets are observed and how.
type Options struct {
	Filter *filter.Program
	// Namespaces get the netfilter programs; with RestrictNetns, events from
	// any other namespace are discarded in the kernel.
	Namespaces    []netns.Target
	RestrictNetns bool
	// RingBytes is the ring buffer size (a power of two, multiple of the page size).
	RingBytes uint32
	// Methods forces a method per point name (for comparing methods).
	Methods    map[string]Method
	VXLANPorts [2]uint16
	// SnapLen is how many bytes of each packet, from its IP header, events
	// carry (at most MaxSnapLen).
	SnapLen uint32
	// AllPackets reports the data and ACK segments of established TCP
	// connections too (by default only their drops are).
	AllPackets bool
	// HealthyCount has the kernel hold the records of IPv4 TCP connections
	// while they look healthy (bpf/include/gate.h): one that ends normally
	// is only counted, one that shows trouble ships whole. Only without a
	// filter. HeldRecords bounds the records held at once (0: the default).
	HealthyCount bool
	HeldRecords  uint32
	Log          zerolog.Logger
}

// MaxSnapLen is the largest packet prefix events carry (NT_SNAP_MAX).
const MaxSnapLen = 256

// Attempt is a method tried for a point and why it was not used.
type Attempt struct {
	Method Method `json:"method"`
	Reason string `json:"reason"`
}

// Status says how one observation point is attached, or why it is not.
type Status struct {
	Point   string    `json:"point"`
	Method  Method    `json:"method,omitempty"`
	Target  string    `json:"target,omitempty"`
	Note    string    `json:"note,omitempty"`
	Skipped []Attempt `json:"unavailable,omitempty"`
	// AttachMS is what loading and attaching the point took, every method
	// tried included: where a slow start goes.
	AttachMS float64 `json:"attach_ms"`
}

// Active says whether the point observes anything.
func (s Status) Active() bool { return s.Method != "" }

// sharedMaps are created once and handed to every object: one ring buffer,
// one set of followed packets and conntrack entries.
var sharedMaps = []string{"events", "lost", "tracked_skb", "tracked_ct", "tracked_tuple", "watched_netns", "nat_slots", "tracking",
	"skb_ids", "synack_slots", "synack_noted", "listeners", "journeys", "conns", "held", "held_scratch", "gate_stats"}

// Attachment is one program attached somewhere in the kernel: what a
// packet pays for before any program body runs. Benchmarks attach empty
// programs at the same places to measure that floor.
type Attachment struct {
	Point   string `json:"point"`
	Program string `json:"program"`
	Method  Method `json:"method"`
	// Target is the function or tracepoint (group/name for MethodTracepoint);
	// for MethodNetfilter, the namespace path.
	Target string `json:"target"`
	// Return marks a kretprobe or fexit.
	Return   bool   `json:"return,omitempty"`
	Hook     uint32 `json:"hook,omitempty"`
	Priority int32  `json:"priority,omitempty"`
	// Family is a netfilter link's protocol family (ipv4, ipv6).
	Family string `json:"family,omitempty"`
}

// Tracer is the attached set of observation points.
type Tracer struct {
	opts      Options
	facts     kernel.Facts
	syms      *kernel.Symbols
	maps      map[string]*ebpf.Map
	colls     []*ebpf.Collection
	links     []link.Link
	statuses  []Status
	netfilter *netfilterSet // when the nat point uses the netfilter method
	// siteHandlers are the handlers each site runs, by site name.
	siteHandlers map[string][]siteHandler
	attachments  []Attachment
	reader       *ringbuf.Reader
	AttachTime   time.Duration
	// journeyFlush runs on each of cpus CPUs to send their pending packet
	// journeys (journey.go).
	journeyFlush *ebpf.Program
	cpus         int
	// missingKfuncs are the weak kfuncs this kernel lacks (kfunc.go).
	missingKfuncs []string
	// verifierRefusal is the first program the verifier refused, in its
	// words; gateRefused why the gate asked for does not run (gate.go).
	verifierRefusal string
	gateRefused     error
	// trampolinesErr is why fentry attaches to no kernel function here,
	// once trampolinesTried (trampoline.go).
	trampolinesTried bool
	trampolinesErr   error
}

// Open loads and attaches every observation point it can. It fails only
// when nothing can be observed at all (no privileges, no BTF, BPF refused).
// A gate the kernel refuses (gate.go) is given up for the points it cost.
func Open(opts Options, facts kernel.Facts, syms *kernel.Symbols) (*Tracer, error) {
	if !facts.BTF {
		return nil, errors.New("this kernel has no BTF (/sys/kernel/btf/vmlinux): nettrace needs CONFIG_DEBUG_INFO_BTF=y")
	}
	t, err := open(opts, facts, syms)
	if !gateAsked(opts) || (err == nil && t.verifierRefusal == "") {
		return t, err
	}
	return reopenWithoutGate(t, err, opts, facts, syms)
}

func open(opts Options, facts kernel.Facts, syms *kernel.Symbols) (*Tracer, error) {
	start := time.Now()
	t := &Tracer{opts: opts, facts: facts, syms: syms, maps: map[string]*ebpf.Map{},
		siteHandlers: map[string][]siteHandler{}}
	missing, err := missingKfuncs()
	if err != nil {
		return nil, err
	}
	t.missingKfuncs = missing
	if err := t.createMaps(); err != nil {
		t.Close()
		return nil, err
	}
	for _, p := range points {
		t.statuses = append(t.statuses, t.attachPoint(p))
	}
	t.attachSites()
	if t.activePoints() == 0 {
		t.Close()
		return nil, fmt.Errorf("no observation point could be attached: %s", t.statuses[0].Skipped[0].Reason)
	}
	if err := t.loadJourneyFlush(); err != nil {
		t.Close()
		return nil, err
	}
	rd, err := ringbuf.NewReader(t.maps["events"])
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("open ring buffer reader: %w", err)
	}
	t.reader = rd
	t.AttachTime = time.Since(start)
	return t, nil
}

// activePoints counts the points attached in the kernel.
func (t *Tracer) activePoints() int {
	active := 0
	for _, s := range t.statuses {
		if s.Active() && s.Method != MethodUser {
			active++
		}
	}
	return active
}

// createMaps creates the shared maps from the journey object's
// definitions: every object has them (bpf/include/maps.h), and the journey
// object is the smallest to parse (20 KB; the NAT object is 1.4 MB, and
// its point parses it again).
func (t *Tracer) createMaps() error {
	spec, err := loadJourney()
	if err != nil {
		return fmt.Errorf("load BPF object: %w", err)
	}
	for _, name := range sharedMaps {
		ms := spec.Maps[name].Copy()
		if name == "events" && t.opts.RingBytes != 0 {
			ms.MaxEntries = t.opts.RingBytes
		}
		t.sizeGateMap(ms)
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return describeLoadError(fmt.Errorf("create map %s: %w", name, err))
		}
		t.maps[name] = m
	}
	if t.opts.RestrictNetns {
		one := uint8(1)
		for _, ns := range t.opts.Namespaces {
			if err := t.maps["watched_netns"].Put(ns.Inode, one); err != nil {
				return fmt.Errorf("watch netns %s: %w", ns.Name, err)
			}
		}
	}
	return nil
}

// describeLoadError turns the errors every user hits first into one line.
func describeLoadError(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("%w (nettrace needs root, or CAP_BPF with CAP_PERFMON and CAP_NET_ADMIN)", err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%w (this kernel lacks a BPF feature nettrace needs)", err)
	}
	return err
}

func (t *Tracer) configure(spec *ebpf.CollectionSpec) error {
	set := func(name string, v any) error {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("BPF object has no variable %s", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	var prog [filter.MaxInsns]natNtFilterInsn
	n := 0
	if t.opts.Filter != nil {
		for i, in := range t.opts.Filter.Insns {
			addr, mask, ipv6 := in.Words()
			prog[i] = natNtFilterInsn{Op: uint8(in.Op), Dir: uint8(in.Dir), Proto: in.Proto,
				Port: in.Port, PortEnd: in.PortEnd, Addr: addr, Mask: mask}
			if ipv6 {
				prog[i].Ipv6 = 1
			}
		}
		n = len(t.opts.Filter.Insns)
	}
	restrict, all := uint32(0), uint32(0)
	if t.opts.RestrictNetns {
		restrict = 1
	}
	if t.opts.AllPackets {
		all = 1
	}
	ports := t.opts.VXLANPorts
	if ports == [2]uint16{} {
		ports = [2]uint16{4789, 8472}
	}
	for _, kv := range []struct {
		name string
		v    any
	}{{"filter_len", uint32(n)}, {"filter_prog", prog}, {"netns_filter", restrict}, {"snap_len", t.opts.SnapLen}, {"all_packets", all},
		{"vxlan_port_a", ports[0]}, {"vxlan_port_b", ports[1]}, {"healthy_count", t.gateFlag()}} {
		if err := set(kv.name, kv.v); err != nil {
			return err
		}
	}
	// The syn object's listener function range, where this kernel has it.
	if _, ok := spec.Variables["listen_fn_start"]; ok {
		start, end, _ := t.syms.Range(listenFunc)
		if err := set("listen_fn_start", start); err != nil {
			return err
		}
		return set("listen_fn_end", end)
	}
	return nil
}

// listenFunc is where a SYN handed to a listener is consumed, whether it
// was queued or dropped.
const listenFunc = "tcp_rcv_state_process"

// synConsumeUsable says whether the syn point's tracepoint method can tell
// a queued SYN from a dropped one here: it needs consume_skb's location
// argument, the address of the listener function, and the nat point's
// netfilter programs, which note each SYN-ACK at OUTPUT.
func (t *Tracer) synConsumeUsable() error {
	if _, _, ok := t.syms.Range(listenFunc); !ok {
		return fmt.Errorf("the address of %s is not readable in /proc/kallsyms", listenFunc)
	}
	if !tracepointHasArgs("consume_skb", 2) {
		return errors.New("consume_skb has no location argument on this kernel (Linux 6.3+)")
	}
	if t.Status("nat").Method != MethodNetfilter {
		return errors.New("needs the nat point's netfilter programs to see SYN-ACKs at OUTPUT")
	}
	return nil
}

// rerouteLookupAttributable says why the FIB lookup tracepoint cannot name
// the packet a re-route is for, if it cannot. The lookup carries no
// packet: it is attributed to the one whose OUTPUT NAT is in progress on
// its CPU, and only the nat point's netfilter programs bracket the whole
// NAT hook, re-route included. fentry and kprobe return with NAT's
// function, before OUTPUT re-routes the packet, and every lookup would go
// unattributed (measured on 6.1: no re-route reported).
func (t *Tracer) rerouteLookupAttributable() error {
	if t.Status("nat").Method != MethodNetfilter {
		return errors.New("needs the nat point's netfilter programs (Linux 6.4+) to tell which packet a FIB lookup re-routes")
	}
	return nil
}

// tracepointHasArgs says whether a BTF tracepoint passes at least n
// arguments (its btf_trace_ typedef's prototype has a context pointer
// first).
func tracepointHasArgs(name string, n int) bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_"+name, &td); err != nil {
		return false
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	return ok && len(proto.Params) >= n+1
}

func (t *Tracer) attachPoint(p pointDef) (st Status) {
	start := time.Now()
	st.Point = p.name
	defer func() { st.AttachMS = msSince(start) }()
	load := p.load
	if t.gateOn() {
		load = p.loadGate
	}
	spec, err := load()
	if err == nil {
		err = t.configure(spec)
	}
	if err != nil {
		st.Skipped = append(st.Skipped, Attempt{Reason: err.Error()})
		return st
	}
	forced, isForced := t.opts.Methods[p.name]
	for _, m := range p.methods {
		if isForced && m.method != forced {
			continue
		}
		target, note, err := t.attachMethod(p.name, spec, m)
		if err != nil {
			st.Skipped = append(st.Skipped, Attempt{Method: m.method, Reason: err.Error()})
			t.opts.Log.Debug().Str("point", p.name).Str("method", string(m.method)).Err(err).Msg("method unavailable")
			continue
		}
		st.Method, st.Target, st.Note = m.method, target, note
		return st
	}
	if isForced && len(st.Skipped) == 0 {
		st.Skipped = append(st.Skipped, Attempt{Method: forced, Reason: "no such method for this point"})
	}
	return st
}

// resolve picks the first candidate this kernel has.
func (t *Tracer) resolve(m Method, p program) (string, string, error) {
	switch m {
	case MethodFentry, MethodKprobe:
		for i, c := range p.candidates {
			if t.syms.Has(c) {
				note := ""
				if i > 0 {
					note = fmt.Sprintf("%s is inlined here; using %s", strings.Join(p.candidates[:i], ", "), c)
				}
				return c, note, nil
			}
		}
		return "", "", fmt.Errorf("%s not in /proc/kallsyms (inlined, or its module is not loaded)", strings.Join(p.candidates, ", "))
	}
	// Tracepoints have one name; netfilter and user-space methods none.
	if len(p.candidates) > 0 {
		return p.candidates[0], "", nil
	}
	return "", "", nil
}

// methodUsable says why a method cannot be used here, if it cannot.
func (t *Tracer) methodUsable(m methodDef) error {
	if m.method == MethodFentry {
		if err := t.trampolinesAttach(); err != nil {
			return err
		}
	}
	if m.requires != nil {
		if err := m.requires(t); err != nil {
			return err
		}
	}
	switch m.method {
	case MethodKprobe:
		if !t.facts.Kprobes {
			return errors.New("kprobes not built into this kernel (no kprobe PMU: CONFIG_KPROBES is not set)")
		}
	case MethodUser:
		// The SYN outcome is judged from the listener's queues: without
		// sock_diag it cannot be.
		if _, err := netlink.SocketDiagTCP(unix.AF_INET); err != nil {
			return fmt.Errorf("sock_diag unavailable (is the tcp_diag module loaded?): %w", err)
		}
	case MethodTracepoint:
		return kernel.EnsureTracefs(func(what, where string) {
			t.opts.Log.Info().Str("fs", what).Str("at", where).Msg("mounted")
		})
	}
	return nil
}

// linkProgram attaches a loaded program by a method other than netfilter
// (linked per namespace) to its target; ret says a kprobe's is a return
// probe.
func linkProgram(method Method, prog *ebpf.Program, target string, ret bool) (link.Link, error) {
	switch method {
	case MethodFentry, MethodTpBTF:
		return link.AttachTracing(link.TracingOptions{Program: prog})
	case MethodKprobe:
		if ret {
			return link.Kretprobe(target, prog, nil)
		}
		return link.Kprobe(target, prog, nil)
	case MethodTracepoint:
		group, name, _ := strings.Cut(target, "/")
		return link.Tracepoint(group, name, prog, nil)
	}
	return nil, fmt.Errorf("no program is linked by method %q", method)
}

// methodPlan is what attaching a method's programs takes: the spec of the
// programs it loads itself and their targets, the handlers it enables in
// the shared sites, and what to say of it.
type methodPlan struct {
	spec         *ebpf.CollectionSpec
	targets      map[string]string // the programs it loads, by name
	names, notes []string
	handlers     []siteHandler
}

// planMethod resolves the targets of a method's programs.
func (t *Tracer) planMethod(point string, base *ebpf.CollectionSpec, m methodDef) (*methodPlan, error) {
	pl := &methodPlan{spec: base.Copy(), targets: map[string]string{}}
	for _, p := range m.programs {
		target, note, err := t.resolve(m.method, p)
		if err != nil {
			return nil, err
		}
		if note != "" {
			pl.notes = append(pl.notes, note)
		}
		if target != "" && (len(pl.names) == 0 || pl.names[len(pl.names)-1] != target) {
			pl.names = append(pl.names, target)
		}
		if p.site != "" {
			if !tracepointHasArgs(sites[p.site].tracepoint, 1) {
				return nil, fmt.Errorf("no BTF tracepoint %s in this kernel", sites[p.site].tracepoint)
			}
			pl.handlers = append(pl.handlers, siteHandler{point: point, name: p.name, site: p.site})
			continue
		}
		pl.targets[p.name] = target
		if m.method == MethodFentry {
			pl.spec.Programs[p.name].AttachTo = target
		}
	}
	for name := range pl.spec.Programs {
		if _, own := pl.targets[name]; !own {
			delete(pl.spec.Programs, name)
		}
	}
	return pl, nil
}

func (t *Tracer) attachMethod(point string, base *ebpf.CollectionSpec, m methodDef) (string, string, error) {
	if err := t.methodUsable(m); err != nil {
		return "", "", err
	}
	if m.method == MethodUser {
		return "", "SYN outcome from SYNs arriving without a SYN-ACK, sock_diag and TcpExt counters", nil
	}
	pl, err := t.planMethod(point, base, m)
	if err != nil {
		return "", "", err
	}
	spec, targets, names, notes, handlers := pl.spec, pl.targets, pl.names, pl.notes, pl.handlers
	fail := func(err error) (string, string, error) {
		err = t.explain(m.method, err)
		if len(notes) > 0 {
			err = fmt.Errorf("%w (%s)", err, strings.Join(dedup(notes), "; "))
		}
		return "", "", err
	}
	var coll *ebpf.Collection
	var links []link.Link
	var attached []Attachment
	if len(targets) > 0 {
		if coll, err = t.newCollection(spec); err != nil {
			return fail(err)
		}
	}
	for _, p := range m.programs {
		// Netfilter programs are linked per namespace below, once every
		// program is loaded.
		if p.site != "" || m.method == MethodNetfilter {
			continue
		}
		ret := strings.HasPrefix(spec.Programs[p.name].SectionName, "kretprobe/") || strings.HasPrefix(spec.Programs[p.name].SectionName, "fexit/")
		linkStart := time.Now()
		l, err := linkProgram(m.method, coll.Programs[p.name], targets[p.name], ret)
		t.opts.Log.Debug().Str("program", p.name).Str("target", targets[p.name]).Float64("ms", msSince(linkStart)).Err(err).Msg("linked")
		if err != nil {
			closeAll(links)
			coll.Close()
			return fail(err)
		}
		links = append(links, l)
		attached = append(attached, Attachment{Point: point, Program: p.name, Method: m.method, Target: targets[p.name], Return: ret})
	}
	if m.method == MethodNetfilter {
		nf, err := newNetfilterSet(coll, t.opts.Log)
		if err == nil {
			if err = nf.attachAll(t.opts.Namespaces); err != nil {
				nf.close()
			}
		}
		if err != nil {
			coll.Close()
			return "", "", t.explain(m.method, err)
		}
		t.netfilter = nf
		names = []string{fmt.Sprintf("after the NAT of 4 hooks (and before OUTPUT's) in %d netns, while conntrack runs there", nf.namespaces())}
	}
	if coll != nil {
		t.colls = append(t.colls, coll)
	}
	t.links = append(t.links, links...)
	t.attachments = append(t.attachments, attached...)
	for _, h := range handlers {
		t.siteHandlers[h.site] = append(t.siteHandlers[h.site], h)
	}
	if m.note != "" {
		notes = append(notes, m.note)
	}
	return strings.Join(dedup(names), ", "), strings.Join(dedup(notes), "; "), nil
}

// newCollection loads an object with the shared maps in place of its own.
func (t *Tracer) newCollection(spec *ebpf.CollectionSpec) (*ebpf.Collection, error) {
	replacements := make(map[string]*ebpf.Map, len(t.maps))
	for name, mp := range t.maps {
		replacements[name] = mp
		// A shared map created with another size than the object's
		// (--ring-size) replaces it only if the object says that size too.
		if ms := spec.Maps[name]; ms != nil {
			ms.MaxEntries = mp.MaxEntries()
		}
	}
	dropMissingKfuncs(spec, t.missingKfuncs)
	start := time.Now()
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{MapReplacements: replacements})
	t.opts.Log.Debug().Strs("programs", slices.Sorted(maps.Keys(spec.Programs))).Float64("ms", msSince(start)).Err(err).Msg("loaded")
	return coll, err
}

// msSince is the milliseconds since start, to the microsecond.
func msSince(start time.Time) float64 {
	return float64(time.Since(start).Microseconds()) / 1e3
}

func dedup(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

func closeAll(links []link.Link) {
	for _, l := range links {
		if l != nil {
			l.Close()
		}
	}
}

// explain turns a load or attach failure into the reason a user can act on.
func (t *Tracer) explain(m Method, err error) error {
	var ve *ebpf.VerifierError
	switch {
	case m == MethodFentry && errors.Is(err, unix.EPERM) && t.facts.Lockdown != "none" && t.facts.Lockdown != "unknown":
		return fmt.Errorf("fentry refused: lockdown=%s", t.facts.Lockdown)
	case m == MethodNetfilter && errors.Is(err, ebpf.ErrNotSupported):
		return errors.New("BPF netfilter links not supported (Linux 6.4+ with CONFIG_NETFILTER_BPF_LINK)")
	case errors.Is(err, btf.ErrNotFound):
		return fmt.Errorf("not in this kernel's BTF: %w", err)
	case errors.As(err, &ve):
		// Kept for Open: a gated object the verifier refuses may be
		// loadable without the gate (gate.go).
		if t.verifierRefusal == "" {
			t.verifierRefusal = strings.TrimSpace(firstLine(ve.Error()))
		}
		return fmt.Errorf("rejected by the verifier: %s", strings.TrimSpace(firstLine(ve.Error())))
	}
	return describeLoadError(err)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Attachments lists every program attached, and where.
func (t *Tracer) Attachments() []Attachment {
	if t.netfilter == nil {
		return t.attachments
	}
	return append(slices.Clip(t.attachments), t.netfilter.attachments()...)
}

// Statuses reports every point's attachment.
func (t *Tracer) Statuses() []Status { return t.statuses }

// Status returns the status of one point.
func (t *Tracer) Status(point string) Status {
	for _, s := range t.statuses {
		if s.Point == point {
			return s
		}
	}
	return Status{Point: point}
}

// ReadInto blocks for the next raw record. It returns ringbuf.ErrClosed
// after Close, and os.ErrDeadlineExceeded when a deadline set with
// SetDeadline passes.
func (t *Tracer) ReadInto(rec *ringbuf.Record) error { return t.reader.ReadInto(rec) }

// SetDeadline makes pending and future reads return at d.
func (t *Tracer) SetDeadline(d time.Time) { t.reader.SetDeadline(d) }

// Wake interrupts a read waiting for records: it returns what the ring
// buffer holds, then ringbuf.ErrFlushed. Safe from another goroutine.
func (t *Tracer) Wake() {
	if err := t.reader.Flush(); err != nil {
		t.opts.Log.Debug().Err(err).Msg("reader not woken")
	}
}

// Lost returns the records dropped because the ring buffer was full, per point.
func (t *Tracer) Lost() (map[event.Point]uint64, error) { return t.undelivered(0) }

// Shed returns the records not sent, per point, to keep room in a filling
// ring buffer for evidence: healthy detail (device hops, route lookups)
// first, then everything but evidence of failure.
func (t *Tracer) Shed() (map[event.Point]uint64, error) { return t.undelivered(t.shedKeys()) }

// shedKeys is where the shed counters begin: the lost map holds the lost
// ones, then as many shed ones (NT_SHED_KEY).
func (t *Tracer) shedKeys() uint32 { return t.maps["lost"].MaxEntries() / 2 }

// Undelivered returns how many records never reached user space, lost or
// shed: what a flow open meanwhile may lack.
func (t *Tracer) Undelivered() (uint64, error) {
	var sum uint64
	for _, from := range []uint32{0, t.shedKeys()} {
		m, err := t.undelivered(from)
		if err != nil {
			return 0, err
		}
		for _, n := range m {
			sum += n
		}
	}
	g, err := t.Gate()
	return sum + g.Missing, err
}

// undelivered reads the lost map's counters from key from on, per point.
func (t *Tracer) undelivered(from uint32) (map[event.Point]uint64, error) {
	out := map[event.Point]uint64{}
	m := t.maps["lost"]
	for _, p := range event.Points {
		var perCPU []uint64
		if err := m.Lookup(from+uint32(p), &perCPU); err != nil {
			return nil, fmt.Errorf("read lost counters: %w", err)
		}
		for _, n := range perCPU {
			out[p] += n
		}
	}
	return out, nil
}

// Missed returns, per program that the kernel skipped at least once, how
// many times it did: a tracing program is not run again on a CPU where it
// is already running (an interrupt's softirq freed a packet while the
// program handled another), and the kernel counts each such run as a
// recursion miss. What those runs would have reported is missing.
func (t *Tracer) Missed() (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, c := range t.colls {
		for name, p := range c.Programs {
			st, err := p.Stats()
			if err != nil {
				return nil, fmt.Errorf("read the statistics of %s: %w", name, err)
			}
			if st.RecursionMisses > 0 {
				out[name] += st.RecursionMisses
			}
		}
	}
	return out, nil
}

// Close detaches everything. Links are fd-owned and nothing is pinned, so
// a killed process leaves nothing behind either.
func (t *Tracer) Close() {
	if t.reader != nil {
		t.reader.Close()
	}
	if t.netfilter != nil {
		t.netfilter.close()
		t.netfilter = nil
	}
	closeAll(t.links)
	t.links = nil
	for _, c := range t.colls {
		c.Close()
	}
	t.colls = nil
	for _, m := range t.maps {
		m.Close()
	}
	t.maps = nil
}
