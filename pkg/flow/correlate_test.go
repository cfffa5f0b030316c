package flow

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

func run(cfg Config, events []event.Event) (*Correlator, []*Flow) {
	c := New(cfg)
	var out []*Flow
	done := func(f *Flow) { out = append(out, f.Clone()) }
	for i := range events {
		c.Add(&events[i], done)
	}
	c.Flush(done)
	return c, out
}

func packetsOf(f *Flow) []int {
	var n []int
	for _, p := range f.Packets {
		n = append(n, len(p.Events))
	}
	return n
}

func TestCorrelation(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	b := fixture.T("10.0.0.3:2000", "10.0.0.4:80", fixture.SYN)
	vip := fixture.T("10.0.0.1:1000", "10.96.0.1:80", fixture.SYN)
	reuse := []event.Event{
		fixture.Dev(&s, 0x1, "n1/eth0", event.KindDevTx, a),
		fixture.Dev(&s, 0x1, "n2/eth0", event.KindDevRx, a),
		fixture.Dev(&s, 0x1, "n1/eth0", event.KindDevTx, b), // same address, another packet
	}
	freed := []event.Event{
		fixture.Dev(&s, 0x2, "n1/eth0", event.KindDevTx, a),
		fixture.Drop(&s, 0x2, "n1/eth0", a, "NETFILTER_DROP"),
		fixture.Dev(&s, 0x2, "n1/eth0", event.KindDevTx, a), // retransmit reusing the freed skb
	}
	natNoCT := []event.Event{
		fixture.NAT(&s, 0x3, "n1", event.HookOutput, vip, a, nil),
		fixture.Dev(&s, 0x3, "n1/eth0", event.KindDevTx, a),
		fixture.Dev(&s, 0x4, "n1/eth0", event.KindDevRx, a.Reverse()), // the reply, by tuple only
	}
	ct := fixture.CT(0xc, vip, a.Reverse(), event.CTDstNAT, true)
	replyByCT := []event.Event{
		fixture.NAT(&s, 0x5, "n1", event.HookOutput, vip, a, fixture.CT(0xc, vip, a.Reverse(), event.CTDstNAT, false)),
		// The reply after un-DNAT has the VIP tuple; before, the pod's: the
		// conntrack entry ties them whatever the order of keys.
		fixture.NAT(&s, 0x6, "n1", event.HookInput, a.Reverse(), vip.Reverse(), ct),
	}
	outer := fixture.CT(0xee, event.Tuple{}, event.Tuple{}, 0, false)
	tunnel := []event.Event{
		fixture.Encap(&s, 0x7, "n1/eth0", a, "172.20.0.1", "172.20.0.2", 1),
		fixture.Encap(&s, 0x8, "n1/eth0", b, "172.20.0.1", "172.20.0.2", 1),
	}
	tunnel[0].Flags |= event.FlagCT
	tunnel[0].CT = *outer
	tunnel[1].Flags |= event.FlagCT
	tunnel[1].CT = *outer
	held := []event.Event{
		fixture.Route(&s, 0x9, "n1", "10.0.0.1", "10.0.0.2", "eth0"),
		fixture.NAT(&s, 0x9, "n1", event.HookOutput, vip, a, nil),
	}
	dropOnly := []event.Event{fixture.Drop(&s, 0xa, "n1/eth0", a, "IP_RPFILTER")} // other points missing
	// A SYN an NFQUEUE consumer held for two seconds, past skbGap, then
	// dropped when its verdict came: its bytes say it is the same packet;
	// without them the silence says the address was recycled.
	snat := fixture.T("172.20.0.1:1000", "10.0.0.2:80", fixture.SYN)
	queued := func(bytes bool) []event.Event {
		evs := []event.Event{fixture.NAT(&s, 0xb, "n1/eth0", event.HookPostrouting, a, snat, nil)}
		s.Skip(uint64(2 * time.Second))
		evs = append(evs, fixture.Drop(&s, 0xb, "n1/eth0", snat, "NOT_SPECIFIED"))
		if bytes {
			for i := range evs {
				fixture.Snapshot(&evs[i], 0x51, 7)
			}
		}
		return evs
	}

	// A late ACK refused by PAWS after waiting in the server socket's
	// backlog: TCP took its device and route, so its drop names no
	// namespace, and its earlier steps were not reported.
	ack := fixture.T("10.0.0.1:3000", "10.0.0.2:80", fixture.ACK)
	nowhere := func(e event.Event) event.Event { e.Netns, e.Ifindex, e.Ifname = 0, 0, event.Name{}; return e }
	unplaced := func(namespaces ...string) []event.Event {
		var evs []event.Event
		for i, ns := range namespaces {
			evs = append(evs, fixture.Dev(&s, 0xd0+uint64(i), ns+"/eth0", event.KindDevTx, ack))
		}
		return append(evs, nowhere(fixture.Drop(&s, 0xdf, "n2", ack, "TCP_INVALID_SEQUENCE")))
	}

	tests := []struct {
		name    string
		events  []event.Event
		flows   int
		packets []int // per packet of the first flow
	}{
		{"skb address reused by an unrelated packet", reuse, 2, []int{2}},
		{"freed skb reused by the same connection", freed, 1, []int{2, 1}},
		{"NAT without conntrack joins the reply by tuple", natNoCT, 1, []int{2, 1}},
		{"reply joined by its conntrack entry", replyByCT, 1, []int{1, 1}},
		{"the tunnel's outer conntrack entry does not merge flows", tunnel, 2, []int{1}},
		{"route lookup held for the packet's next event", held, 1, []int{2}},
		{"a point alone still makes a flow", dropOnly, 1, []int{1}},
		{"a packet a queue held past the gap, told by its bytes", queued(true), 1, []int{2}},
		{"a step past the gap without bytes is another packet", queued(false), 1, []int{1, 1}},
		{"a drop in no namespace joins the one flow holding its tuple", unplaced("n1"), 1, []int{1, 1}},
		{"a drop in no namespace joins neither of two flows holding its tuple", unplaced("n1", "p1"), 3, []int{1}},
	}
	for _, tt := range tests {
		_, flows := run(DefaultConfig, tt.events)
		if len(flows) != tt.flows {
			t.Errorf("%s: %d flows, want %d", tt.name, len(flows), tt.flows)
			continue
		}
		if got := packetsOf(flows[0]); !equal(got, tt.packets) {
			t.Errorf("%s: packets with %v events, want %v", tt.name, got, tt.packets)
		}
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Events from several CPUs arrive slightly out of order: the timeline is
// in kernel time order whatever the arrival order.
func TestOutOfOrderEvents(t *testing.T) {
	events := fixture.SNATMissing(false)
	shuffled := append([]event.Event(nil), events...)
	r := rand.New(rand.NewSource(1))
	// Swap neighbours, as two CPUs interleaving would.
	for i := 0; i+1 < len(shuffled); i += 2 {
		if r.Intn(2) == 0 {
			shuffled[i], shuffled[i+1] = shuffled[i+1], shuffled[i]
		}
	}
	_, want := run(DefaultConfig, events)
	_, got := run(DefaultConfig, shuffled)
	if len(got) != 1 || len(want) != 1 {
		t.Fatalf("flows: %d in order, %d shuffled", len(want), len(got))
	}
	w, g := want[0].Events(), got[0].Events()
	if len(w) != len(g) {
		t.Fatalf("%d events in order, %d shuffled", len(w), len(g))
	}
	for i := range w {
		if w[i].Time != g[i].Time {
			t.Fatalf("event %d at %d, want %d", i, g[i].Time, w[i].Time)
		}
	}
	for _, p := range got[0].Packets {
		for i := 1; i < len(p.Events); i++ {
			if p.Events[i].Time < p.Events[i-1].Time {
				t.Fatalf("packet %#x not in time order", p.Skb)
			}
		}
	}
}

// A packet queued after SNAT and dropped by the CPU that took it on: its
// drop comes before its first steps, which its first CPU held (a pending
// journey). The steps join the packet the kernel named (skb and skb_seen);
// a packet named anew at that address is another one.
func TestHeldStepsJoinTheirPacket(t *testing.T) {
	var s fixture.Seq
	pod, snat := fixture.T("10.244.1.10:41000", "172.20.0.254:5432", fixture.SYN), fixture.T("172.20.0.1:41000", "172.20.0.254:5432", fixture.SYN)
	rx := fixture.Dev(&s, 0x1e0, "n1/cni0", event.KindDevRx, pod)
	nat := fixture.NAT(&s, 0x1e0, "n1/eth0", event.HookPostrouting, pod, snat, nil)
	s.Skip(20_000_000)
	drop := fixture.Drop(&s, 0x1e0, "n1/eth0", snat, "NOT_SPECIFIED")
	for _, tc := range []struct {
		name    string
		dropped uint64 // the drop's skb_seen
		packets []int
	}{
		{"the same packet", rx.Time, []int{3}},
		{"the address named anew", drop.Time, []int{2, 1}},
	} {
		evs := []event.Event{drop, rx, nat}
		evs[0].SkbSeen, evs[1].SkbSeen, evs[2].SkbSeen = tc.dropped, rx.Time, rx.Time
		_, flows := run(DefaultConfig, evs)
		if len(flows) != 1 || !slices.Equal(packetsOf(flows[0]), tc.packets) {
			t.Errorf("%s: %d flows, packets %v, want one flow with %v", tc.name, len(flows), packetsOf(flows[0]), tc.packets)
		}
	}
}

// A DNS server's answer reuses its query's skb address: the socket read
// the query without a free the kernel reports, so both have one identity.
// The query's last step, which its CPU held, comes after the answer's first
// steps. It joins the query, and the answer stays one packet across its
// encapsulation on node 2 and its un-DNAT on node 1 (split there, it was a
// reply that never crossed node 1's NAT).
func TestLateStepOfThePacketBeforeARecycledAddress(t *testing.T) {
	var s fixture.Seq
	const skb = 0x5f00
	udp := func(src, dst string) event.Tuple {
		t := fixture.T(src, dst, 0)
		t.Proto = event.ProtoUDP
		return t
	}
	query, dnat := udp("10.244.1.10:49439", "10.96.0.43:53"), udp("10.244.1.10:49439", "10.244.2.20:53")
	answer, undnat := dnat.Reverse(), query.Reverse()
	ct := fixture.CT(0xc7, query, answer, event.CTDstNAT|event.CTConfirmed, false)
	ctReply := *ct
	ctReply.Info = 3
	// bytes gives an event the packet bytes its point captures: the inner
	// packet's behind the outer headers once encapsulated, with the IP id
	// that tells the query from the answer.
	bytes := func(e event.Event, id uint16) event.Event {
		inner := func(t event.Tuple) []byte {
			b := fixture.TCPPacket(t, id, 0, 0)[:28]
			b[9] = event.ProtoUDP
			return b
		}
		e.SkbSeen = 1
		if !e.HasInner() {
			e.Packet = inner(e.Tuple)
			return e
		}
		outer := inner(e.Tuple)[:20]
		e.Packet = append(append(outer, make([]byte, 30)...), inner(e.Inner)...)
		return e
	}
	// tunnel is a packet's way from one node's flannel.1 to the other's:
	// encapsulated, its outer packet through the sender's nat OUTPUT, and
	// across the nodes' eth0.
	nodeIP := map[string]string{"n1": "172.20.0.1", "n2": "172.20.0.2"}
	tunnel := func(from, to string, inner event.Tuple) []event.Event {
		o := udp(nodeIP[from]+":40000", nodeIP[to]+":8472")
		steps := []event.Event{
			fixture.Dev(&s, skb, from+"/flannel.1", event.KindDevTx, inner),
			fixture.Encap(&s, skb, from+"/flannel.1", inner, nodeIP[from], nodeIP[to], 1),
			fixture.NAT(&s, skb, from, event.HookOutput, o, o, nil),
			fixture.Dev(&s, skb, from+"/eth0", event.KindDevTx, o),
			fixture.Dev(&s, skb, to+"/eth0", event.KindDevRx, o),
		}
		for i := 2; i < len(steps); i++ {
			steps[i].Flags |= event.FlagInner
			steps[i].Inner = inner
		}
		return append(steps, fixture.Dev(&s, skb, to+"/flannel.1", event.KindDevRx, inner))
	}
	queryEvents := []event.Event{
		fixture.Dev(&s, skb, "p1/eth0", event.KindDevTx, query),
		fixture.NAT(&s, skb, "n1", event.HookPrerouting, query, dnat, ct),
	}
	queryEvents = append(append(queryEvents, tunnel("n1", "n2", dnat)...),
		fixture.Dev(&s, skb, "p2/eth0", event.KindDevRx, dnat))
	s.Skip(50_000)
	answerEvents := []event.Event{
		fixture.Dev(&s, skb, "p2/eth0", event.KindDevTx, answer),
	}
	answerEvents = append(append(answerEvents, tunnel("n2", "n1", answer)...),
		fixture.NAT(&s, skb, "n1", event.HookPostrouting, answer, undnat, &ctReply),
		fixture.Dev(&s, skb, "p1/eth0", event.KindDevRx, undnat))
	for i := range queryEvents {
		queryEvents[i] = bytes(queryEvents[i], 0x1111)
	}
	for i := range answerEvents {
		answerEvents[i] = bytes(answerEvents[i], 0x2222)
	}
	held := len(queryEvents) - 1
	in := slices.Concat(queryEvents[:held], answerEvents[:3], queryEvents[held:], answerEvents[3:])
	_, flows := run(DefaultConfig, in)
	if len(flows) != 1 || !slices.Equal(packetsOf(flows[0]), []int{len(queryEvents), len(answerEvents)}) {
		for _, f := range flows {
			t.Logf("flow %d: packets with %v events", f.ID, packetsOf(f))
		}
		t.Fatalf("%d flows, want one with the query's %d events and the answer's %d", len(flows), len(queryEvents), len(answerEvents))
	}
}

func TestIdleFlowsEndAndTheLimitEvicts(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	first := fixture.Dev(&s, 0x1, "n1/eth0", event.KindDevTx, a)
	s.Skip(uint64(5 * time.Second))
	again := fixture.Dev(&s, 0x2, "n1/eth0", event.KindDevTx, a)
	_, flows := run(Config{Idle: time.Second, MaxFlows: 10}, []event.Event{first, again})
	if len(flows) != 2 {
		t.Fatalf("a tuple seen again after the idle time: %d flows, want 2", len(flows))
	}

	var many []event.Event
	for i := 0; i < 5; i++ {
		many = append(many, fixture.Dev(&s, uint64(0x100+i), "n1/eth0", event.KindDevTx,
			fixture.T("10.0.0.1:1000", "10.0.0.2:"+string(rune('1'+i))+"0", fixture.SYN)))
	}
	c, flows := run(Config{Idle: time.Minute, MaxFlows: 2}, many)
	if st := c.Stats(); len(flows) != 5 || st.Evicted != 3 || st.Flows != 5 {
		t.Fatalf("flows %d, stats %+v; want 5 flows, 3 evicted", len(flows), st)
	}
}

func TestPacketsPastTheCapAreCountedNotKept(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.ACK)
	var events []event.Event
	for i := 0; i < 10; i++ {
		skb := uint64(0x1000 + i*0x100)
		events = append(events, fixture.Dev(&s, skb, "n1/eth0", event.KindDevTx, a), fixture.Dev(&s, skb, "n2/eth0", event.KindDevRx, a))
	}
	c, flows := run(Config{Idle: time.Minute, MaxFlows: 10, MaxPackets: 4}, events)
	if len(flows) != 1 || len(flows[0].Packets) != 4 || flows[0].Unkept != 12 {
		t.Fatalf("%d flows; want 1 with 4 packets and 12 events not kept: %+v", len(flows), flows)
	}
	if n := len(c.skbs); n != 0 {
		t.Errorf("%d skb states left behind", n)
	}
}

func TestRouteLookupsPerPacketAreBounded(t *testing.T) {
	var s fixture.Seq
	a := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	var events []event.Event
	for i := 0; i < MaxHeld+5; i++ {
		events = append(events, fixture.Route(&s, 0x1, "n1", "10.0.0.1", "10.0.0.2", "eth0"))
	}
	events = append(events, fixture.Dev(&s, 0x1, "n1/eth0", event.KindDevTx, a))
	c, flows := run(DefaultConfig, events)
	if len(flows) != 1 || len(flows[0].Packets) != 1 {
		t.Fatalf("%d flows, want 1 with one packet: %+v", len(flows), flows)
	}
	if n, st := len(flows[0].Packets[0].Events), c.Stats(); n != MaxHeld+1 || st.Unheld != 5 {
		t.Fatalf("%d events on the packet, %d route lookups not kept; want %d and 5", n, st.Unheld, MaxHeld+1)
	}
}

// TestMergeKeepsBothSockets: the client's socket and the server's are
// first two flows (each namespace its own tuple, after DNAT); the packet
// that crosses from one to the other makes them one, and that flow holds
// both sockets' state changes, whole and in time order.
func TestMergeKeepsBothSockets(t *testing.T) {
	var s fixture.Seq
	vip := fixture.T("10.0.0.1:1000", "10.96.0.1:80", fixture.SYN)
	pod := fixture.T("10.0.0.1:1000", "10.0.0.2:8080", fixture.SYN)
	const synSent, synRecv, established = 2, 3, 1
	events := []event.Event{
		fixture.State(&s, 0x51, "n1", vip, 7, synSent),
		fixture.State(&s, 0x52, "n2", pod.Reverse(), 10, synRecv),
		fixture.NAT(&s, 0x9, "n1", event.HookOutput, vip, pod, nil),
		fixture.State(&s, 0x51, "n1", vip, synSent, established),
		fixture.Dev(&s, 0x9, "n2/eth0", event.KindDevRx, pod),
	}
	_, flows := run(DefaultConfig, events)
	var merged *Flow
	for _, f := range flows {
		if len(f.Socket) == 3 {
			merged = f
		}
	}
	if merged == nil {
		t.Fatalf("no flow holds the three state changes: %d flows", len(flows))
	}
	want := []event.Event{events[0], events[1], events[3]}
	for i, e := range merged.Socket {
		if e.Time != want[i].Time || e.TCP != want[i].TCP || e.Netns != want[i].Netns || e.Tuple != want[i].Tuple {
			t.Errorf("socket event %d: got %+v, want %+v", i, e, want[i])
		}
	}
}

// TestOverConnectionEndsSooner: a flow whose sockets all closed after
// their connection was established ends a second after its last event,
// not at the idle time; a segment still in flight within that second
// joins it. A connect that failed waits the idle time: its replies may
// still be on their way.
func TestOverConnectionEndsSooner(t *testing.T) {
	t1 := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	t2 := fixture.T("10.0.0.1:1001", "10.0.0.2:80", fixture.SYN)
	const synSent, established, closed = 2, 1, 7
	var s fixture.Seq
	events := []event.Event{
		fixture.State(&s, 0x61, "n1", t1, synSent, established),
		fixture.State(&s, 0x61, "n1", t1, established, closed),
		fixture.State(&s, 0x71, "n1", t2, synSent, closed), // a connect that failed
	}
	s.Skip(uint64(300 * time.Millisecond))
	late := t1.Reverse()
	late.TCPFlags = 0x11 // FIN, ACK
	events = append(events, fixture.Dev(&s, 0x9, "n1/eth0", event.KindDevRx, late))
	c := New(Config{Idle: 3 * time.Second})
	var ended []*Flow
	done := func(f *Flow) { ended = append(ended, f.Clone()) }
	for i := range events {
		c.Add(&events[i], done)
	}
	last := events[len(events)-1].Time
	c.Expire(last+uint64(closedIdle)-1, done)
	if len(ended) != 0 {
		t.Fatalf("%d flows ended within a second of the last segment", len(ended))
	}
	c.Expire(last+uint64(closedIdle)+1, done)
	if len(ended) != 1 || len(ended[0].Socket) != 2 || len(ended[0].Packets) != 1 {
		t.Fatalf("want the closed connection's flow, its two state changes and the late segment; got %d flows", len(ended))
	}
	if want := last + uint64(closedIdle); ended[0].Ended != want {
		t.Errorf("ended at %d, want %d: losses after that are another flow's", ended[0].Ended, want)
	}
	c.Expire(events[2].Time+uint64(3*time.Second)+1, done)
	if len(ended) != 2 || ended[1].Socket[0].TCP.Cookie != 0x71 {
		t.Fatalf("want the failed connect's flow at the idle time; got %d flows", len(ended))
	}
}

// TestIdleIsTheFlowsOwn: whether the correlator looked for idle flows
// between two events (the live run, on its clock) or not (a replay, by
// event count), the same events give the same flows, ended at the same
// time: a closed connection's late segment after its shorter idle time
// starts a flow of its own either way.
func TestIdleIsTheFlowsOwn(t *testing.T) {
	tup := fixture.T("10.0.0.1:1000", "10.0.0.2:80", fixture.SYN)
	late := tup.Reverse()
	late.TCPFlags = 0x11 // FIN, ACK
	const synSent, established, closed = 2, 1, 7
	var s fixture.Seq
	events := []event.Event{
		fixture.State(&s, 0x61, "n1", tup, synSent, established),
		fixture.State(&s, 0x61, "n1", tup, established, closed),
	}
	s.Skip(uint64(1500 * time.Millisecond))
	events = append(events, fixture.Dev(&s, 0x9, "n1/eth0", event.KindDevRx, late))
	correlate := func(lookEveryEvent bool) []string {
		c := New(Config{Idle: 3 * time.Second})
		var got []string
		done := func(f *Flow) {
			got = append(got, fmt.Sprintf("%d socket events, %d packets, ended %d", len(f.Socket), len(f.Packets), f.Ended))
		}
		for i := range events {
			if lookEveryEvent {
				c.Expire(events[i].Time, done)
			}
			c.Add(&events[i], done)
		}
		c.Flush(done)
		return got
	}
	live, replay := correlate(true), correlate(false)
	if !slices.Equal(live, replay) || len(live) != 2 {
		t.Errorf("looking for idle flows at every event:\n%s\nnever:\n%s\nwant the same two flows", strings.Join(live, "\n"), strings.Join(replay, "\n"))
	}
}

// A packet travels from the client when it has the client's source, or
// the tuple a NAT hook's entry gives the client's packets past it; what a
// flow learnt of its NAT hooks is not carried to the next flow its memory
// serves.
func TestFromClient(t *testing.T) {
	c := New(DefaultConfig)
	snated, reply := fixture.T("10.244.1.0:40000", "10.244.2.10:8080", 0), fixture.T("10.244.2.10:8080", "10.244.1.0:40000", 0)
	var answers []bool
	done := func(f *Flow) { answers = append(answers, f.FromClient(snated), f.FromClient(reply)) }
	for _, e := range fixture.SNATMissing(true) {
		c.Add(&e, done)
	}
	c.Flush(done)
	var s fixture.Seq
	other := fixture.T("172.20.0.9:41000", "10.244.2.10:8080", 0)
	e := fixture.Dev(&s, 0x900, "n1/eth0", event.KindDevTx, other)
	c.Add(&e, done)
	c.Flush(done)
	if want := []bool{true, false, false, false}; !slices.Equal(answers, want) {
		t.Fatalf("from the client (the SNATed request, the reply; then the same of a flow without NAT): %v, want %v", answers, want)
	}
}
