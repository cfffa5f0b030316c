package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// conntrackInvalid: conntrack tracked a connection in a namespace, then
// judged one of its packets there INVALID (kubernetes#74839): most often a
// segment outside the window conntrack keeps for each direction. NAT,
// which translates by the entry, lets such a packet pass as it came, and
// `--ctstate INVALID` rules (kube-proxy's KUBE-FORWARD DROP) match it; a
// connection whose data keeps being judged so stalls or is reset. Both
// halves are seen, never inferred: the entry on the connection's packets
// in that namespace, and conntrack's verdict on this one (the nat point's
// ct_invalid). Only a packet of an open connection that the verdict
// harmed counts (dropped, answered with a reset, or left untranslated): a
// late segment after the connection's FIN or reset is often INVALID, and
// one passed on as it came harms nothing. "Open" rests on no FIN or reset
// seen before the packet, so a flow that may have lost records is not
// given this finding.
func conntrackInvalid(f *flow.Flow, n Context) *Finding {
	p, inv := invalidPacket(f)
	if inv == nil {
		return nil
	}
	t := inv.Current()
	entry := entryIn(f, inv.Netns, t)
	if entry == nil {
		return nil
	}
	ns := n.NetnsName(inv.Netns)
	fd := &Finding{restsOnAbsence: true, Evidence: []Evidence{
		evidence(n, entry, "conntrack tracks the connection in %s: entry %#x, %s -> %s", ns, entry.CT.ID, src(entry.CT.Orig), dst(entry.CT.Orig)),
		evidence(n, inv, "conntrack judged %s %s -> %s INVALID at %s %s: it left the packet without an entry", segmentWord(t), src(t), dst(t), ns, inv.Hook),
	}}
	var svc string
	if dp, d := dnat(f); d != nil {
		fd.Service = serviceOf(n, dp, d, nil)
		svc = " of the connection to " + withService(dst(d.NAT.Pre), fd.Service)
	}
	fate := fd.invalidFate(n, f, p, inv)
	if fate == "" && untranslated(entry) == "" {
		// Neither dropped nor left untranslated: passed on as it came,
		// harming nothing seen.
		return nil
	}
	summary := fmt.Sprintf("%s %s -> %s%s was judged INVALID by conntrack in %s %s%s%s", segmentWord(t), fd.atPod(n, src(t)), fd.atPod(n, dst(t)),
		svc, ns, inv.Hook, untranslated(entry), fate)
	fd.Summary = summary + fmt.Sprintf(". If it is outside conntrack's TCP window (a retransmission, a window conntrack did not see grow), `sysctl -w net.netfilter.nf_conntrack_tcp_be_liberal=1` in %s makes conntrack accept it (kube-proxy's conntrack.tcpBeLiberal)", ns) + "."
	return fd
}

// segmentWord names a TCP packet by its flags: "TCP segment [P.]".
func segmentWord(t event.Tuple) string {
	return "TCP segment [" + event.TCPFlagString(t.TCPFlags) + "]"
}

// invalidPacket finds the first packet of the open connection that
// conntrack judged INVALID, and its verdict.
func invalidPacket(f *flow.Flow) (*flow.Packet, *event.Event) {
	closing := false
	for _, p := range f.Packets {
		for i := range p.Events {
			e := &p.Events[i]
			if e.Point == event.PointNAT && e.Flags&event.FlagCTInvalid != 0 && !closing && e.Current().Proto == event.ProtoTCP {
				return p, e
			}
		}
		closing = closing || p.Head().Current().TCPFlags&(tcpRST|tcpFIN) != 0
	}
	return nil, nil
}

// entryIn is an event that carries, in a namespace, the conntrack entry
// of the connection packet t belongs to (not a tunnel's, which an
// encapsulated packet carries).
func entryIn(f *flow.Flow, netns uint32, t event.Tuple) *event.Event {
	_, e := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return e.Netns == netns && e.HasCT() && (sameConn(e.CT.Orig, t) || sameConn(e.CT.Reply, t))
	})
	return e
}

// sameConn says whether two tuples are one direction of one connection,
// whatever their TCP flags.
func sameConn(a, b event.Tuple) bool {
	return a.Proto == b.Proto && src(a) == src(b) && dst(a) == dst(b)
}

// untranslated says what NAT left undone on an INVALID packet, when the
// entry records a translation.
func untranslated(entry *event.Event) string {
	if entry.CT.Status&(event.CTDstNAT|event.CTSrcNAT) == 0 {
		return ""
	}
	return ", so NAT did not translate it (the entry's translation applies only to packets conntrack accepts)"
}

// invalidFate says what became of the INVALID packet after the verdict:
// the rule that dropped it, another drop, or the reset its receiver
// answered it with.
func (fd *Finding) invalidFate(n Context, f *flow.Flow, p *flow.Packet, inv *event.Event) string {
	for i := range p.Events {
		e := &p.Events[i]
		if e.Time < inv.Time || e.Point != event.PointDrop {
			continue
		}
		if !dropped(n, e, "NETFILTER_DROP") || e.Netns != inv.Netns {
			fd.Evidence = append(fd.Evidence, evidence(n, e, "dropped on %s: %s", where(n, e), n.ReasonName(e.Drop.Reason)))
			return fmt.Sprintf(", and was dropped on %s (%s)", where(n, e), n.ReasonName(e.Drop.Reason))
		}
		fd.NetfilterRules = dropRules(n, e, "INVALID", hooksAfter(inv.Hook)...)
		fd.Evidence = append(fd.Evidence, evidence(n, e, "dropped on %s: NETFILTER_DROP", where(n, e)))
		fd.Evidence = append(fd.Evidence, ruleFacts(n, e, fd.NetfilterRules)...)
		if c := ruleClause(fd.NetfilterRules); c != "" {
			decided := fd.NetfilterRules[0]
			return fmt.Sprintf(", and %s dropped it in %s", strings.TrimSuffix(c, " decided"),
				strings.Join(append([]string{decided.Hook}, decided.OrHooks...), " or "))
		}
		return ", and a netfilter DROP verdict dropped it (" + hookAfter(inv.Hook) + ")"
	}
	receiver := inv.Current().Dst
	if _, rst := find(f, func(_ *flow.Packet, e *event.Event) bool {
		t := e.Current()
		return e.Time > inv.Time && e.Point != event.PointTCP && t.TCPFlags&tcpRST != 0 && t.Src == receiver
	}); rst != nil {
		fd.Evidence = append(fd.Evidence, evidence(n, rst, "%s answered with a reset", receiver))
		return fmt.Sprintf(", reached %s untranslated, and was answered with a reset", receiver)
	}
	return ""
}
