package flow

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Flow memory is recycled and flows are kept in a list by last activity,
// so that correlation allocates nothing per event once warm and expiry and
// eviction never scan every flow.

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
	if !f.open {
		return
	}
	for _, k := range f.keys {
		if c.byKey[k] == f {
			delete(c.byKey, k)
		}
		if k.kind == keySkb {
			id := skbID{k.id, k.aux}
			if st := c.skbs[id]; st != nil && st.cur.epoch == k.epoch {
				c.forgetSkb(id)
			} else if st != nil && st.prev.epoch == k.epoch {
				st.prev = packetSigns{}
			}
		}
	}
	c.handOut(f, done)
}

// handOut closes a flow whose keys are forgotten and hands it to done.
func (c *Correlator) handOut(f *Flow, done func(*Flow)) {
	c.recent.forget()
	f.open = false
	if f.Ended == 0 {
		// Idle, or the run's end: what could have been its own came
		// before End plus its idle time. Not the time it was found idle,
		// which depends on when user space looked.
		f.Ended = f.End + c.idleOf(f)
	}
	c.active--
	c.unlink(f)
	c.stats.Flows++
	if c.cfg.Deferred {
		done(f)
		return
	}
	c.decoded = f.Decode(c.decoded)
	done(f)
	c.recycle(f)
}

// Decode turns an ended flow's compact events into Packet.Events and
// Socket, in time order, using room (grown when too small), and returns
// room for the next flow: only the flows being handed out take the room of
// full events. The correlator decodes the flows it hands out itself, but
// with Config.Deferred.
func (f *Flow) Decode(room []event.Event) []event.Event {
	total := 0
	if f.socket != nil {
		total = f.socket.n
	}
	for _, p := range f.Packets {
		total += p.n
	}
	if cap(room) < total {
		room = make([]event.Event, total)
	}
	all := room[:total]
	for _, p := range f.Packets {
		all = p.decode(all)
	}
	f.Socket, f.clientEndsRead = nil, false
	if f.socket != nil {
		f.socket.decode(all)
		f.Socket = f.socket.Events
	}
	f.sortPackets()
	if cap(room) > maxKeptDecoded {
		return nil // one unusually large flow must not hold memory for the rest of the run
	}
	return room
}

// Release gives back a flow handed out with Config.Deferred once its
// receiver is done with it, so that the correlator reuses its memory. Safe
// to call from any goroutine.
func (c *Correlator) Release(f *Flow) {
	c.releasedMu.Lock()
	c.released = append(c.released, f)
	c.releasedMu.Unlock()
}

// reclaim recycles the flows given back by Release.
func (c *Correlator) reclaim() {
	c.releasedMu.Lock()
	back := c.released
	c.released = nil
	c.releasedMu.Unlock()
	for _, f := range back {
		c.recycle(f)
	}
}

func (c *Correlator) forgetSkb(id skbID) {
	if c.recentSkb.id == id {
		c.recentSkb = recentSkb{}
	}
	if st := c.skbs[id]; st != nil {
		delete(c.skbs, id)
		c.freeSkbs = append(c.freeSkbs, st)
	}
}

func (c *Correlator) dropHeld(id skbID, held []event.Event) {
	delete(c.held, id)
	c.freeHeld = append(c.freeHeld, held[:0])
}

func (c *Correlator) newSkbState() *skbState {
	if n := len(c.freeSkbs); n > 0 {
		st := c.freeSkbs[n-1]
		c.freeSkbs = c.freeSkbs[:n-1]
		*st = skbState{cur: skbEpoch{packetSigns: packetSigns{epoch: c.newEpoch()}}}
		return st
	}
	return &skbState{cur: skbEpoch{packetSigns: packetSigns{epoch: c.newEpoch()}}}
}

func (c *Correlator) newFlow() *Flow {
	if len(c.freeFlows) == 0 && c.cfg.Deferred {
		c.reclaim()
	}
	if n := len(c.freeFlows); n > 0 {
		f := c.freeFlows[n-1]
		c.freeFlows = c.freeFlows[:n-1]
		return f
	}
	return &Flow{}
}

func (c *Correlator) newPacket() *Packet {
	if len(c.freePackets) == 0 && c.cfg.Deferred {
		c.reclaim()
	}
	if n := len(c.freePackets); n > 0 {
		p := c.freePackets[n-1]
		c.freePackets = c.freePackets[:n-1]
		return p
	}
	return &Packet{}
}

// recycle keeps a finished flow's memory for later flows. Slices keep
// their capacity; a flow that grew unusually large is let go, so memory
// stays bounded by typical flows.
func (c *Correlator) recycle(f *Flow) {
	for _, p := range f.Packets {
		c.recyclePacket(p)
	}
	if f.socket != nil {
		c.recyclePacket(f.socket)
	}
	if cap(f.Packets) <= 64 && cap(f.keys) <= 256 {
		*f = Flow{Packets: f.Packets[:0], keys: f.keys[:0], clientEnds: f.clientEnds[:0]}
		c.freeFlows = append(c.freeFlows, f)
	}
}

func (c *Correlator) recyclePacket(p *Packet) {
	c.rooms.put(p.recs)
	*p = Packet{}
	c.freePackets = append(c.freePackets, p)
}

// rooms keeps the room packets held their compact events in, by size
// class, for packets that grow: a packet crossing a dozen hops grows its
// room several times, and room taken from the runtime each time is memory
// it must clear, often fresh from the system (the largest cost of
// correlation at a busy node's rates, before). A recycled packet keeps no
// room, so that one holding a single event never holds a large one.
type rooms struct {
	free [roomClasses][][]byte
}

// Room sizes: roomClasses classes from minRoom, doubling.
const (
	minRoom     = 256
	roomClasses = 5 // up to 4 KiB, a packet of about forty events
)

// eventRoom is the room an event's compact form takes at most but for an
// IPv6 event with every section (which AppendCompact then grows for).
const eventRoom = 256

// get returns room for at least n bytes, empty: a kept room of the
// smallest class that fits, or a new one. For a packet's first event
// (first) it returns nil rather than a new room: most packets on a busy
// node are one event's, and AppendCompact gives those exactly what they
// take.
func (r *rooms) get(n int, first bool) []byte {
	for class, size := 0, minRoom; class < roomClasses; class, size = class+1, size*2 {
		if size < n {
			continue
		}
		if k := len(r.free[class]); k > 0 {
			room := r.free[class][k-1]
			r.free[class] = r.free[class][:k-1]
			return room
		}
		if first {
			return nil
		}
		return make([]byte, 0, size)
	}
	if first {
		return nil
	}
	return make([]byte, 0, n)
}

// put keeps a room of one of the classes for later packets.
func (r *rooms) put(room []byte) {
	for class, size := 0, minRoom; class < roomClasses; class, size = class+1, size*2 {
		if cap(room) == size {
			r.free[class] = append(r.free[class], room[:0])
			return
		}
	}
}

// decode fills the start of room with the packet's events and returns
// the rest.
func (p *Packet) decode(room []event.Event) []event.Event {
	p.Events = room[:p.n:p.n]
	var base event.CompactBase
	off := 0
	for i := range p.Events {
		n, err := event.DecodeCompact(p.recs, off, &p.Events[i], &base)
		if err != nil {
			panic(fmt.Sprintf("flow: event %d of packet %#x: %v", i, p.Skb, err)) // only AppendCompact wrote recs
		}
		off += n
	}
	return room[p.n:]
}

// absorb appends q's events to p's. They are written anew: q's compact
// events are written against q's own sequence, not p's.
func (p *Packet) absorb(q *Packet, rooms *rooms) {
	var base event.CompactBase
	var e event.Event
	for off := 0; off < len(q.recs); {
		n, err := event.DecodeCompact(q.recs, off, &e, &base)
		if err != nil {
			panic(fmt.Sprintf("flow: packet %#x: %v", q.Skb, err)) // only AppendCompact wrote recs
		}
		p.add(&e, rooms)
		off += n
	}
}

// Past this, the array flows are decoded into is let go.
const maxKeptDecoded = 1024

func (c *Correlator) evictOldest(done func(*Flow)) {
	if c.oldest != nil {
		c.stats.Evicted++
		c.oldest.Ended = c.now
		c.end(c.oldest, done)
	}
}

// Expire ends the flows idle at kernel time now, and forgets held events
// whose packet never showed up again.
func (c *Correlator) Expire(now uint64, done func(*Flow)) {
	if now > c.now {
		c.now = now
	}
	for id, held := range c.held {
		if held[len(held)-1].Time+skbGap < c.now {
			c.dropHeld(id, held)
		}
	}
	// The list is in order of last activity, which is event order: the
	// idle flows are at its start.
	for c.oldest != nil && c.oldest.End+uint64(c.cfg.Idle) < c.now {
		c.end(c.oldest, done)
	}
	c.expireOver(done)
}

// expireOver ends the flows whose connection is over once idle for their
// idle time (idleOf). The list is in the order of the flows' last events
// when listed; a flow with later events goes to its end again.
func (c *Correlator) expireOver(done func(*Flow)) {
	for len(c.over) > 0 {
		o := c.over[0]
		f := o.f
		switch {
		case !f.open || f.serial != o.serial:
		case !f.conn.over():
			f.listedOver = false // a new socket: listed again if it closes
		case f.End+c.idleOf(f) < c.now:
			c.end(f, done)
		case f.End > o.at:
			c.over = append(c.over, overFlow{f: f, serial: f.serial, at: f.End})
		default:
			return
		}
		c.over = c.over[1:]
	}
}

// Flush ends every flow (end of a run), in the order they began. Every key
// and packet identity goes with them: the maps are emptied at once rather
// than key by key.
func (c *Correlator) Flush(done func(*Flow)) {
	all := make([]*Flow, 0, c.active)
	for f := c.oldest; f != nil; f = f.next {
		all = append(all, f)
	}
	slices.SortFunc(all, func(a, b *Flow) int { return cmp.Compare(a.ID, b.ID) })
	clear(c.byKey)
	for _, st := range c.skbs {
		c.freeSkbs = append(c.freeSkbs, st)
	}
	clear(c.skbs)
	c.over = nil
	c.recentSkb = recentSkb{}
	for _, f := range all {
		c.handOut(f, done)
	}
}
