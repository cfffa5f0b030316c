package explain

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// staleConntrackEntry: a UDP conntrack entry goes on DNATing a Service's
// datagrams to an endpoint that no current rule chooses
// (kubernetes#59368, #126130). A UDP entry lives as long as datagrams
// refresh it, and conntrack translates every datagram after the first
// by the entry alone; kube-proxy deletes the entries of an endpoint it
// removes, and when that fails, or the sender raced it, the sender's
// datagrams keep going to the old address. Both halves are seen: the
// datagrams translated by an entry confirmed before them, and the
// namespace's ruleset in force then, which translates no first datagram
// so. Only harm counts: a drop on the way to the old endpoint, or, from
// two datagrams on, nothing back from it (which rests on absence).
func staleConntrackEntry(f *flow.Flow, n Context) *Finding {
	stale, rs := staleTranslations(f, n)
	if len(stale) == 0 {
		return nil
	}
	e := stale[0]
	endpoint := e.Tuple.Dst
	if _, answer := find(f, func(p *flow.Packet, r *event.Event) bool {
		return r.Time > e.Time && r.Current().Src == endpoint && isReply(f, p)
	}); answer != nil {
		return nil
	}
	drop := deadEndDrop(f, n, endpoint, e.Time)
	if drop == nil && len(stale) < 2 {
		return nil
	}
	choices := rs.DNATChoices(e.Hook.String(), ruleset.HookPacket(e, e.NAT.Pre))
	if len(choices) == 0 {
		return nil
	}
	ns := n.NetnsName(e.Netns)
	fd := &Finding{restsOnAbsence: drop == nil, Service: serviceOfNAT(choices[0].Rule, choices[0].Via)}
	fd.Evidence = append(fd.Evidence, evidence(n, e, "%s, by conntrack entry %#x, confirmed before this datagram: the entry's translation, not the rules'", natFact(n, e), e.CT.ID),
		evidence(n, e, "no rule of %s's nat tables at %s translates %s -> %s to %s", ns, e.Hook, src(e.NAT.Pre), dst(e.NAT.Pre), dst(e.Tuple)))
	var now []string
	for _, a := range choices {
		nr := named(rs, e, a, a.Rule, RoleOther, SourceRuleset)
		fd.NetfilterRules = append(fd.NetfilterRules, nr)
		now = append(now, fd.atPod(n, toDestination(a.Rule, e.NAT.Pre.Dport))+" by "+nr.String())
	}
	fd.Evidence = append(fd.Evidence, ruleFacts(n, e, fd.NetfilterRules)...)
	summary := fmt.Sprintf("UDP %s -> %s was DNATed to %s in %s %s by an existing conntrack entry (%s), which no current rule chooses: the rules now choose %s. ",
		fd.atPod(n, src(e.NAT.Pre)), withService(dst(e.NAT.Pre), fd.Service), fd.atPod(n, dst(e.Tuple)), ns, e.Hook,
		entryAge(f, e), strings.Join(now, ", or "))
	if drop != nil {
		summary += fmt.Sprintf("Datagrams to %s were dropped on %s (%s)", endpoint, where(n, drop), n.ReasonName(drop.Drop.Reason))
		fd.Evidence = append(fd.Evidence, evidence(n, drop, "datagram to %s dropped on %s: %s", endpoint, where(n, drop), n.ReasonName(drop.Drop.Reason)))
	} else {
		summary += fmt.Sprintf("Nothing came back from %s for the %s sent there", endpoint, plural(len(stale), "datagram"))
	}
	fd.Summary = summary + fmt.Sprintf(". A UDP entry lives while datagrams refresh it: `conntrack -D -p udp --orig-dst %s --dst-nat %s` in %s removes it (as kube-proxy does when an endpoint goes; its log says why it did not).",
		e.NAT.Pre.Dst, endpoint, ns)
	return fd
}

// staleTranslations are the nat events of the flow's datagrams that an
// entry confirmed before them DNATed where the ruleset in force then
// would not (the first one's ruleset, of which it also returns): at
// PREROUTING or OUTPUT, where a Service's DNAT happens. All of one
// namespace and hook, to one destination. A flow's datagrams share their
// translation: the ruleset is walked once for each ruleset and
// destination they meet, not once a datagram.
func staleTranslations(f *flow.Flow, n Context) ([]*event.Event, *ruleset.Ruleset) {
	var stale []*event.Event
	var rs, walked *ruleset.Ruleset
	var walkedTo netip.AddrPort
	for _, p := range f.Packets {
		if isReply(f, p) {
			continue
		}
		for i := range p.Events {
			e := &p.Events[i]
			if !entryDNAT(e) {
				continue
			}
			if len(stale) > 0 {
				if first := stale[0]; e.Netns == first.Netns && e.Hook == first.Hook && e.Tuple.Dst == first.Tuple.Dst {
					stale = append(stale, e)
				}
				continue
			}
			at := rulesetAt(n, e)
			if at == nil || (at == walked && dst(e.Tuple) == walkedTo) {
				continue
			}
			walked, walkedTo = at, dst(e.Tuple)
			if at.NAT(e.Hook.String(), ruleset.HookPacket(e, e.NAT.Pre), ruleset.HookPacket(e, e.Tuple)) == nil {
				stale, rs = append(stale, e), at
			}
		}
	}
	return stale, rs
}

// entryDNAT says whether a nat event is a UDP datagram DNATed by an entry
// confirmed before it, where a Service's DNAT happens.
func entryDNAT(e *event.Event) bool {
	return e.Point == event.PointNAT && e.Flags&event.FlagPre != 0 && e.HasCT() && !e.CT.IsReply() &&
		e.CT.Status&event.CTConfirmed != 0 && e.Tuple.Proto == event.ProtoUDP &&
		e.Translation()&event.TranslationDNAT != 0 && (e.Hook == event.HookPrerouting || e.Hook == event.HookOutput)
}

// deadEndDrop is the first drop after time from of a packet to endpoint
// for want of a way to it: no neighbour, no route.
func deadEndDrop(f *flow.Flow, n Context, endpoint netip.Addr, from uint64) *event.Event {
	_, e := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return e.Point == event.PointDrop && e.Time >= from && e.Current().Dst == endpoint && noWay(n, e)
	})
	return e
}

// entryAge says how long before e the flow saw its entry created, by the
// first datagram that crossed the nat table, or that it was created
// before.
func entryAge(f *flow.Flow, e *event.Event) string {
	_, created := find(f, func(_ *flow.Packet, c *event.Event) bool {
		return c.Netns == e.Netns && c.HasCT() && c.CT.ID == e.CT.ID && ruleset.CrossesNAT(c)
	})
	if created == nil || created.Time > e.Time {
		return fmt.Sprintf("%#x, created before the first datagram seen", e.CT.ID)
	}
	age := time.Duration(e.Time - created.Time).Round(time.Millisecond)
	return fmt.Sprintf("%#x, created %s earlier, when the rules chose %s", e.CT.ID, age, dst(created.Tuple))
}

// toDestination is the address a DNAT rule translates to, its port the
// rule's or, when it names none, the packet's own; the first of a range.
func toDestination(r *ruleset.Rule, port uint16) netip.AddrPort {
	to, _, _ := strings.Cut(r.ToDestination, "-")
	if ap, err := netip.ParseAddrPort(to); err == nil {
		return ap
	}
	addr, _ := netip.ParseAddr(strings.Trim(to, "[]"))
	return netip.AddrPortFrom(addr, port)
}
