package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// conntrackClash: the first packet of a connection was dropped by
// conntrack itself when it confirmed the packet's new entry, because an
// entry for the same tuple was inserted first (two packets of one tuple
// each created an entry before either was confirmed: the race behind
// Kubernetes' "DNS lookups take 5 seconds", and behind a client reusing
// a port while its last connection's packets are still in flight).
//
// The kernel gives this drop no reason of its own (NETFILTER_DROP, like a
// rule's), so the rule reasons from where it happened: after the packet's
// NAT hook at POSTROUTING or INPUT, the last hooks of its path, nothing
// runs but conntrack's confirmation (priority INT_MAX) and chains a
// ruleset shows; with the namespace's ruleset known and none of its rules
// dropping the packet there, the confirmation did. Without the ruleset,
// dropped-by-netfilter tells the drop as it is.
func conntrackClash(f *flow.Flow, n Context) *Finding {
	p, drop := netfilterDrop(f, n)
	if drop == nil || !drop.HasCT() || !drop.CT.Created() {
		return nil
	}
	nat := lastNAT(p, drop)
	if nat == nil || (nat.Hook != event.HookPostrouting && nat.Hook != event.HookInput) {
		return nil
	}
	if rulesetAt(n, drop) == nil || dropRules(n, drop, "", nat.Hook) != nil {
		return nil
	}
	t, entry := packetTuple(drop), "its new conntrack entry"
	if translated(nat) {
		// Name the packet as its sender sent it, and the translation its
		// entry was given: two connections given one SNAT address and
		// port clash in the reply direction (a masquerade that keeps
		// source ports, without --random-fully).
		t = nat.NAT.Pre
		entry = fmt.Sprintf("its new conntrack entry, translated to %s -> %s,", src(nat.Tuple), dst(nat.Tuple))
	}
	fd := &Finding{
		Severity: "warning",
		Evidence: []Evidence{
			evidence(n, nat, "%s, the packet's last NAT hook: only conntrack's confirmation runs after it", natFact(n, nat)),
			evidence(n, drop, "dropped on %s: NETFILTER_DROP, the packet's conntrack entry 0x%x new and no rule of the ruleset dropping it at %s",
				where(n, drop), drop.CT.ID, nat.Hook),
		},
	}
	fd.Summary = fmt.Sprintf("%s %s -> %s was dropped by conntrack in %s %s: %s lost a race with an entry for the same tuple "+
		"inserted first (a conntrack clash, counted as insert_failed by `conntrack -S`); no rule drops it there.",
		packetWord(t), fd.atPod(n, src(t)), fd.atPod(n, dst(t)), n.NetnsName(drop.Netns), nat.Hook, entry)
	return fd
}

// lastNAT is the last NAT hook packet p passed before drop, in the drop's
// namespace.
func lastNAT(p *flow.Packet, drop *event.Event) *event.Event {
	var last *event.Event
	for i := range p.Events {
		e := &p.Events[i]
		if e.Time <= drop.Time && e.Point == event.PointNAT && e.Netns == drop.Netns {
			last = e
		}
	}
	return last
}

// packetWord names a packet by what it is, when that says something.
func packetWord(t event.Tuple) string {
	if isSYN(t) {
		return "SYN"
	}
	return "packet"
}
