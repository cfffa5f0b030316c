package flow

import (
	"cmp"
	"net/netip"
	"slices"
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
	// MaxPackets bounds one flow: the events of its later packets are
	// counted in Flow.Unkept, not kept (a bulk transfer would otherwise
	// keep everything).
	MaxPackets int
}

// DefaultConfig is what watch and replay use unless told otherwise.
var DefaultConfig = Config{Idle: 3 * time.Second, MaxFlows: 100000, MaxPackets: 256}

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
// epoch), a conntrack entry, or a connection tuple (both directions). It
// holds no pointer, so the maps keyed by it cost the garbage collector
// nothing to scan.
type key struct {
	id    uint64
	a, b  uint64 // tuple endpoints: IPv4 address << 16 | port
	epoch uint32
	kind  keyKind
	proto uint8
}

func endpoint(a netip.Addr, port uint16) uint64 {
	v := a.As4()
	return uint64(v[0])<<40 | uint64(v[1])<<32 | uint64(v[2])<<24 | uint64(v[3])<<16 | uint64(port)
}

func tupleKey(t event.Tuple) key {
	a, b := endpoint(t.Src, t.Sport), endpoint(t.Dst, t.Dport)
	if b < a {
		a, b = b, a
	}
	return key{kind: keyTuple, proto: t.Proto, a: a, b: b}
}

// skbState tells whether the next event at an skb address is the same
// packet: the tuples the packet has had (NAT and encapsulation add to
// them), the stages it passed, when it was last seen, and whether it was
// freed.
type skbState struct {
	epoch  uint32
	last   uint64
	freed  bool
	tuples [6]key
	n      int
	stages [24]stage
	ns     int
}

// stage is a place a packet passes once: a point, kind and hook in a
// namespace and device, for the packet or (inner) its tunnel's packet. A
// packet seen at a stage it already passed is a new packet at a recycled
// address: consumed packets are not reported as freed, so this is what
// tells two packets of one bulk transfer apart.
type stage struct {
	netns, ifindex uint32
	code           uint32
}

func stageOf(e *event.Event) stage {
	code := uint32(e.Point)<<16 | uint32(e.Kind)<<8 | uint32(e.Hook)<<1
	if e.HasInner() {
		code |= 1
	}
	return stage{netns: e.Netns, ifindex: e.Ifindex, code: code}
}

// pass records a stage; false when the packet already passed it, or
// passed more stages than a packet crossing a host does.
func (s *skbState) pass(st stage) bool {
	for i := 0; i < s.ns; i++ {
		if s.stages[i] == st {
			return false
		}
	}
	if s.ns == len(s.stages) {
		return false
	}
	s.stages[s.ns] = st
	s.ns++
	return true
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

// Correlator turns events into flows. A flow handed to done is valid
// during the call only: its memory is reused for later flows, so that
// correlation allocates nothing per event once warm.
type Correlator struct {
	freeFlows   []*Flow
	freePackets []*Packet
	freeSkbs    []*skbState
	freeHeld    [][]event.Event

	cfg  Config
	skbs map[uint64]*skbState
	// held keeps the partial events of an skb (a route lookup made inside
	// the NAT hook) until the skb's next event says which packet they
	// belong to.
	held  map[uint64][]event.Event
	byKey map[key]*Flow
	flows map[*Flow]struct{}
	// oldest and newest end the list of flows by last activity.
	oldest, newest *Flow
	nextID         uint64
	now            uint64
	stats          Stats
}

// New returns a correlator.
func New(cfg Config) *Correlator {
	if cfg.Idle == 0 {
		cfg.Idle = DefaultConfig.Idle
	}
	if cfg.MaxFlows == 0 {
		cfg.MaxFlows = DefaultConfig.MaxFlows
	}
	if cfg.MaxPackets == 0 {
		cfg.MaxPackets = DefaultConfig.MaxPackets
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
		st = c.newSkbState()
		c.skbs[e.Skb] = st
	} else if e.Point == event.PointSYN && st.knows(tk) {
		// The user-space syn method reports a SYN after the kernel is done
		// with it: it is still that packet.
	} else if st.freed || e.Time > st.last+skbGap || !(st.knows(tk) || (post >= 0 && st.knows(keys[post]))) ||
		!st.pass(stageOf(e)) {
		// A freed, long-silent or unrelated packet at the same address:
		// the address was recycled.
		*st = skbState{epoch: st.epoch + 1}
	}
	if st.ns == 0 {
		st.pass(stageOf(e))
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
		h, ok := c.held[e.Skb]
		if !ok && len(c.freeHeld) > 0 {
			h = c.freeHeld[len(c.freeHeld)-1]
			c.freeHeld = c.freeHeld[:len(c.freeHeld)-1]
		}
		h = append(h, *e)
		h[len(h)-1].Packet = nil
		c.held[e.Skb] = h
		return
	}
	var keys [4]key
	n, skb := c.keysOf(e, &keys)
	var f *Flow
	var found [4]*Flow
	for i, k := range keys[:n] {
		g := c.byKey[k]
		if g == nil {
			continue
		}
		if g.End+uint64(c.cfg.Idle) < e.Time {
			c.end(g, done) // idle: this event starts something new
			continue
		}
		found[i] = g
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
		f = c.newFlow()
		f.ID, f.Start = c.nextID, e.Time
		c.flows[f] = struct{}{}
	}
	if skb.kind != 0 && found[n-1] == nil && len(f.Packets) >= c.cfg.MaxPackets {
		// A new packet past the cap: counted, and nothing of it kept.
		f.Unkept++
		if st := c.skbs[skb.id]; st != nil {
			delete(c.skbs, skb.id)
			c.freeSkbs = append(c.freeSkbs, st)
		}
		if e.Time > f.End {
			f.End = e.Time
		}
		c.touch(f)
		return
	}
	for i, k := range keys[:n] {
		// A key found on another flow that was merged into f points to f
		// already; only keys new to f are added.
		if found[i] == nil || (found[i] != f && c.byKey[k] != f) {
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
	c.touch(f)
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
		p = c.newPacket()
		p.Skb, p.epoch = skb.id, skb.epoch
		f.Packets = append(f.Packets, p)
	}
	if held, ok := c.held[skb.id]; ok {
		p.Events = append(p.Events, held...)
		c.dropHeld(skb.id, held)
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
	c.unlink(b)
	return a
}

// unlink takes a flow out of the activity list.
func (c *Correlator) unlink(f *Flow) {
	if f.prev != nil {
		f.prev.next = f.next
	} else if c.oldest == f {
		c.oldest = f.next
	}
	if f.next != nil {
		f.next.prev = f.prev
	} else if c.newest == f {
		c.newest = f.prev
	}
	f.prev, f.next = nil, nil
}

// touch moves a flow to the newest end of the activity list.
func (c *Correlator) touch(f *Flow) {
	if c.newest == f {
		return
	}
	c.unlink(f)
	f.prev = c.newest
	if c.newest != nil {
		c.newest.next = f
	}
	c.newest = f
	if c.oldest == nil {
		c.oldest = f
	}
}

func (c *Correlator) end(f *Flow, done func(*Flow)) {
	if _, ok := c.flows[f]; !ok {
		return
	}
	delete(c.flows, f)
	c.unlink(f)
	for _, k := range f.keys {
		if c.byKey[k] == f {
			delete(c.byKey, k)
		}
		if k.kind == keySkb {
			if st := c.skbs[k.id]; st != nil && st.epoch == k.epoch {
				delete(c.skbs, k.id)
				c.freeSkbs = append(c.freeSkbs, st)
			}
		}
	}
	f.sortPackets()
	c.stats.Flows++
	done(f)
	c.recycle(f)
}

func (c *Correlator) dropHeld(skb uint64, held []event.Event) {
	delete(c.held, skb)
	c.freeHeld = append(c.freeHeld, held[:0])
}

func (c *Correlator) newSkbState() *skbState {
	if n := len(c.freeSkbs); n > 0 {
		st := c.freeSkbs[n-1]
		c.freeSkbs = c.freeSkbs[:n-1]
		*st = skbState{}
		return st
	}
	return &skbState{}
}

func (c *Correlator) newFlow() *Flow {
	if n := len(c.freeFlows); n > 0 {
		f := c.freeFlows[n-1]
		c.freeFlows = c.freeFlows[:n-1]
		return f
	}
	return &Flow{}
}

func (c *Correlator) newPacket() *Packet {
	if n := len(c.freePackets); n > 0 {
		p := c.freePackets[n-1]
		c.freePackets = c.freePackets[:n-1]
		return p
	}
	return &Packet{Events: make([]event.Event, 0, 2)}
}

// recycle keeps a finished flow's memory for later flows. Slices keep
// their capacity; a flow that grew unusually large is let go, so memory
// stays bounded by typical flows.
func (c *Correlator) recycle(f *Flow) {
	for _, p := range f.Packets {
		if cap(p.Events) <= 64 {
			p.Events = p.Events[:0]
			c.freePackets = append(c.freePackets, p)
		}
	}
	if cap(f.Packets) <= 64 && cap(f.Socket) <= 64 && cap(f.keys) <= 256 {
		*f = Flow{Packets: f.Packets[:0], Socket: f.Socket[:0], keys: f.keys[:0]}
		c.freeFlows = append(c.freeFlows, f)
	}
}

func (c *Correlator) evictOldest(done func(*Flow)) {
	if c.oldest != nil {
		c.stats.Evicted++
		c.end(c.oldest, done)
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
			c.dropHeld(skb, held)
		}
	}
	// The list is in order of last activity, which is event order: the
	// idle flows are at its start.
	for c.oldest != nil && c.oldest.End+uint64(c.cfg.Idle) < c.now {
		c.end(c.oldest, done)
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
	slices.SortFunc(fs, func(a, b *Flow) int { return cmp.Compare(a.ID, b.ID) })
}
