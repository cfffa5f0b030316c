package explain

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/nettrace-dev/nettrace/internal/fixture"
	"github.com/nettrace-dev/nettrace/pkg/event"
	"github.com/nettrace-dev/nettrace/pkg/ruleset"
)

const mangleDropRules = `*mangle
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -d 10.0.0.2/32 -p tcp -m tcp --dport 9000 -j DROP
COMMIT
`

func TestConntrackClash(t *testing.T) {
	parse := func(text string) map[uint32]*ruleset.Ruleset {
		rs, err := ruleset.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		return map[uint32]*ruleset.Ruleset{fixture.Netns("n2"): rs}
	}
	edit := func(change func(evs []event.Event) []event.Event) []event.Event {
		return change(fixture.ConntrackClash())
	}
	for _, tc := range []struct {
		name     string
		events   []event.Event
		rulesets map[uint32]*ruleset.Ruleset
		want     string // the rule Explain reports
		facts    []string
	}{
		{"new entry dropped after POSTROUTING NAT, no rule", fixture.ConntrackClash(), parse(filterRules), "conntrack-clash",
			[]string{"packet 10.0.0.1:40000 -> 10.0.0.2:9000 was dropped by conntrack in n2 POSTROUTING: its new conntrack entry lost a race"}},
		// Masqueraded: the sender's tuple, and the translation that clashed.
		{"SNATed at POSTROUTING", edit(func(evs []event.Event) []event.Event {
			snat := netip.MustParseAddr("10.0.0.254")
			for i := range evs[1:] {
				evs[1+i].Tuple.Src = snat
			}
			return evs
		}), parse(filterRules), "conntrack-clash",
			[]string{"packet 10.0.0.1:40000 -> 10.0.0.2:9000 was dropped by conntrack in n2 POSTROUTING: its new conntrack entry, translated to 10.0.0.254:40000 -> 10.0.0.2:9000, lost a race"}},
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
			flows := flowsOf(t, tc.events)
			if len(flows) != 1 {
				t.Fatalf("%d flows, want 1", len(flows))
			}
			fd := Explain(flows[0], fixture.Context{Rulesets: tc.rulesets})
			if fd == nil || fd.Rule != tc.want {
				t.Fatalf("finding %+v, want %s", fd, tc.want)
			}
			if tc.want != "conntrack-clash" {
				return
			}
			for _, fact := range append(tc.facts, "conntrack clash", "insert_failed") {
				if !strings.Contains(fd.Summary, fact) {
					t.Errorf("summary lacks %q: %s", fact, fd.Summary)
				}
			}
			if len(fd.Evidence) != 2 || fd.Severity != "warning" {
				t.Errorf("evidence %d, severity %q: %+v", len(fd.Evidence), fd.Severity, fd)
			}
		})
	}
}
