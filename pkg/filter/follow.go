package filter

import "github.com/nettrace-dev/nettrace/pkg/event"

// Follower decides, event by event, what the kernel's filter would have
// reported (nt_follow in bpf/include/follow.h): a packet or conntrack
// entry that matched once is followed after NAT or encapsulation change
// its tuple, and so are both directions of its connection. Replay uses it
// to filter recordings exactly as watch filters live traffic.
type Follower struct {
	prog   *Program
	skbs   map[uint64]bool
	cts    map[uint64]bool
	tuples map[event.Tuple]bool
	// held are route lookups made inside a NAT hook: the kernel reported
	// them when the packet's pre-NAT tuple matched, which the packet's next
	// event (the NAT) tells.
	held map[uint64][]event.Event
}

// NewFollower follows what prog matches.
func NewFollower(prog *Program) *Follower {
	return &Follower{prog: prog, skbs: map[uint64]bool{}, cts: map[uint64]bool{}, tuples: map[event.Tuple]bool{},
		held: map[uint64][]event.Event{}}
}

func (f *Follower) trackTuple(t event.Tuple) {
	t = t.WithoutFlags()
	f.tuples[t] = true
	f.tuples[t.Reverse()] = true
}

// Follow says whether an event is reported. Held route lookups of the same
// packet that this decision releases are passed to release first.
func (f *Follower) Follow(e *event.Event, release func(*event.Event)) bool {
	if len(f.prog.Insns) == 0 {
		return true
	}
	if e.Point == event.PointRoute && e.Skb != 0 && !f.skbs[e.Skb] {
		h := *e
		h.Packet = append([]byte(nil), e.Packet...)
		f.held[e.Skb] = append(f.held[e.Skb], h)
		return false
	}
	held := f.held[e.Skb]
	delete(f.held, e.Skb)
	// The kernel reported the lookups if the packet was followed before
	// the NAT: by what it already was, or by its pre-NAT tuple.
	before := f.known(e) || !(e.Point == event.PointNAT && e.Flags&event.FlagPre != 0) || f.prog.Match(e.NAT.Pre)
	if !f.follow(e) {
		return false
	}
	if before {
		for i := range held {
			release(&held[i])
		}
	}
	return true
}

func (f *Follower) known(e *event.Event) bool {
	return (e.Skb != 0 && f.skbs[e.Skb]) || (e.HasCT() && e.CT.ID != 0 && f.cts[e.CT.ID]) || f.tuples[e.Tuple.WithoutFlags()]
}

func (f *Follower) follow(e *event.Event) bool {
	hasCT := e.HasCT() && e.CT.ID != 0
	if !f.known(e) && !f.prog.Match(e.Tuple) && !(e.HasInner() && f.prog.Match(e.Inner)) &&
		!(e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 && f.prog.Match(e.NAT.Pre)) {
		return false
	}
	if e.Skb != 0 {
		f.skbs[e.Skb] = true
	}
	if hasCT {
		f.cts[e.CT.ID] = true
		f.trackTuple(e.CT.Orig)
		f.trackTuple(e.CT.Reply)
	}
	if e.Point == event.PointDrop {
		delete(f.skbs, e.Skb)
	}
	return true
}
