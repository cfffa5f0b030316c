package ruleset

import "github.com/nettrace-dev/nettrace/pkg/event"

// HookPacket is what a hook saw of the packet of an event, with tuple t
// (the event's own, or before its NAT): the device is the input one up to
// routing, the output one after.
func HookPacket(e *event.Event, t event.Tuple) Packet {
	p := Packet{Src: t.Src, Dst: t.Dst, Proto: t.Proto, Sport: t.Sport, Dport: t.Dport}
	switch e.Hook {
	case event.HookPrerouting, event.HookInput:
		p.In = e.Ifname.String()
	case event.HookPostrouting:
		p.Out = e.Ifname.String()
	}
	return p
}

// Of is the ruleset of the event's packet's family, from a namespace's
// iptables ruleset: the ip6tables one for an IPv6 packet; nil when not
// read. A ruleset of the packet's family is its own.
func (rs *Ruleset) Of(e *event.Event) *Ruleset {
	switch {
	case rs == nil || rs.ipv6 == e.Tuple.Src.Is6():
		return rs
	case rs.ipv6:
		return nil
	}
	return rs.IPv6
}

// NATOf attributes a nat event (with the tuple before its NAT) to its
// rule, the packet's mark being known as mark (what the hooks before set);
// nil when the event or the ruleset cannot say. Only a connection's first
// packet crosses the nat table: conntrack translates the others (replies,
// retransmits) by the entry alone, which is confirmed by then.
func (rs *Ruleset) NATOf(e *event.Event, mark Mark) *Attribution {
	rs = rs.Of(e)
	if rs == nil || !CrossesNAT(e) {
		return nil
	}
	pre, post := HookPacket(e, e.NAT.Pre), HookPacket(e, e.Tuple)
	pre.Mark, post.Mark = mark, mark
	return rs.NAT(e.Hook.String(), pre, post)
}

// CrossesNAT says whether the packet of a nat event crossed the nat table
// at its hook, and the event says what it was before: a connection's first
// packet, whose entry is not confirmed yet.
func CrossesNAT(e *event.Event) bool {
	return e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 && e.HasCT() &&
		!e.CT.IsReply() && e.CT.Status&event.CTConfirmed == 0
}
