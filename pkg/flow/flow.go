// Package flow correlates events into flows: it follows one packet by its
// identity through NAT, re-routing, encapsulation and namespaces, and
// groups packets into a flow by conntrack entry, socket and tuple, both
// directions together. The kernel recycles the addresses it names objects
// by, so every identity has a lifetime (identity.go), and flows merge only
// when nothing says they are two connections (correlate.go). Time is the
// events' own (kernel monotonic) time, never the wall clock, so a recording
// replays into the same flows as the live run.
package flow

import (
	"sort"

	"github.com/nettrace-dev/nettrace/pkg/event"
)

// Packet is one packet's path: its events in kernel time order.
type Packet struct {
	Skb uint64
	// Events are decoded when the flow ends: while it is open they are
	// held in their compact form (event.AppendCompact), a fifth of the
	// memory.
	Events []event.Event

	recs  []byte            // the events in compact form, in arrival order
	last  event.CompactBase // what the next event is written against
	n     int               // how many events recs holds
	seen  uint64            // when the kernel first saw the skb address holding it
	epoch uint32            // which use of the skb identity this packet is
}

// ID numbers the packet among those its correlator saw: every event of
// the packet shares it, and no other packet has it, though the kernel
// recycles skb addresses. It is what the pcapng export gives Wireshark as
// the packet's id.
func (p *Packet) ID() uint64 { return uint64(p.epoch) }

// add keeps an event of the packet, growing its room from rooms.
func (p *Packet) add(e *event.Event, rooms *rooms) {
	if cap(p.recs)-len(p.recs) < eventRoom {
		if room := rooms.get(len(p.recs)+eventRoom, len(p.recs) == 0); room != nil {
			room = append(room, p.recs...)
			rooms.put(p.recs)
			p.recs = room
		}
	}
	p.recs = event.AppendCompact(p.recs, e, &p.last)
	p.n++
}

// First is the packet's first event.
func (p *Packet) First() *event.Event { return &p.Events[0] }

// Head is the packet's first event that carries its full tuple (a route
// lookup can come first, with a partial one).
func (p *Packet) Head() *event.Event {
	for i := range p.Events {
		if p.Events[i].Point != event.PointRoute {
			return &p.Events[i]
		}
	}
	return p.First()
}

// Last is the packet's last event.
func (p *Packet) Last() *event.Event { return &p.Events[len(p.Events)-1] }

// Flow is a connection (or datagram exchange) seen through its packets.
type Flow struct {
	ID      uint64
	Start   uint64 // kernel time of the first event
	End     uint64 // kernel time of the last event
	Packets []*Packet
	// Socket holds the events that concern the flow but no packet (TCP
	// state changes, route lookups without an skb), decoded when the flow
	// ends like a packet's.
	Socket []event.Event
	// Unkept counts the events of packets past Config.MaxPackets: seen,
	// not kept.
	Unkept uint64
	// Ended is the kernel time by which every record of the flow was made:
	// End plus the idle timeout, or the time it was evicted at.
	Ended uint64
	// LostAround counts the records lost while the flow was open
	// (Losses.Around), set before it is explained: a flow with any is
	// incomplete, and what it lacks proves nothing.
	LostAround uint64

	socket *Packet // the socket events while the flow is open, if any
	open   bool    // not ended (nor merged into another)
	// serial names the flow for as long as it is open (an ID changes when
	// flows merge); listedOver, that it is in the correlator's over list.
	serial     uint64
	listedOver bool
	keys       []key
	conn       connState
	// displaced is the flow this one took a key from when its connection
	// reused the key (another connection on the same tuple), while that
	// flow is open with displacedID: its late packets still find it.
	displaced   *Flow
	displacedID uint64
	// clientEnds are the tuples the client's packets carry past the flow's
	// NAT hooks (each translating entry's reply, reversed), read from the
	// events once, on the first FromClient after Decode: rules and
	// renderers ask it of every packet, and the events are many.
	clientEnds     []event.Tuple
	clientEndsRead bool
	// prev and next link flows by last activity, oldest first, so that
	// expiry and eviction never scan every flow.
	prev, next *Flow
}

// Tuple is the flow as its first packet saw it first: the client's view.
func (f *Flow) Tuple() event.Tuple {
	for _, p := range f.Packets {
		return p.Head().Entered()
	}
	if len(f.Socket) > 0 {
		return f.Socket[0].Tuple
	}
	return event.Tuple{}
}

// FromClient says whether a packet whose first tuple is t travels from the
// flow's client: its source is the client's, or it travels in the original
// direction of a conntrack entry a NAT hook of the flow saw (its tuple the
// reverse of the entry's reply): the client's request past a translation,
// first seen there, as on another host after this one's NAT. Only NAT
// events are read: they carry the entries that translated.
func (f *Flow) FromClient(t event.Tuple) bool {
	c := f.Tuple()
	if t.Src == c.Src && t.Sport == c.Sport {
		return true
	}
	if !f.clientEndsRead {
		f.readClientEnds()
	}
	return f.isClientEnd(t)
}

// readClientEnds reads clientEnds from the NAT events.
func (f *Flow) readClientEnds() {
	f.clientEnds, f.clientEndsRead = f.clientEnds[:0], true
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			if e.Point != event.PointNAT || !e.HasCT() {
				continue
			}
			if end := e.CT.Reply.Reverse(); !f.isClientEnd(end) {
				f.clientEnds = append(f.clientEnds, end)
			}
		}
	}
}

// isClientEnd says whether t is one of clientEnds.
func (f *Flow) isClientEnd(t event.Tuple) bool {
	for _, end := range f.clientEnds {
		if sameEnds(t, end) {
			return true
		}
	}
	return false
}

// sameEnds says whether two tuples name the same addresses, ports and
// protocol.
func sameEnds(a, b event.Tuple) bool {
	return a.Src == b.Src && a.Dst == b.Dst && a.Sport == b.Sport && a.Dport == b.Dport && a.Proto == b.Proto
}

// Events returns every event of the flow in kernel time order.
func (f *Flow) Events() []event.Event {
	var all []event.Event
	for _, p := range f.Packets {
		all = append(all, p.Events...)
	}
	all = append(all, f.Socket...)
	sortByTime(all)
	return all
}

// sortPackets orders events within packets and packets by first event;
// events from different CPUs reach user space slightly out of order.
// Events are large and nearly always already in order: check before
// moving them, and compare through indexes, never by value.
func (f *Flow) sortPackets() {
	for _, p := range f.Packets {
		sortByTime(p.Events)
	}
	sorted := true
	for i := 1; i < len(f.Packets) && sorted; i++ {
		sorted = f.Packets[i].Events[0].Time >= f.Packets[i-1].Events[0].Time
	}
	if !sorted {
		sort.SliceStable(f.Packets, func(i, j int) bool { return f.Packets[i].Events[0].Time < f.Packets[j].Events[0].Time })
	}
	sortByTime(f.Socket)
}

func sortByTime(evs []event.Event) {
	for i := 1; i < len(evs); i++ {
		if evs[i].Time < evs[i-1].Time {
			sort.Stable(byTime(evs))
			return
		}
	}
}

type byTime []event.Event

func (b byTime) Len() int           { return len(b) }
func (b byTime) Less(i, j int) bool { return b[i].Time < b[j].Time }
func (b byTime) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }

// Clone returns a copy of the flow that stays valid after the callback it
// was handed to returns, the packet bytes its events keep included.
func (f *Flow) Clone() *Flow {
	c := &Flow{ID: f.ID, Start: f.Start, End: f.End, Ended: f.Ended, LostAround: f.LostAround,
		Socket: append([]event.Event(nil), f.Socket...), Unkept: f.Unkept}
	for _, p := range f.Packets {
		q := &Packet{Skb: p.Skb, seen: p.seen, epoch: p.epoch, Events: append([]event.Event(nil), p.Events...)}
		for i := range q.Events {
			if q.Events[i].Packet != nil {
				q.Events[i].Packet = append([]byte(nil), q.Events[i].Packet...)
			}
		}
		c.Packets = append(c.Packets, q)
	}
	return c
}

// TranslationHook is the hook where the flow's packets were seen
// translated by t in namespace netns, if they were (event.TranslationHooks:
// a reply's un-NAT names the hook of the request's translation it undoes).
func (f *Flow) TranslationHook(netns uint32, t event.Translation) (event.Hook, bool) {
	if f == nil {
		return event.HookNone, false
	}
	for _, p := range f.Packets {
		for i := range p.Events {
			if e := &p.Events[i]; e.Netns == netns && e.Translation()&t != 0 {
				return e.Hook, true
			}
		}
	}
	return event.HookNone, false
}
