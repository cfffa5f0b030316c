package explain

import (
	"fmt"
	"strings"
	"time"

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
	p, drop := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return verdictDrop(n, e) && e.Current().Proto == f.Tuple().Proto
	})
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
	t, entry := drop.Current(), "its new conntrack entry"
	if translated(nat) {
		// Name the packet as its sender sent it, and the translation its
		// entry was given: two connections given one SNAT address and
		// port clash in the reply direction.
		t = nat.NAT.Pre
		entry = fmt.Sprintf("its new conntrack entry, translated to %s -> %s,", src(nat.Tuple), dst(nat.Tuple))
	}
	fd := &Finding{
		Severity: "warning",
		Evidence: []Evidence{
			evidence(n, nat, "%s, the packet's last NAT hook: only conntrack's confirmation runs after it", natFact(n, nat)),
			evidence(n, drop, "dropped on %s: %s, the packet's conntrack entry 0x%x new and no rule of the ruleset dropping it at %s",
				where(n, drop), dropWords(n, drop), drop.CT.ID, nat.Hook),
		},
	}
	fd.Summary = fmt.Sprintf("%s %s -> %s was dropped by conntrack in %s %s: %s lost a race with an entry for the same tuple "+
		"inserted first (a conntrack clash, counted as insert_failed by `conntrack -S`); no rule drops it there.",
		packetWord(t), fd.atPod(n, src(t)), fd.atPod(n, dst(t)), n.NetnsName(drop.Netns), nat.Hook, entry)
	if nat.Translation()&event.TranslationSNAT != 0 {
		fd.Summary += fd.portClash(n, f, p, nat, drop)
	}
	return fd
}

// portClash says, of a clash of an SNATed packet, that two connections
// were given one source port, what the sender's next try was given, and
// the remedy when the rule that translated it keeps ports
// (kubernetes#76699): a masquerade keeps a connection's port when no
// confirmed entry has it, blind to entries not confirmed yet.
func (fd *Finding) portClash(n Context, f *flow.Flow, p *flow.Packet, nat, drop *event.Event) string {
	out := fmt.Sprintf(" Two connections were given source %s by SNAT: ", src(nat.Tuple)) + fd.clashedWith(n, nat, drop)
	if _, next := find(f, func(q *flow.Packet, e *event.Event) bool {
		return q != p && e.Netns == nat.Netns && e.Hook == nat.Hook && e.Translation()&event.TranslationSNAT != 0 &&
			e.NAT.Pre == nat.NAT.Pre && e.Tuple.Sport != nat.Tuple.Sport && !isReply(f, q)
	}); next != nil {
		fd.Evidence = append(fd.Evidence, evidence(n, next, "%s: the retransmission", natFact(n, next)))
		out += fmt.Sprintf(", and the retransmission was given port %d", next.Tuple.Sport)
	}
	fd.NetfilterRules = natRules(n, p, nat)
	fd.Evidence = append(fd.Evidence, ruleFacts(n, nat, fd.NetfilterRules)...)
	if len(fd.NetfilterRules) == 0 || strings.Contains(fd.NetfilterRules[0].Text, "--random-fully") {
		return out + "."
	}
	return out + fmt.Sprintf(". %s keeps each connection's source port when it can: with `--random-fully` it picks ports at random, and two connections meet on one far less often.",
		fd.NetfilterRules[0].String())
}

// clashedWith names the connection an SNATed packet's entry clashed
// with: another entry SNAT gave the same tuple before the drop, whatever
// flow it was in. Without one in the index (forgotten, or its record
// lost) the other is only said to exist.
func (fd *Finding) clashedWith(n Context, nat, drop *event.Event) string {
	other, ok := n.SNATedBefore(nat.Netns, nat.Tuple, drop.CT.ID, drop.Time)
	if !ok {
		return "the other's entry was confirmed first"
	}
	fd.Evidence = append(fd.Evidence, evidence(n, &other, "%s: the other connection's first packet, entry %#x", natFact(n, &other), other.CT.ID))
	return fmt.Sprintf("the other, %s -> %s (entry %#x, SNATed %s before the drop), had its entry confirmed first",
		fd.atPod(n, src(other.NAT.Pre)), fd.atPod(n, dst(other.NAT.Pre)), other.CT.ID,
		time.Duration(drop.Time-other.Time).Round(time.Microsecond))
}

// verdictDrop says whether a drop was a netfilter hook's verdict: the hook
// dropped the packet (NETFILTER_DROP), or a netfilter queue gave it back
// and a later function of its hook dropped it, which nf_reinject frees
// without a reason.
func verdictDrop(n Context, e *event.Event) bool {
	return droppedAs(n, e, "NETFILTER_DROP", "nf_reinject", "nfqnl_reinject")
}

// dropWords names a netfilter drop as the kernel reported it.
func dropWords(n Context, e *event.Event) string {
	if r := n.ReasonName(e.Drop.Reason); r != "NOT_SPECIFIED" {
		return r
	}
	return "freed by " + n.SymbolName(e.Drop.Location) + " (a verdict after the netfilter queue gave it back)"
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
