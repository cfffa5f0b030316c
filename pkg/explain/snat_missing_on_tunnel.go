package explain

import (
	"fmt"
	"strings"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// snatMissingOnTunnel: the request was DNATed to a remote endpoint and
// encapsulated without SNAT, with a source the remote side routes back
// outside the tunnel (the node's own underlay address); the reply then
// misses the conntrack entry that would undo the DNAT.
func snatMissingOnTunnel(f *flow.Flow, n Context) *Finding {
	p, d := dnat(f)
	if d == nil {
		return nil
	}
	enter, encap := tunnelHop(p, d)
	if encap == nil || encap.Inner.Src != d.NAT.Pre.Src {
		return nil // not tunnelled, or SNATed on the way
	}
	tunnelDev := ""
	if enter != nil {
		tunnelDev = enter.Ifname.String()
	}
	replyRx, replyDrop, dropped := replyAt(f, d.Netns)
	outsideTunnel := replyRx != nil && replyRx.Ifname.String() != tunnelDev && !replyRx.HasInner()
	underlaySource := encap.Inner.Src == encap.VXLAN.Local
	if !outsideTunnel && !underlaySource && replyRx != nil {
		return nil
	}
	// Without the reply's drop, the finding rests on the reply not seen on
	// the tunnel: not seen at all, or seen where no tunnel device was.
	restsOnAbsence := replyDrop == nil && (replyRx == nil || enter == nil)
	if withheld(f, restsOnAbsence) {
		return nil // not worth writing: under overload most flows are incomplete
	}
	ns := n.NetnsName(d.Netns)
	fd := &Finding{Evidence: []Evidence{
		evidence(n, d, "%s", natFact(n, d)),
	}, restsOnAbsence: restsOnAbsence, Service: serviceOf(n, p, d, nil)}
	notSNATed := "not SNATed in POSTROUTING"
	if post := natAt(p, d.Netns, event.HookPostrouting); post != nil {
		fd.Evidence = append(fd.Evidence, evidence(n, post, "%s", natFact(n, post)))
		fd.NetfilterRules = natRules(n, p, post)
		fd.Evidence = append(fd.Evidence, ruleFacts(n, post, fd.NetfilterRules)...)
		if c := ruleClause(fd.NetfilterRules); c != "" {
			notSNATed = "not SNATed in POSTROUTING (" + c + ")"
		}
	}
	fd.Evidence = append(fd.Evidence, evidence(n, encap, "encapsulated on %s: VNI %d, %s -> VTEP %s, inner source %s",
		where(n, encap), encap.VXLAN.VNI, encap.VXLAN.Local, encap.VXLAN.Remote, encap.Inner.Src))
	via := "the tunnel"
	if tunnelDev != "" {
		via = tunnelDev
	}
	summary := fmt.Sprintf("SYN %s -> %s was DNATed to %s in %s %s, routed out of %s (VNI %d, remote VTEP %s) and %s: it left with source %s, which the remote side does not route back through the tunnel; ",
		fd.atPod(n, src(d.NAT.Pre)), withService(dst(d.NAT.Pre), fd.Service), fd.atPod(n, dst(d.Tuple)), ns, d.Hook, via, encap.VXLAN.VNI, encap.VXLAN.Remote, notSNATed, d.NAT.Pre.Src)
	switch {
	case replyDrop != nil:
		summary += fd.replyDropped(n, dropped, replyDrop)
	case replyRx != nil:
		summary += fmt.Sprintf("the reply came back on %s instead of %s, outside the conntrack path that would un-DNAT it", replyRx.Ifname, via)
		fd.Evidence = append(fd.Evidence, evidence(n, replyRx, "reply %s -> %s received on %s", src(replyRx.Tuple), dst(replyRx.Tuple), where(n, replyRx)))
	default:
		summary += "no reply came back through the tunnel, so it was never un-DNATed"
	}
	fd.Summary = summary + "."
	return fd
}

// tunnelHop returns where the DNATed packet p entered a vxlan device in
// d's namespace after d, and where it was encapsulated.
func tunnelHop(p *flow.Packet, d *event.Event) (enter, encap *event.Event) {
	for i := range p.Events {
		e := &p.Events[i]
		if e.Point != event.PointVXLAN || e.Netns != d.Netns || e.Time < d.Time {
			continue
		}
		if e.Kind == event.KindVXLANEnter && enter == nil {
			enter = e
		}
		if e.Kind == event.KindVXLANEncap && e.HasInner() && e.Inner.Dst == d.Tuple.Dst && encap == nil {
			encap = e
		}
	}
	return enter, encap
}

// replyAt returns where a reply of the flow was first received in netns,
// and where one was first dropped there, with its packet.
func replyAt(f *flow.Flow, netns uint32) (rx, drop *event.Event, dropped *flow.Packet) {
	for _, rp := range f.Packets {
		if !isReply(f, rp) {
			continue
		}
		for i := range rp.Events {
			e := &rp.Events[i]
			if e.Netns != netns {
				continue
			}
			if rx == nil && e.Point == event.PointDev && e.Kind == event.KindDevRx {
				rx = e
			}
			if drop == nil && e.Point == event.PointDrop {
				drop, dropped = e, rp
			}
		}
	}
	return rx, drop, dropped
}

// replyDropped says how the reply was dropped, the rule that did where one
// did, and adds its evidence.
func (fd *Finding) replyDropped(n Context, dropped *flow.Packet, drop *event.Event) string {
	reason := n.ReasonName(drop.Drop.Reason)
	what := "was dropped (" + reason + ")"
	switch reason {
	case "IP_RPFILTER":
		what = "was dropped by rp_filter (IP_RPFILTER)"
	case "NETFILTER_DROP":
		// IPv6 has no rp_filter: its reverse-path filter is a rule
		// (ip6tables' rpfilter match), which names itself.
		rules, _ := netfilterDropRules(n, dropped, drop)
		if c := ruleClause(rules); c != "" {
			what = "was dropped by " + strings.TrimSuffix(c, " decided") + " (NETFILTER_DROP)"
			fd.NetfilterRules = append(fd.NetfilterRules, rules...)
			fd.Evidence = append(fd.Evidence, ruleFacts(n, drop, rules)...)
		}
	}
	fd.Evidence = append(fd.Evidence, evidence(n, drop, "reply %s -> %s dropped on %s: %s", src(drop.Tuple), dst(drop.Tuple), where(n, drop), reason))
	return fmt.Sprintf("the reply came back on %s and %s, so it was never un-DNATed", drop.Ifname, what)
}
