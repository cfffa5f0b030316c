package flow

import (
	"math/rand"
	"net/netip"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
)

// A synthetic busy node: connections from a pod through a node (which DNATs
// some of them) to a server pod, interleaved at random. The kernel's
// addresses are scarce on purpose: a handful of skb addresses, some freed
// without the kernel saying so (the same first-seen time comes back for
// the next packet), a handful of conntrack addresses reused once an entry
// is gone, and source ports reused by consecutive connections. Each event
// carries its connection's number in CPU (which correlation ignores), so
// that a flow holding two connections is seen.

const (
	nsClient = 3
	nsNode   = 1
	nsServer = 4
)

var (
	clientIP  = netip.MustParseAddr("10.244.1.50")
	serverIP  = netip.MustParseAddr("10.244.2.10")
	serviceIP = netip.MustParseAddr("10.96.0.99")
)

type synthConn struct {
	id          uint32
	sport       uint16
	viaService  bool
	isn, isnRep uint32
	ct          uint64
	cookie      uint64
	step        int
}

// synthesizer writes the events of synthetic packets.
type synthesizer struct {
	r      *rand.Rand
	now    uint64
	skbs   []uint64 // addresses
	seen   map[uint64]uint64
	ipID   uint16
	events []event.Event
}

func (s *synthesizer) tick() uint64 { s.now += 1000 + uint64(s.r.Intn(5000)); return s.now }

// skb picks an address for a new packet: the kernel reports the previous
// packet's free (a new first-seen time) only some of the time.
func (s *synthesizer) skb() (uint64, uint64) {
	a := s.skbs[s.r.Intn(len(s.skbs))]
	if s.seen[a] == 0 || s.r.Intn(3) == 0 {
		s.seen[a] = s.now + 1
	}
	return a, s.seen[a]
}

// packet writes one packet of c: from the client through the node to the
// server (request), or back (reply).
func (s *synthesizer) packet(c *synthConn, reply bool, flags uint8, seq, ack uint32) {
	client := event.Tuple{Src: clientIP, Dst: serverIP, Sport: c.sport, Dport: 9000, Proto: event.ProtoTCP, TCPFlags: flags}
	called := client
	if c.viaService {
		called.Dst = serviceIP
	}
	addr, seen := s.skb()
	s.ipID++
	id := s.ipID
	ct := event.Conntrack{ID: c.ct, Status: event.CTConfirmed, Orig: called, Reply: client.Reverse()}
	ct.Orig.TCPFlags, ct.Reply.TCPFlags = 0, 0
	if c.viaService {
		ct.Status |= event.CTDstNAT
	}
	walk := func(path []hop, before, after event.Tuple) {
		for i, h := range path {
			t, pre := before, before
			switch {
			case i == natHop:
				t = after
			case i > natHop:
				t, pre = after, after
			}
			e := event.Event{Time: s.tick(), Skb: addr, SkbSeen: seen, Netns: h.ns, Point: h.point, Kind: h.kind, Hook: h.hook,
				CPU: c.id, Tuple: t, Packet: fixture.TCPPacket(t, id, seq, ack)}
			if h.point == event.PointNAT {
				e.Flags |= event.FlagPre
				e.NAT.Pre = pre
			}
			if h.ct {
				e.Flags |= event.FlagCT
				e.CT = ct
				if reply {
					e.CT.Info = 3
				}
			}
			s.events = append(s.events, e)
		}
	}
	if !reply {
		walk(requestPath, called, client)
		return
	}
	back := client.Reverse()
	back.TCPFlags = flags
	seenByClient := back
	if c.viaService {
		seenByClient.Src = serviceIP
	}
	walk(replyPath, back, seenByClient)
}

// hop is where a synthetic packet is seen: the node's NAT (hop natHop)
// translates it, its conntrack entry is seen on the node.
type hop struct {
	ns    uint32
	point event.Point
	kind  event.Kind
	hook  event.Hook
	ct    bool
}

const natHop = 3

var (
	requestPath = []hop{
		{nsClient, event.PointNAT, event.KindNAT, event.HookOutput, false},
		{nsClient, event.PointDev, event.KindDevTx, event.HookNone, false},
		{nsNode, event.PointDev, event.KindDevRx, event.HookNone, false},
		{nsNode, event.PointNAT, event.KindNAT, event.HookPrerouting, true},
		{nsNode, event.PointDev, event.KindDevTx, event.HookNone, true},
		{nsServer, event.PointDev, event.KindDevRx, event.HookNone, false},
		{nsServer, event.PointNAT, event.KindNAT, event.HookInput, false},
	}
	replyPath = []hop{
		{nsServer, event.PointNAT, event.KindNAT, event.HookOutput, false},
		{nsServer, event.PointDev, event.KindDevTx, event.HookNone, false},
		{nsNode, event.PointDev, event.KindDevRx, event.HookNone, false},
		{nsNode, event.PointNAT, event.KindNAT, event.HookPostrouting, true},
		{nsClient, event.PointDev, event.KindDevRx, event.HookNone, false},
		{nsClient, event.PointNAT, event.KindNAT, event.HookInput, false},
	}
)

// state writes a state change of the client's socket.
func (s *synthesizer) state(c *synthConn, from, to uint8, bound bool) {
	t := event.Tuple{Src: clientIP, Dst: serverIP, Sport: c.sport, Dport: 9000, Proto: event.ProtoTCP}
	if c.viaService {
		t.Dst = serviceIP
	}
	if !bound {
		t.Sport = 0
	}
	s.events = append(s.events, event.Event{Time: s.tick(), Netns: nsClient, Point: event.PointTCP, Kind: event.KindTCPState,
		Hook: event.HookNone, CPU: c.id, Tuple: t, TCP: event.TCP{OldState: from, NewState: to, Cookie: c.cookie}})
}

// advance writes the next step of a connection; false when it is over.
func (s *synthesizer) advance(c *synthConn) bool {
	const (
		syn, ack, psh, fin, rst = 0x02, 0x10, 0x08, 0x01, 0x04
	)
	switch c.step {
	case 0:
		s.state(c, 7, 2, s.r.Intn(2) == 0) // CLOSE -> SYN_SENT, maybe before the port is bound
		s.packet(c, false, syn, c.isn, 0)
	case 1:
		s.packet(c, true, syn|ack, c.isnRep, c.isn+1)
	case 2:
		s.packet(c, false, ack, c.isn+1, c.isnRep+1)
		s.state(c, 2, 1, true) // ESTABLISHED
	case 3:
		s.packet(c, true, psh|ack, c.isnRep+1, c.isn+1)
	case 4:
		if s.r.Intn(2) == 0 {
			s.packet(c, false, rst|ack, c.isn+1, c.isnRep+7)
		} else {
			s.packet(c, false, fin|ack, c.isn+1, c.isnRep+7)
			s.packet(c, true, fin|ack, c.isnRep+7, c.isn+2)
		}
		s.state(c, 1, 7, true) // CLOSE
	default:
		return false
	}
	c.step++
	return true
}

// synthesize interleaves n connections. Connections on one source port
// follow each other (a port is reused once its connection is over), as
// do connections on one conntrack address.
func synthesize(seed int64, n int) []event.Event {
	r := rand.New(rand.NewSource(seed))
	s := &synthesizer{r: r, now: 1e9, seen: map[uint64]uint64{}}
	for i := 0; i < 4; i++ {
		s.skbs = append(s.skbs, 0xffff888100000000+uint64(i)*0x100)
	}
	ports := []uint16{40000, 40001, 40002}
	cts := []uint64{0xffff8881c0000000, 0xffff8881c0000100, 0xffff8881c0000200, 0xffff8881c0000300}
	portBusy, ctBusy := map[uint16]bool{}, map[uint64]bool{}
	var live []*synthConn
	next := uint32(1)
	for started := 0; started < n || len(live) > 0; {
		if started < n && (len(live) == 0 || r.Intn(3) == 0) {
			var free []uint16
			for _, p := range ports {
				if !portBusy[p] {
					free = append(free, p)
				}
			}
			var freeCT []uint64
			for _, a := range cts {
				if !ctBusy[a] {
					freeCT = append(freeCT, a)
				}
			}
			if len(free) > 0 && len(freeCT) > 0 {
				c := &synthConn{id: next, sport: free[r.Intn(len(free))], viaService: r.Intn(2) == 0,
					isn: r.Uint32(), isnRep: r.Uint32(), ct: freeCT[r.Intn(len(freeCT))], cookie: uint64(1000 + next)}
				next++
				started++
				portBusy[c.sport], ctBusy[c.ct] = true, true
				live = append(live, c)
				continue
			}
		}
		i := r.Intn(len(live))
		c := live[i]
		if !s.advance(c) {
			portBusy[c.sport], ctBusy[c.ct] = false, false
			live = append(live[:i], live[i+1:]...)
		}
	}
	return s.events
}

// requireOneConnectionPerFlow runs the events through the correlator and
// fails when a flow holds events of two connections.
func requireOneConnectionPerFlow(t *testing.T, events []event.Event) {
	t.Helper()
	c := New(DefaultConfig)
	check := func(f *Flow) {
		conn := uint32(0)
		for _, e := range f.Events() {
			if conn == 0 {
				conn = e.CPU
			}
			if e.CPU != conn {
				t.Fatalf("flow %d holds connections %d and %d:\n%s", f.ID, conn, e.CPU, describe(f))
			}
		}
	}
	for i := range events {
		c.Add(&events[i], check)
	}
	c.Flush(check)
}

func describe(f *Flow) string {
	var out []byte
	for _, e := range f.Events() {
		out = append(out, []byte(
			"  conn "+itoa(e.CPU)+" "+e.Point.String()+"/"+e.Kind.String()+" ns "+itoa(e.Netns)+" "+e.Tuple.Src.String()+":"+itoa(uint32(e.Tuple.Sport))+
				" > "+e.Tuple.Dst.String()+":"+itoa(uint32(e.Tuple.Dport))+"\n")...)
	}
	return string(out)
}

func itoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

func TestInterleavedConnectionsNeverShareAFlow(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		requireOneConnectionPerFlow(t, synthesize(seed, 12))
	}
}

func FuzzInterleavedConnectionsNeverShareAFlow(f *testing.F) {
	f.Add(int64(1), uint8(8))
	f.Add(int64(42), uint8(30))
	f.Fuzz(func(t *testing.T, seed int64, n uint8) {
		requireOneConnectionPerFlow(t, synthesize(seed, int(n%40)+1))
	})
}
