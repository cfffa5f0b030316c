package flow

import (
	"net/netip"
	"sort"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Config bounds the correlator.
type Config struct {
	// Idle ends a flow after this long without an event (kernel time).
	Idle time.Duration
	// MaxFlows bounds memory: past it the least recently active flow is
	// ended early and counted in Stats.Evicted.
	MaxFlows int
}

// DefaultConfig is what watch and replay use unless told otherwise.
var DefaultConfig = Config{Idle: 3 * time.Second, MaxFlows: 100000}

// Stats counts what the correlator did.
type Stats struct {
	Flows   uint64 // flows ended and handed out
	Evicted uint64 // of those, ended early because MaxFlows was reached
	Active  int
}

type keyKind uint8

const (
	keySkb keyKind = iota + 1
	keyCT
	keyTuple
	keySock
)

// key identifies something a flow is known by: a packet (skb address and
// epoch), a conntrack entry, or a connection tuple (both directions).
type key struct {
	kind  keyKind
	id    uint64
	epoch uint32
	proto uint8
	a, b  netip.AddrPort
}

func tupleKey(t event.Tuple) key {
	a := netip.AddrPortFrom(t.Src, t.Sport)
	b := netip.AddrPortFrom(t.Dst, t.Dport)
	if b.Compare(a) < 0 {
		a, b = b, a
	}
	return key{kind: keyTuple, proto: t.Proto, a: a, b: b}
}

// skbState tells whether the next event at an skb address is the same
// packet: the tuples the packet has had (NAT and encapsulation add to
// them), when it was last seen, and whether it was freed.
type skbState struct {
	epoch  uint32
	last   uint64
	freed  bool
	tuples [6]key
	n      int
}

func (s *skbState) knows(k key) bool {
	for i := 0; i < s.n; i++ {
		if s.tuples[i] == k {
			return true
		}
	}
	return false
}

func (s *skbState) learn(k key) {
	if s.knows(k) {
		return
	}
	if s.n < len(s.tuples) {
		s.tuples[s.n] = k
		s.n++
		return
	}
	copy(s.tuples[:], s.tuples[1:])
	s.tuples[len(s.tuples)-1] = k
}

// skbGap is how long an skb may be silent and still be the same packet;
// packets cross a host in microseconds.
const skbGap = uint64(time.Second)

// Correlator turns events into flows.
type Correlator struct {
	cfg  Config
	skbs map[uint64]*skbState
	// held keeps the partial events of an skb (a route lookup made inside
	// the NAT hook) until the skb's next event says which packet they
	// belong to.
	held   map[uint64][]event.Event
	byKey  map[key]*Flow
	flows  map[*Flow]struct{}
	nextID uint64
	now    uint64
	stats  Stats
}

// New returns a correlator.
func New(cfg Config) *Correlator {
	if cfg.Idle == 0 {
		cfg.Idle = DefaultConfig.Idle
	}
	if cfg.MaxFlows == 0 {
		cfg.MaxFlows = DefaultConfig.MaxFlows
	}
	return &Correlator{cfg: cfg, skbs: map[uint64]*skbState{}, held: map[uint64][]event.Event{},
		byKey: map[key]*Flow{}, flows: map[*Flow]struct{}{}}
}

// Stats returns the counters.
func (c *Correlator) Stats() Stats {
	s := c.stats
	s.Active = len(c.flows)
	return s
}

// partial says whether an event's tuple lacks the ports of its connection:
// route lookups (the flow key of a FIB lookup has no ports when
// ip_route_me_harder builds it) and sockets not yet bound.
func partial(e *event.Event) bool {
	if e.Point == event.PointRoute {
		return true
	}
	t := e.Tuple
	return (t.Proto == event.ProtoTCP || t.Proto == event.ProtoUDP) && (t.Sport == 0 || t.Dport == 0)
}

// keysOf lists the keys an event joins, and the skb key of its packet.
func (c *Correlator) keysOf(e *event.Event, keys *[4]key) (n int, skb key) {
	if e.Point == event.PointTCP && e.TCP.Sock != 0 {
		keys[n] = key{kind: keySock, id: e.TCP.Sock}
		n++
	}
	if partial(e) {
		return n, skb
	}
	pt := packetTuple(e)
	tk := tupleKey(pt)
	keys[n] = tk
	n++
	post := -1
	if e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 {
		keys[n] = tupleKey(e.Tuple) // the translated tuple is the same flow
		post = n
		n++
	}
	// The conntrack entry of an encapsulated packet is the outer UDP
	// flow's, shared by every connection through the tunnel: not a key.
	if e.HasCT() && !e.HasInner() {
		keys[n] = key{kind: keyCT, id: e.CT.ID}
		n++
	}
	if e.Skb == 0 {
		return n, key{}
	}
	st := c.skbs[e.Skb]
	if st == nil {
		st = &skbState{}
		c.skbs[e.Skb] = st
	} else if e.Point == event.PointSYN && st.knows(tk) {
		// The user-space syn method reports a SYN after the kernel is done
		// with it: it is still that packet.
	} else if st.freed || e.Time > st.last+skbGap || !(st.knows(tk) || (post >= 0 && st.knows(keys[post]))) {
		// A freed, long-silent or unrelated packet at the same address:
		// the address was recycled.
		*st = skbState{epoch: st.epoch + 1}
	}
	st.last = e.Time
	st.learn(tk)
	if post >= 0 {
		st.learn(keys[post])
	}
	if e.HasInner() {
		st.learn(tupleKey(e.Tuple))
	}
	if e.Point == event.PointDrop {
		st.freed = true
	}
	skb = key{kind: keySkb, id: e.Skb, epoch: st.epoch}
	keys[n] = skb
	n++
	return n, skb
}

// Add correlates one event. Flows that end because of it (idle, evicted)
// are passed to done.
func (c *Correlator) Add(e *event.Event, done func(*Flow)) {
	if e.Time > c.now {
		c.now = e.Time
	}
	if e.Skb != 0 && partial(e) {
		held := *e
		held.Packet = nil
		c.held[e.Skb] = append(c.held[e.Skb], held)
		return
	}
	var keys [4]key
	n, skb := c.keysOf(e, &keys)
	var f *Flow
	for _, k := range keys[:n] {
		g := c.byKey[k]
		if g == nil {
			continue
		}
		if g.End+uint64(c.cfg.Idle) < e.Time {
			c.end(g, done) // idle: this event starts something new
			continue
		}
		if f == nil {
			f = g
		} else if f != g {
			f = c.merge(f, g)
		}
	}
	if f == nil && partial(e) {
		return // only completes a flow already known
	}
	if f == nil {
		if len(c.flows) >= c.cfg.MaxFlows {
			c.evictOldest(done)
		}
		c.nextID++
		f = &Flow{ID: c.nextID, Start: e.Time}
		c.flows[f] = struct{}{}
	}
	for _, k := range keys[:n] {
		if c.byKey[k] != f {
			c.byKey[k] = f
			f.keys = append(f.keys, k)
		}
	}
	if e.Time > f.End {
		f.End = e.Time
	}
	if e.Time < f.Start {
		f.Start = e.Time
	}
	stored := *e
	stored.Packet = nil // refers to a buffer about to be reused
	if skb.kind == 0 {
		f.Socket = append(f.Socket, stored)
		return
	}
	var p *Packet
	for i := len(f.Packets) - 1; i >= 0 && p == nil; i-- {
		if f.Packets[i].Skb == skb.id && f.Packets[i].epoch == skb.epoch {
			p = f.Packets[i]
		}
	}
	if p == nil {
		p = &Packet{Skb: skb.id, epoch: skb.epoch}
		f.Packets = append(f.Packets, p)
	}
	if held := c.held[skb.id]; len(held) > 0 {
		p.Events = append(p.Events, held...)
		delete(c.held, skb.id)
	}
	p.Events = append(p.Events, stored)
}

// merge moves the smaller flow into the larger: one connection seen
// through two keys first thought unrelated.
func (c *Correlator) merge(a, b *Flow) *Flow {
	if len(a.keys) < len(b.keys) {
		a, b = b, a
	}
	a.Packets = append(a.Packets, b.Packets...)
	a.Socket = append(a.Socket, b.Socket...)
	for _, k := range b.keys {
		c.byKey[k] = a
		a.keys = append(a.keys, k)
	}
	if b.Start < a.Start {
		a.Start = b.Start
	}
	if b.End > a.End {
		a.End = b.End
	}
	if b.ID < a.ID {
		a.ID = b.ID
	}
	delete(c.flows, b)
	return a
}

func (c *Correlator) end(f *Flow, done func(*Flow)) {
	if _, ok := c.flows[f]; !ok {
		return
	}
	delete(c.flows, f)
	for _, k := range f.keys {
		if c.byKey[k] == f {
			delete(c.byKey, k)
		}
		if k.kind == keySkb {
			if st := c.skbs[k.id]; st != nil && st.epoch == k.epoch {
				delete(c.skbs, k.id)
			}
		}
	}
	f.keys = nil
	f.sortPackets()
	c.stats.Flows++
	done(f)
}

func (c *Correlator) evictOldest(done func(*Flow)) {
	var oldest *Flow
	for f := range c.flows {
		if oldest == nil || f.End < oldest.End {
			oldest = f
		}
	}
	if oldest != nil {
		c.stats.Evicted++
		c.end(oldest, done)
	}
}

// Expire ends the flows idle at kernel time now, and forgets held events
// whose packet never showed up again.
func (c *Correlator) Expire(now uint64, done func(*Flow)) {
	if now > c.now {
		c.now = now
	}
	for skb, held := range c.held {
		if held[len(held)-1].Time+skbGap < c.now {
			delete(c.held, skb)
		}
	}
	var idle []*Flow
	for f := range c.flows {
		if f.End+uint64(c.cfg.Idle) < c.now {
			idle = append(idle, f)
		}
	}
	sortFlows(idle)
	for _, f := range idle {
		c.end(f, done)
	}
}

// Flush ends every flow (end of a run).
func (c *Correlator) Flush(done func(*Flow)) {
	all := make([]*Flow, 0, len(c.flows))
	for f := range c.flows {
		all = append(all, f)
	}
	sortFlows(all)
	for _, f := range all {
		c.end(f, done)
	}
}

func sortFlows(fs []*Flow) {
	sort.Slice(fs, func(i, j int) bool { return fs[i].ID < fs[j].ID })
}
