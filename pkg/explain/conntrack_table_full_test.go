package explain

import (
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

// rawDropRules drop, ahead of conntrack, what fixture.ConntrackTableFull's SYN is.
const rawDropRules = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -d 10.0.0.2/32 -p tcp -m tcp --dport 9000 -j DROP
COMMIT
`

func TestConntrackTableFull(t *testing.T) {
	parse := func(text string) map[uint32]*ruleset.Ruleset { return n2Rulesets(t, text) }
	edit := func(change func(d *event.Event)) []event.Event {
		evs := fixture.ConntrackTableFull()
		for i := range evs {
			if evs[i].Point == event.PointDrop {
				change(&evs[i])
			}
		}
		return evs
	}
	for _, tc := range []explainCase{
		{"the table full, no rule", fixture.ConntrackTableFull(), parse(filterRules), "conntrack-table-full",
			[]string{"SYN 10.0.0.1:40000 -> 10.0.0.2:9000 was dropped by conntrack in n2, 2 times: its conntrack table was full (512 entries, at nf_conntrack_max 512; conntrack's drop counter, `conntrack -S`'s drop, rose by 3)",
				"no rule of the ruleset drops it.", "Raise net.netfilter.nf_conntrack_max", "`conntrack -L` in n2"}},
		{"ruleset unknown: said from conntrack's numbers", fixture.ConntrackTableFull(), nil, "conntrack-table-full", []string{"(the kernel logs \"nf_conntrack: table full, dropping packet\"). Raise"}},
		{"an entry gone before the reading", edit(func(d *event.Event) { d.Drop.CTCount = 510 }), parse(filterRules), "conntrack-table-full", nil},
		{"a raw rule drops it", fixture.ConntrackTableFull(), parse(rawDropRules), "dropped-by-netfilter", nil},
		{"the table not full", edit(func(d *event.Event) { d.Drop.CTCount = 200 }), parse(filterRules), "dropped-by-netfilter", nil},
		{"conntrack dropped nothing", edit(func(d *event.Event) { d.Drop.CTDrops = 0 }), parse(filterRules), "dropped-by-netfilter", nil},
		{"the table not read", edit(func(d *event.Event) { d.Drop = event.Drop{Reason: d.Drop.Reason} }), parse(filterRules), "dropped-by-netfilter", nil},
		{"another reason", edit(func(d *event.Event) { d.Drop.Reason = fixture.Reason("NOT_SPECIFIED") }), parse(filterRules), "no-reply", nil},
		// A packet with an entry was past conntrack's allocation: a clash
		// or a rule, not a full table.
		{"the packet had an entry", edit(func(d *event.Event) {
			d.Flags |= event.FlagCT
			d.CT = *fixture.CT(0xc6, d.Tuple, d.Tuple.Reverse(), 0, false)
		}), parse(filterRules), "dropped-by-netfilter", nil},
		// Conntrack's hook runs before NAT: a drop after a NAT hook in the
		// namespace is not its allocation's.
		{"after a NAT hook", func() []event.Event {
			evs := fixture.ConntrackTableFull()
			var s fixture.Seq
			s.Now = evs[0].Time - 5_000 // 5 µs after the reception, before the drop
			nat := fixture.NAT(&s, evs[0].Skb, "n2/eth0", event.HookPrerouting, evs[0].Tuple, evs[0].Tuple, nil)
			return append([]event.Event{evs[0], nat}, evs[1:]...)
		}(), parse(filterRules), "dropped-by-netfilter", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if fd := explainOne(t, tc); tc.want == "conntrack-table-full" && len(fd.Evidence) == 0 {
				t.Error("no evidence")
			}
		})
	}
}
