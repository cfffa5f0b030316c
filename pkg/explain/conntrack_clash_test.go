package explain

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/flow"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

const mangleDropRules = `*mangle
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -d 10.0.0.2/32 -p tcp -m tcp --dport 9000 -j DROP
COMMIT
`

// keepPortsRules masquerade what n2 sends out eth1 with a MASQUERADE that
// keeps source ports (no --random-fully).
const keepPortsRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -s 10.0.0.0/24 -o eth1 -j MASQUERADE
COMMIT
` + filterRules

// snatted is fixture.ConntrackClash masqueraded to 10.0.0.254 at
// POSTROUTING.
func snatted(evs []event.Event) []event.Event {
	snat := netip.MustParseAddr("10.0.0.254")
	for i := range evs[1:] {
		evs[1+i].Tuple.Src = snat
	}
	return evs
}

// queuedPortClash is snatted's packet held by a queue after SNAT and freed
// when the queue gave it back, and its retransmission, SNATed to another
// port a second later.
func queuedPortClash(evs []event.Event) []event.Event {
	evs = snatted(evs)
	evs[2].Drop.Reason, evs[2].Drop.Location = fixture.Reason("NOT_SPECIFIED"), fixture.QueueReinject
	next := evs[1]
	next.Skb, next.Time, next.Tuple.Sport = 0x181, next.Time+1_000_000_000, 50000
	return append(evs, next)
}

func TestConntrackClash(t *testing.T) {
	parse := func(text string) map[uint32]*ruleset.Ruleset { return n2Rulesets(t, text) }
	edit := func(change func(evs []event.Event) []event.Event) []event.Event {
		return change(fixture.ConntrackClash())
	}
	for _, tc := range []explainCase{
		{"new entry dropped after POSTROUTING NAT, no rule", fixture.ConntrackClash(), parse(filterRules), "conntrack-clash",
			[]string{"packet 10.0.0.1:40000 -> 10.0.0.2:9000 was dropped by conntrack in n2 POSTROUTING: its new conntrack entry lost a race"}},
		// Masqueraded: the sender's tuple, and the translation that clashed.
		{"SNATed at POSTROUTING", edit(snatted), parse(filterRules), "conntrack-clash",
			[]string{"packet 10.0.0.1:40000 -> 10.0.0.2:9000 was dropped by conntrack in n2 POSTROUTING: its new conntrack entry, translated to 10.0.0.254:40000 -> 10.0.0.2:9000, lost a race",
				"Two connections were given source 10.0.0.254:40000 by SNAT: the other's entry was confirmed first."}},
		// kubernetes#76699: the masquerade kept the port, a queue after it
		// held the packet, and its hook dropped it when the queue gave it
		// back; the next try was given another port.
		{"SNATed keeping ports, freed after a queue", edit(queuedPortClash), parse(keepPortsRules), "conntrack-clash",
			[]string{"the other's entry was confirmed first, and the retransmission was given port 50000.",
				"nat POSTROUTING rule 1 (MASQUERADE) keeps each connection's source port when it can: with `--random-fully`"}},
		{"freed without a reason elsewhere: no verdict", edit(func(evs []event.Event) []event.Event {
			evs[2].Drop.Reason = fixture.Reason("NOT_SPECIFIED")
			return evs
		}), parse(filterRules), "", nil},
		// Without the ruleset, a rule may have dropped it: the drop is
		// told as it is.
		{"ruleset unknown", fixture.ConntrackClash(), nil, "dropped-by-netfilter", nil},
		{"a POSTROUTING rule drops it", fixture.ConntrackClash(), parse(mangleDropRules), "dropped-by-netfilter", nil},
		// Confirmation runs at the last hook only: a drop with PREROUTING
		// the last NAT hook seen is the filter chains'.
		{"last NAT hook PREROUTING", edit(func(evs []event.Event) []event.Event {
			return []event.Event{evs[0], evs[2]}
		}), parse(filterRules), "dropped-by-netfilter", nil},
		// A packet of a confirmed connection carries no entry to confirm.
		{"established entry", edit(func(evs []event.Event) []event.Event {
			for i := range evs {
				evs[i].CT.Info = 0
			}
			return evs
		}), parse(filterRules), "dropped-by-netfilter", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := explainOne(t, tc)
			if tc.want != "conntrack-clash" {
				return
			}
			for _, fact := range []string{"conntrack clash", "insert_failed"} {
				if !strings.Contains(fd.Summary, fact) {
					t.Errorf("summary lacks %q: %s", fact, fd.Summary)
				}
			}
			if len(fd.Evidence) < 2 || fd.Severity != "warning" {
				t.Errorf("evidence %d, severity %q: %+v", len(fd.Evidence), fd.Severity, fd)
			}
		})
	}
}

// winnerAt is another pod's first packet, 10.0.0.3:40000 -> 10.0.0.2:9000,
// given the same source as snatted's at POSTROUTING, with an entry of its
// own, SNATed at kernel time at.
func winnerAt(at uint64) []event.Event {
	s := fixture.Seq{Now: at - 20_000} // two events, 10 µs apart
	pre := fixture.T("10.0.0.3:40000", "10.0.0.2:9000", fixture.SYN)
	post := pre
	post.Src = netip.MustParseAddr("10.0.0.254")
	ct := fixture.CT(0xc6, pre, post.Reverse(), 0, false)
	ct.Info = 2 // IP_CT_NEW
	return []event.Event{
		fixture.NAT(&s, 0x190, "n2/eth0", event.HookPrerouting, pre, pre, ct),
		fixture.NAT(&s, 0x190, "n2/eth1", event.HookPostrouting, pre, post, ct),
	}
}

// The connection a port clash lost to is another flow: the correlator's
// index of SNATed entries names it, when it was SNATed before the drop.
func TestConntrackClashNamesTheOtherConnection(t *testing.T) {
	rs, err := ruleset.Parse(keepPortsRules)
	if err != nil {
		t.Fatal(err)
	}
	loser := snatted(fixture.ConntrackClash())
	drop := loser[2].Time
	for _, tc := range []struct {
		name   string
		events []event.Event
		want   string
	}{
		{"SNATed between the loser's NAT and its drop", append(winnerAt(drop-5_000), loser...),
			"the other, 10.0.0.3:40000 -> 10.0.0.2:9000 (entry 0xc6, SNATed 5µs before the drop), had its entry confirmed first"},
		{"SNATed after the drop: not the one", append(slices.Clone(loser), winnerAt(drop+20_000)...), "the other's entry was confirmed first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := flow.New(flow.DefaultConfig)
			var loserFlow *flow.Flow
			keep := func(f *flow.Flow) {
				if f.Tuple().Src == loser[0].Tuple.Src {
					loserFlow = f.Clone()
				}
			}
			slices.SortStableFunc(tc.events, func(a, b event.Event) int { return cmp.Compare(a.Time, b.Time) })
			for i := range tc.events {
				c.Add(&tc.events[i], keep)
			}
			c.Flush(keep)
			fd := Explain(loserFlow, fixture.Context{Rulesets: map[uint32]*ruleset.Ruleset{fixture.Netns("n2"): rs}, SNATs: c.SNATs().Before})
			if fd == nil || fd.Rule != "conntrack-clash" || !strings.Contains(fd.Summary, tc.want) {
				t.Fatalf("finding %+v, want conntrack-clash saying %q", fd, tc.want)
			}
		})
	}
}
