package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// mtuBlackHole: a node could not forward a packet of the flow because it
// was larger than the MTU of its route's device (a tunnel's, typically:
// pods given a larger MTU than the overlay carries, flannel#1011), and the
// sender did not learn the path's MTU: the ICMP "fragmentation needed"
// (IPv6: "packet too big") the node sent it was dropped, or none was seen
// and the sender sent the same segment again into the same drop. The
// kernel names the drop (PKT_TOO_BIG, in ip_forward), the route's device
// and its MTU (the drop point reads them), and the ICMP message is the
// flow's too (its conntrack entry is the connection's, RELATED), sent on
// the same CPU just before the drop. A sender that learnt the MTU sends
// smaller packets and is not a finding.
func mtuBlackHole(f *flow.Flow, n Context) *Finding {
	_, big := find(f, func(_ *flow.Packet, e *event.Event) bool { return dropped(n, e, "PKT_TOO_BIG") })
	if big == nil {
		return nil
	}
	sender := big.Current()
	notice := tooBigNotice(f, big)
	again, last := resentTooBig(n, f, big)
	var fate *event.Event
	if notice != nil {
		fate = notice.Last()
	}
	switch {
	case fate != nil && fate.Point == event.PointDrop:
	case notice == nil && again > 0:
	default:
		return nil
	}
	fd := &Finding{restsOnAbsence: notice == nil}
	size, df := tooBigSize(n, f, big)
	fd.Evidence = []Evidence{evidence(n, big, "a packet of %s: too big for %s, dropped at %s (PKT_TOO_BIG) on %s",
		sizeWords(size, df, big.Drop.SrcMTU), routeDevice(f, big), n.SymbolName(big.Drop.Location), where(n, big))}
	var learnt string
	if fate != nil {
		learnt = fd.noticeFate(n, notice, fate)
	} else {
		learnt = fmt.Sprintf("nettrace saw no ICMP %s sent for them (rate-limited, or sent where nettrace does not watch)", noticeName(sender))
	}
	if again > 0 {
		fd.Evidence = append(fd.Evidence, evidence(n, last, "the same segment sent again: dropped the same way (%s)", plural(again, "time")))
		learnt += fmt.Sprintf(", and the sender sent the same segment %s into the same drop", plural(again, "more time"))
	}
	fd.Summary = fmt.Sprintf("Packets %s -> %s, %s, were too big for %s in %s, which dropped them in %s (PKT_TOO_BIG); %s: "+
		"the path's MTU never reached the sender, an MTU black hole. Give the pods an MTU of at most %d (the CNI configuration's "+
		"\"mtu\"; flannel writes its tunnel's as FLANNEL_MTU), or let ICMP %s through.",
		fd.atPod(n, src(sender)), fd.atPod(n, dst(sender)), sizeWords(size, df, big.Drop.SrcMTU), routeDevice(f, big), n.NetnsName(big.Netns),
		n.SymbolName(big.Drop.Location), learnt, big.Drop.DstMTU, noticeName(sender))
	return fd
}

// noticeFate tells where the ICMP message notice, which ended at fate (a
// drop), went, naming the netfilter rule that dropped it when known.
func (fd *Finding) noticeFate(n Context, notice *flow.Packet, fate *event.Event) string {
	t := fate.Current()
	what := fmt.Sprintf("the ICMP %s the node sent %s", noticeName(t), fd.addrAtPod(n, t.Dst))
	fd.Evidence = append(fd.Evidence, evidence(n, fate, "ICMP %s to %s: dropped (%s) on %s",
		noticeName(t), t.Dst, n.ReasonName(fate.Drop.Reason), where(n, fate)))
	if n.ReasonName(fate.Drop.Reason) != "NETFILTER_DROP" {
		return fmt.Sprintf("%s was dropped on %s (%s)", what, where(n, fate), n.ReasonName(fate.Drop.Reason))
	}
	rules, last := netfilterDropRules(n, notice, fate)
	fd.NetfilterRules = rules
	fd.Evidence = append(fd.Evidence, ruleFacts(n, fate, rules)...)
	if len(rules) > 0 && rules[0].Role == RoleDecided {
		decided := rules[0]
		return fmt.Sprintf("%s was dropped by %s in %s %s", what, decided.String(), n.NetnsName(fate.Netns), decided.Hook)
	}
	return fmt.Sprintf("%s was dropped by a netfilter DROP verdict in %s, %s", what, n.NetnsName(fate.Netns), hookAfter(last))
}

// tooBigNotice is the ICMP message the kernel sent the sender of big
// before dropping it: icmp_send runs in the forwarding path, on the drop's
// CPU, before the packet is freed, so it is the flow's latest such
// message begun there in the drop's namespace. nil when none was seen.
func tooBigNotice(f *flow.Flow, big *event.Event) *flow.Packet {
	var notice *flow.Packet
	for _, p := range f.Packets {
		h := p.Head()
		if !h.Current().TooBigNotice() || h.Netns != big.Netns || h.CPU != big.CPU || h.Time > big.Time {
			continue
		}
		if notice == nil || h.Time > notice.Head().Time {
			notice = p
		}
	}
	return notice
}

// resentTooBig counts the drops for being too big, after big, of TCP
// segments starting where an earlier such drop's did: the sender
// retransmitting what it was never told to make smaller. It returns the
// last of them.
func resentTooBig(n Context, f *flow.Flow, big *event.Event) (int, *event.Event) {
	sent := map[uint32]bool{}
	count := 0
	var last *event.Event
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			if !dropped(n, e, "PKT_TOO_BIG") || e.Time < big.Time || e.Current().Src != big.Current().Src {
				continue
			}
			seq, _, ok := event.TCPSeqAck(e.Packet)
			if !ok {
				continue
			}
			if sent[seq] {
				count, last = count+1, e
			}
			sent[seq] = true
		}
	}
	return count, last
}

// tooBigSize is the size of the sender's packets dropped for being too
// big, from their headers: the smallest, since a packet the sender still
// held as one large segment (GSO) is dropped whole but would have left as
// packets of the size of the others. Zero when no drop kept its headers.
// df says whether they forbade fragmentation.
func tooBigSize(n Context, f *flow.Flow, big *event.Event) (size int, df bool) {
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			if !dropped(n, e, "PKT_TOO_BIG") || e.Current().Src != big.Current().Src {
				continue
			}
			if l, ok := event.IPLength(e.Packet); ok && (size == 0 || l < size) {
				size, df = l, event.DontFragment(e.Packet)
			}
		}
	}
	return size, df
}

// sizeWords tells the dropped packets' size, whether they forbade
// fragmentation, and the MTU of their sender's device when it was read.
func sizeWords(size int, df bool, senderMTU uint16) string {
	s := "larger than the route allowed"
	if size > 0 {
		s = fmt.Sprintf("%d bytes", size)
	}
	if df {
		s += " with DF set"
	}
	if senderMTU != 0 {
		s += fmt.Sprintf(" (the sender's device has MTU %d)", senderMTU)
	}
	return s
}

// routeDevice names the device a dropped packet was routed to, with its
// MTU and, for a tunnel, the MTU of the device under it, from the drop.
// The device's name is what the flow's other events in the drop's
// namespace call it (a reply's earlier packets crossed it).
func routeDevice(f *flow.Flow, drop *event.Event) string {
	name := fmt.Sprintf("the route's device (ifindex %d)", drop.Drop.DstIfindex)
	if _, e := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return e.Netns == drop.Netns && e.Ifindex == drop.Drop.DstIfindex && e.Ifname.String() != ""
	}); e != nil {
		name = e.Ifname.String()
	}
	if drop.Drop.LowerMTU == 0 {
		return fmt.Sprintf("%s (MTU %d)", name, drop.Drop.DstMTU)
	}
	under := "a device"
	if _, e := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return e.Netns == drop.Netns && e.Point == event.PointVXLAN && e.Kind == event.KindVXLANEncap && e.Ifname.String() != ""
	}); e != nil {
		under = e.Ifname.String()
	}
	return fmt.Sprintf("%s (MTU %d, over %s of MTU %d)", name, drop.Drop.DstMTU, under, drop.Drop.LowerMTU)
}

// noticeName is the ICMP message that tells a sender of t's family its
// packet was too big.
func noticeName(t event.Tuple) string {
	if t.Dst.Is6() && !t.Dst.Is4In6() {
		return "\"packet too big\" (ICMPv6 type 2)"
	}
	return "\"fragmentation needed\" (type 3, code 4)"
}
