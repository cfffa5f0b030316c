package explain

import (
	"fmt"

	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
)

// conntrackTableFull: a packet was dropped by conntrack because its
// namespace's table was full ("nf_conntrack: table full, dropping
// packet"): conntrack counts the table's entries per namespace against
// one limit, nf_conntrack_max, and when no entry can be evicted (only
// entries not yet assured can) it drops the packet that needs a new one,
// at its hook in PREROUTING or OUTPUT, before any NAT.
//
// The kernel gives the drop no reason of its own (NETFILTER_DROP, like a
// rule's), and the packet no entry. What tells it apart is read in user
// space right after the drop (ctstat, in the drop event): the table at its
// limit and conntrack's drop counter risen. The rule asks for both, for
// the drop before any NAT hook in its namespace, and for no rule of the
// namespace's ruleset, when known, dropping the packet.
func conntrackTableFull(f *flow.Flow, n Context) *Finding {
	p, drop := find(f, func(_ *flow.Packet, e *event.Event) bool {
		return verdictDrop(n, e) && !e.HasCT() && tableFull(&e.Drop)
	})
	if drop == nil || lastNAT(p, drop) != nil {
		return nil
	}
	norule := ""
	if rulesetAt(n, drop) != nil {
		if dropRules(n, drop, "", hooksAfter(event.HookNone)...) != nil {
			return nil
		}
		norule = "; no rule of the ruleset drops it"
	}
	d, t := &drop.Drop, drop.Current()
	fd := &Finding{
		Evidence: []Evidence{evidence(n, drop, "dropped on %s: %s, with no conntrack entry; the namespace's conntrack table held %d entries of nf_conntrack_max %d, and conntrack's drop counter had risen by %d since nettrace began watching",
			where(n, drop), dropWords(n, drop), d.CTCount, d.CTMax, d.CTDrops)},
	}
	fd.Summary = fmt.Sprintf("%s %s -> %s was dropped by conntrack in %s%s: its conntrack table was full (%d entries, at "+
		"nf_conntrack_max %d; conntrack's drop counter, `conntrack -S`'s drop, rose by %d), so conntrack had no room for the "+
		"packet's new entry (the kernel logs \"nf_conntrack: table full, dropping packet\")%s. Raise "+
		"net.netfilter.nf_conntrack_max (set in the host's initial namespace; every namespace's table is held to it), or find "+
		"what fills the table with `conntrack -L` in %s.",
		packetWord(t), fd.atPod(n, src(t)), fd.atPod(n, dst(t)), n.NetnsName(drop.Netns), times(countDrops(f, n)), d.CTCount, d.CTMax,
		d.CTDrops, norule, n.NetnsName(drop.Netns))
	return fd
}

// countDrops counts the flow's packets conntrack dropped for a full table.
func countDrops(f *flow.Flow, n Context) int {
	count := 0
	for _, p := range f.Packets {
		for i := range p.Events {
			if e := &p.Events[i]; verdictDrop(n, e) && !e.HasCT() && tableFull(&e.Drop) {
				count++
			}
		}
	}
	return count
}

// times says how often, when more than once.
func times(n int) string {
	if n < 2 {
		return ""
	}
	return fmt.Sprintf(", %d times", n)
}

// tableFull says whether a drop's reading of its conntrack table shows
// the table at its limit and conntrack dropping packets. An entry may
// have gone between the drop and the reading: within 1 % of the limit is
// full.
func tableFull(d *event.Drop) bool {
	return d.CTRead() && d.CTDrops > 0 && uint64(d.CTCount)*100 >= uint64(d.CTMax)*99
}
