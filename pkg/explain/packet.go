package explain

import (
	"slices"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// Packet is what the renderers show of one packet of a flow, decided here
// so that none of them interprets events: where it went, what it was, where
// it ended, and what each of its steps did.
type Packet struct {
	// ID is the correlator's identity of the packet (flow.Packet.ID).
	ID uint64
	// Direction is "request" or "reply" in its flow; a group or broadcast
	// datagram, which has no reply, is "multicast" or "broadcast".
	Direction string
	// Label is "SYN", "SYN-ACK", "ACK", "data", ... for TCP, the protocol's
	// name otherwise.
	Label string
	// Tuple is the packet as it came to its first point (before any
	// translation there).
	Tuple event.Tuple
	// End says, in the kernel's terms, where its path ended.
	End string
	// Ordinary, for a packet the kernel freed in its ordinary work or a
	// group management message (Ordinary), says what that was; "" for any
	// other. End keeps the kernel's own words.
	Ordinary string
	// TimelineEnd is End as a timeline shows it: an ordinary packet is
	// consumed, not lost.
	TimelineEnd string
	// Steps, one per event, when Detail asked for them.
	Steps []Step
}

// Step is what one event did to its packet.
type Step struct {
	// What says it in full.
	What string
	// Timeline is what a timeline kept to what a person needs shows of
	// it, Shown false where it leaves the step out: translations, the
	// missing SNAT after a DNAT, encapsulation, the devices entered,
	// listener outcomes and drops. Where none of a packet's steps is
	// notable, every one is shown in full.
	Timeline string
	Shown    bool
	// Lost says the packet was lost at this step: dropped (not in the
	// kernel's ordinary work), or dropped by the listener it reached.
	Lost bool
	// NATRules, on a nat step of a connection's first packet, are the
	// netfilter rules that decided it, when Detail asked for them and the
	// namespace's ruleset is known.
	NATRules []NetfilterRule
}

// newPacket reports on packet i of a flow; with its steps when steps.
func newPacket(f *flow.Flow, i int, n Context, steps bool) Packet {
	p := f.Packets[i]
	t := p.Head().Entered()
	r := Packet{ID: p.ID(), Direction: direction(f, t, p), Label: label(t), Tuple: t, End: end(n, p), Ordinary: Ordinary(f, i, n)}
	r.TimelineEnd = r.End
	if r.Ordinary != "" {
		r.TimelineEnd = "consumed in " + n.NetnsName(p.Last().Netns) + " (ordinary)"
	}
	if steps {
		r.Steps = packetSteps(n, f, p, r.Ordinary)
	}
	return r
}

// StepWords says in a few words what one event did to its packet. The
// flow (nil when unknown) names the hook of the request's translation a
// reply's undoes.
func StepWords(n Context, f *flow.Flow, e *event.Event) string {
	return stepWords(lookup(n), f, e)
}

func stepWords(l event.Lookup, f *flow.Flow, e *event.Event) string {
	return event.ViewOf(e.Point).Step(l, f, e)
}

// lookup is what the points' views need of the context.
func lookup(n Context) event.Lookup {
	return event.Lookup{DropReason: n.ReasonName, Symbol: n.SymbolName}
}

// packetSteps are a packet's steps, in full and as a timeline shows them.
func packetSteps(n Context, f *flow.Flow, p *flow.Packet, ordinary string) []Step {
	steps := make([]Step, len(p.Events))
	var dnatIn []uint32 // namespaces where this packet was DNATed
	notable := false
	l := lookup(n)
	for k := range p.Events {
		e := &p.Events[k]
		s := &steps[k]
		s.What = stepWords(l, f, e)
		if e.Translation()&event.TranslationDNAT != 0 {
			dnatIn = append(dnatIn, e.Netns)
		}
		s.Timeline, s.Shown = timelineStep(e, s.What, k == len(p.Events)-1, slices.Contains(dnatIn, e.Netns))
		s.Lost = (e.Point == event.PointDrop && (ordinary == "" || k < len(p.Events)-1)) ||
			(e.Point == event.PointSYN && e.SYN.Outcome.Dropped())
		notable = notable || s.Shown
	}
	if !notable {
		for k := range steps {
			steps[k].Timeline, steps[k].Shown = steps[k].What, true
		}
	}
	if last := &steps[len(steps)-1]; ordinary != "" {
		last.Timeline, last.Shown = "not a loss: "+ordinary, true
	}
	return steps
}

// timelineStep decides whether a timeline shows a step, and how.
func timelineStep(e *event.Event, what string, last, dnatHere bool) (string, bool) {
	switch {
	case e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 && e.Translation() == 0:
		// A hook seen to translate nothing (the step's "no NAT").
		if dnatHere && e.Hook == event.HookPostrouting && !e.HasInner() {
			return "no SNAT (source unchanged after the DNAT)", true
		}
		return "", false
	case e.Point == event.PointDev && e.Kind == event.KindDevTx && !last:
		return "", false
	case e.Point == event.PointDev:
		return e.Kind.String(), true
	}
	return what, true
}

// direction names a packet's direction in its flow. A group or broadcast
// datagram has no reply: it is named for what it is.
func direction(f *flow.Flow, t event.Tuple, p *flow.Packet) string {
	group := false
	for i := range p.Events {
		group = group || p.Events[i].ToGroup()
	}
	switch {
	case group && t.Dst.IsMulticast():
		return "multicast"
	case group:
		return "broadcast"
	case !f.FromClient(t):
		return "reply"
	}
	return "request"
}

// label is "SYN", "SYN-ACK", "ACK", ... for a TCP packet.
func label(t event.Tuple) string {
	if t.Proto != event.ProtoTCP {
		return event.ProtoName(t.Proto)
	}
	switch {
	case t.TCPFlags&0x02 != 0 && t.TCPFlags&0x10 != 0:
		return "SYN-ACK"
	case t.TCPFlags&0x02 != 0:
		return "SYN"
	case t.TCPFlags&0x04 != 0:
		return "RST"
	case t.TCPFlags&0x01 != 0:
		return "FIN"
	case t.TCPFlags&0x08 != 0:
		return "data"
	}
	return "ACK"
}

// end says where a packet's path ended. Every finished flow pays for it,
// shown or not: its words are appended in one buffer.
func end(n Context, p *flow.Packet) string {
	last := p.Last()
	netns := n.NetnsName(last.Netns)
	var buf [192]byte
	b := buf[:0]
	where := func(b []byte) []byte {
		b = append(b, netns...)
		if last.Ifname[0] != 0 {
			b = last.Ifname.AppendTo(append(b, '/'))
		}
		return b
	}
	on := func(b []byte) []byte {
		if netns == "" && last.Ifname[0] == 0 && last.Point == event.PointDrop {
			// Freed where no namespace or device holds it (a closing
			// socket's queue): the place in the kernel says it.
			return append(append(b, "at "...), n.SymbolName(last.Drop.Location)...)
		}
		return where(append(b, "on "...))
	}
	switch {
	case last.Point == event.PointDrop:
		reason := n.ReasonName(last.Drop.Reason)
		if reason == "NOT_SPECIFIED" {
			b = append(on(append(b, "freed "...)), " (the kernel gave no drop reason)"...)
		} else {
			b = on(append(append(append(b, "dropped ("...), reason...), ") "...))
		}
	case last.Point == event.PointSYN:
		b = append(append(append(append(b, "at the listener in "...), netns...), ": "...), last.SYN.Outcome.String()...)
	case last.Point == event.PointNAT && last.Hook == event.HookInput:
		b = append(append(b, "delivered locally in "...), netns...)
	case last.Point == event.PointDev && last.Kind == event.KindDevTx:
		b = append(where(append(b, "sent out of "...)), ", not seen after"...)
	default:
		b = where(append(b, "last seen on "...))
	}
	return string(b)
}
